import { promises as fs } from "node:fs";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type Running } from "./service-fixture.js";

/** An MCP client from @modelcontextprotocol/sdk works in a workspace through the service, with the caller's token only. */
let svc: Running;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => {
  await svc?.close();
});

async function connect(user: string, sessionId: string): Promise<Client> {
  const client = new Client({ name: "test", version: "1" });
  const transport = new StreamableHTTPClientTransport(new URL(`${svc.url}/sessions/${sessionId}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${svc.tokens[user] ?? user}` } },
  });
  await client.connect(transport);
  return client;
}

describe("the MCP endpoint of a session's workspace", () => {
  it("lists and calls built-in tools, registered MCP servers' tools and skills", async () => {
    const created = await svc.call("alice", "POST", "/sessions", { agentId: "mcp-user" });
    const { sessionId, workspaceId } = (await created.json()) as { sessionId: string; workspaceId: string };
    const echo = { name: "echo", transport: { type: "stdio", command: process.execPath, args: [path.resolve("test/fixtures/mcp/echo-server.mjs")] } };
    expect((await svc.call("alice", "POST", `/sessions/${sessionId}/workspace/mcp`, echo)).status).toBe(201);
    const form = new FormData();
    const skill = "---\nname: greeter\ndescription: Greets people.\n---\nSay hello politely.\n";
    form.set("manifest", JSON.stringify({ entries: [{ path: "greeter/SKILL.md", size: Buffer.byteLength(skill) }] }));
    form.append("files", new Blob([skill]), "SKILL.md");
    expect((await svc.call("alice", "POST", `/sessions/${sessionId}/workspace/skills`, form)).status).toBe(201);

    const client = await connect("alice", sessionId);
    try {
      const names = (await client.listTools()).tools.map((t) => t.name);
      expect(names).toEqual(expect.arrayContaining(["Bash", "Read", "Write", "Edit", "Glob", "Grep", "mcp__echo__add", "Skill"]));
      const write = await client.callTool({ name: "Write", arguments: { file_path: "hello.txt", content: "from an MCP client" } });
      expect(write.isError).toBe(false);
      expect(await fs.readFile(path.join(svc.basedir, workspaceId, "hello.txt"), "utf8")).toBe("from an MCP client");
      const bash = await client.callTool({ name: "Bash", arguments: { command: "cat hello.txt" } });
      expect(JSON.stringify(bash.content)).toContain("from an MCP client");
      const sum = await client.callTool({ name: "mcp__echo__add", arguments: { a: 2, b: 40 } });
      expect(JSON.stringify(sum.content)).toContain("42");
      const loaded = await client.callTool({ name: "Skill", arguments: { name: "greeter" } });
      expect(JSON.stringify(loaded.content)).toContain("Say hello politely.");
      await expect(client.callTool({ name: "NoSuchTool", arguments: {} })).rejects.toThrow(/Unknown tool: NoSuchTool/);
      const escaped = await client.callTool({ name: "Read", arguments: { file_path: "../../etc/passwd" } });
      expect(escaped.isError).toBe(true);
      expect(JSON.stringify(escaped.content)).toMatch(/path/);
    } finally {
      await client.close();
    }
  });

  it("refuses another user's session and an unknown token before any MCP message", async () => {
    const created = await svc.call("alice", "POST", "/sessions", { agentId: "mcp-private" });
    const { sessionId } = (await created.json()) as { sessionId: string };
    await expect(connect("bob", sessionId)).rejects.toThrow(/404|not found/i);
    await expect(connect("forged-token", sessionId)).rejects.toThrow(/401|unauthenticated|bearer/i);
    const raw = await fetch(`${svc.url}/sessions/${sessionId}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${svc.tokens.bob}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "Bash", arguments: { command: "touch pwned" } } }),
    });
    expect(raw.status).toBe(404);
    expect(raw.headers.get("content-type")).toContain("application/problem+json");
  });
});
