import { promises as fs } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { startTestService, type Running } from "./service-fixture.js";

/**
 * Issue 26, item 9: one unreachable MCP server must cost only its own tools. A session declares a
 * working HTTP MCP server, one on a closed loopback port (its URL and header carry secrets) and one
 * that accepts connections and never answers. tools/list still offers the built-ins, the working
 * server's tools and Skill, and names each failing server as unavailable with the reason (secrets
 * masked); calls to built-ins and the working server succeed without touching the others, and a
 * call to the dead server is a tool error naming it.
 */
const SECRET_QUERY = "q-secret-5b1e0f7a9c";
const SECRET_HEADER = "h-secret-8d2c4e6f1a";

interface Listener {
  url: string;
  /** TCP connections accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

async function listen(handle: http.RequestListener): Promise<Listener> {
  let connections = 0;
  const server = http.createServer(handle);
  server.on("connection", () => void connections++);
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    get connections() {
      return connections;
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}

/** A stateless MCP server over streamable HTTP with one tool, `shout`. */
const working: http.RequestListener = async (req, res) => {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  const mcp = new McpServer({ name: "working", version: "1.0.0" });
  mcp.registerTool("shout", { description: "Upper-cases text", inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: "text", text: text.toUpperCase() }],
  }));
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await mcp.connect(transport);
  await transport.handleRequest(req, res, text ? JSON.parse(text) : undefined);
};

let svc: Running;
let good: Listener;
let hung: Listener;
let deadPort: number;
beforeAll(async () => {
  // Loopback MCP servers are refused by the default egress policy: these tests list them.
  svc = await startTestService({ egress: { allow: ["127.0.0.1"] }, limits: { mcpListTimeoutMs: 1500 } });
  good = await listen(working);
  hung = await listen(() => undefined);
  const closed = await listen(() => undefined);
  deadPort = Number(new URL(closed.url).port);
  await closed.close();
});
afterAll(async () => {
  await svc?.close();
  await good?.close();
  await hung?.close();
});

describe("a dead MCP server beside a working one", () => {
  it("costs only its own tools: listed as unavailable with the reason, built-ins and the working server still answer", async () => {
    const created = await svc.call("alice", "POST", "/sessions", { agentId: "mcp-availability" });
    const { sessionId, workspaceId } = (await created.json()) as { sessionId: string; workspaceId: string };
    const specs = [
      { name: "good", transport: { type: "http", url: good.url } },
      { name: "dead", transport: { type: "http", url: `http://127.0.0.1:${deadPort}/mcp?token=${SECRET_QUERY}`, headers: { "X-Api-Key": SECRET_HEADER } } },
      { name: "hung", transport: { type: "http", url: hung.url } },
    ];
    for (const spec of specs) expect((await svc.call("alice", "POST", `/sessions/${sessionId}/workspace/mcp`, spec)).status).toBe(201);
    await fs.writeFile(path.join(svc.basedir, workspaceId, "notes.txt"), "kept notes\n");

    const client = new Client({ name: "test", version: "1" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${svc.url}/sessions/${sessionId}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${svc.tokens.alice}` } },
      }),
    );
    try {
      const listed = await client.listTools();
      const names = listed.tools.map((t) => t.name);
      expect(names).toEqual(
        expect.arrayContaining([
          "Bash",
          "Read",
          "Write",
          "Edit",
          "Glob",
          "Grep",
          "mcp__good__shout",
          "Skill",
          "mcp__dead__unavailable",
          "mcp__hung__unavailable",
        ]),
      );
      expect(names.filter((n) => n.startsWith("mcp__dead__") || n.startsWith("mcp__hung__"))).toEqual(["mcp__dead__unavailable", "mcp__hung__unavailable"]);
      const dead = listed.tools.find((t) => t.name === "mcp__dead__unavailable")!;
      expect(dead.description).toMatch(/MCP server 'dead' is unavailable.*failed during initialize/);
      expect(listed.tools.find((t) => t.name === "mcp__hung__unavailable")!.description).toMatch(/MCP server 'hung' .*did not list its tools within 1500 ms/);
      expect(JSON.stringify(listed)).not.toContain(SECRET_QUERY);
      expect(JSON.stringify(listed)).not.toContain(SECRET_HEADER);

      // Calls resolve the named tool alone: the hung server sees no new connection from any of them.
      const hungBefore = hung.connections;
      const bash = await client.callTool({ name: "Bash", arguments: { command: "echo from-bash" } });
      expect(bash.isError).toBe(false);
      expect(JSON.stringify(bash.content)).toContain("from-bash");
      const read = await client.callTool({ name: "Read", arguments: { file_path: "notes.txt" } });
      expect(read.isError).toBe(false);
      expect(JSON.stringify(read.content)).toContain("kept notes");
      const shout = await client.callTool({ name: "mcp__good__shout", arguments: { text: "still here" } });
      expect(shout.isError).toBe(false);
      expect(JSON.stringify(shout.content)).toContain("STILL HERE");
      expect((await client.callTool({ name: "Skill", arguments: {} })).isError).toBeFalsy();
      expect(hung.connections).toBe(hungBefore);

      const failed = await client.callTool({ name: "mcp__dead__anything", arguments: {} });
      expect(failed.isError).toBe(true);
      expect(JSON.stringify(failed.content)).toContain("MCP server 'dead'");
      expect(JSON.stringify(failed)).not.toContain(SECRET_QUERY);
      expect(JSON.stringify(failed)).not.toContain(SECRET_HEADER);
    } finally {
      await client.close();
    }
  });
});
