import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type Running } from "./service-fixture.js";

/**
 * Issue 26, item 12: the MCP endpoint against the 2025-11-25 spec. Bad tool input is a tool result
 * with `isError` (the model can correct itself), an unknown tool is JSON-RPC -32602 "Unknown tool",
 * GET and DELETE are 405 (a stateless endpoint offers no SSE stream and no session to end), and
 * Origin and Host are validated (403), so a DNS-rebinding page cannot reach a loopback service.
 */
let svc: Running;
let proxied: Running;
beforeAll(async () => {
  svc = await startTestService();
  proxied = await startTestService({ app: { allowedHosts: ["agents.example.com"], allowedOrigins: ["https://console.example.com"] } });
});
afterAll(async () => {
  await svc?.close();
  await proxied?.close();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A raw HTTP request, so the Host header can be anything (fetch always sends the URL's). */
function send(url: string, method: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((ok, fail) => {
    const req = http.request(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => ok({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
    });
    req.on("error", fail);
    req.end(body);
  });
}

async function session(s: Running): Promise<string> {
  const created = await s.call("alice", "POST", "/sessions", { agentId: "mcp-conformance" });
  return ((await created.json()) as { sessionId: string }).sessionId;
}

const MCP_HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" };

function rpc(s: Running, sessionId: string, method: string, params: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return send(
    `${s.url}/sessions/${sessionId}/mcp`,
    "POST",
    { ...MCP_HEADERS, authorization: `Bearer ${s.tokens.alice}`, ...headers },
    JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  );
}

describe("MCP endpoint conformance (2025-11-25)", () => {
  it("answers bad tool input with a tool result flagged isError, not a protocol error", async () => {
    const id = await session(svc);
    for (const args of [{ file_path: 42 }, {}, { file_path: "../../etc/passwd" }]) {
      const res = await rpc(svc, id, "tools/call", { name: "Read", arguments: args });
      expect(res.status).toBe(200);
      const msg = JSON.parse(res.body) as { result?: { isError?: boolean; content: { text: string }[] }; error?: unknown };
      expect(msg.error).toBeUndefined();
      expect(msg.result?.isError).toBe(true);
      expect(msg.result?.content[0]?.text).toMatch(/^Error: .*(file_path|path)/);
    }
    const skill = JSON.parse((await rpc(svc, id, "tools/call", { name: "Skill", arguments: { name: "no-such-skill" } })).body) as {
      result?: { isError?: boolean };
    };
    expect(skill.result?.isError).toBe(true);
  });

  it("answers an unknown tool with JSON-RPC -32602 'Unknown tool'", async () => {
    const id = await session(svc);
    for (const name of ["NoSuchTool", "mcp__undeclared__tool", "mcp__"]) {
      const msg = JSON.parse((await rpc(svc, id, "tools/call", { name, arguments: {} })).body) as { error?: { code: number; message: string } };
      expect(msg.error).toEqual(expect.objectContaining({ code: -32602, message: `Unknown tool: ${name}` }));
    }
  });

  it("answers GET and DELETE with 405 and Allow: POST (no SSE stream, no session to end)", async () => {
    const id = await session(svc);
    for (const method of ["GET", "DELETE"]) {
      const res = await send(`${svc.url}/sessions/${id}/mcp`, method, { accept: "text/event-stream", authorization: `Bearer ${svc.tokens.alice}` });
      expect(res.status).toBe(405);
      expect(res.headers.allow).toBe("POST");
      expect(res.headers["content-type"]).toContain("application/problem+json");
    }
  });

  it("refuses a foreign Origin with 403 and accepts its own or a listed one", async () => {
    const id = await session(svc);
    const evil = await rpc(svc, id, "tools/list", {}, { origin: "http://evil.example" });
    expect(evil.status).toBe(403);
    expect(evil.body).not.toContain("evil.example");
    expect((await rpc(svc, id, "tools/list", {}, { origin: "null" })).status).toBe(403);
    expect((await rpc(svc, id, "tools/list", {}, { origin: new URL(svc.url).origin })).status).toBe(200);
    expect((await rpc(svc, id, "tools/list", {})).status).toBe(200);

    const pid = await session(proxied);
    expect((await rpc(proxied, pid, "tools/list", {}, { origin: "https://console.example.com" })).status).toBe(200);
    expect((await rpc(proxied, pid, "tools/list", {}, { origin: "https://other.example.com" })).status).toBe(403);
  });

  it("on loopback, refuses a Host that is not a loopback name (DNS rebinding), unless listed in allowedHosts", async () => {
    const id = await session(svc);
    const port = new URL(svc.url).port;
    expect((await rpc(svc, id, "tools/list", {}, { host: `rebind.evil.example:${port}` })).status).toBe(403);
    expect((await rpc(svc, id, "tools/list", {}, { host: `agents.example.com:${port}` })).status).toBe(403);
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, "localhost"]) expect((await rpc(svc, id, "tools/list", {}, { host })).status).toBe(200);

    const pid = await session(proxied);
    expect((await rpc(proxied, pid, "tools/list", {}, { host: "agents.example.com" })).status).toBe(200);
    expect((await rpc(proxied, pid, "tools/list", {}, { host: "rebind.evil.example" })).status).toBe(403);
  });
});
