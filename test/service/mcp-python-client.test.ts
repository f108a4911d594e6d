import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type Running } from "./service-fixture.js";

/**
 * Issue 26, must show: the MCP endpoint driven by an MCP client nobody here wrote, the official MCP
 * Python SDK (`mcp`, pinned in scripts/mcp-python-client.sh, which builds a cached venv on the first
 * run), over streamable HTTP with a bearer token, through every built-in tool and Skill.
 */
const run = promisify(execFile);
let svc: Running;
let python: string;
beforeAll(async () => {
  // First run on a fresh machine: creates the venv (pip from PyPI); later runs find it cached.
  python = (await run(path.resolve("scripts/mcp-python-client.sh"), [], { timeout: 280_000 })).stdout.trim();
  svc = await startTestService();
}, 300_000);
afterAll(async () => {
  await svc?.close();
});

interface Output {
  server: string;
  protocolVersion: string;
  tools: string[];
  calls: Record<string, { isError: boolean; text: string }>;
  unknown: { code: number; message: string } | null;
}

describe("the MCP endpoint driven by the MCP Python SDK", () => {
  it("lists and calls Bash, Read, Write, Edit, Glob, Grep and Skill with a bearer token", async () => {
    const created = await svc.call("alice", "POST", "/sessions", { agentId: "python-client" });
    const { sessionId, workspaceId } = (await created.json()) as { sessionId: string; workspaceId: string };
    const form = new FormData();
    const skill = "---\nname: greeter\ndescription: Greets people.\n---\nSay hello politely.\n";
    form.set("manifest", JSON.stringify({ entries: [{ path: "greeter/SKILL.md", size: Buffer.byteLength(skill) }] }));
    form.append("files", new Blob([skill]), "SKILL.md");
    expect((await svc.call("alice", "POST", `/sessions/${sessionId}/workspace/skills`, form)).status).toBe(201);

    const { stdout } = await run(python, [path.resolve("test/service/fixtures/mcp_python_client.py")], {
      env: { ...process.env, MCP_URL: `${svc.url}/sessions/${sessionId}/mcp`, MCP_TOKEN: svc.tokens.alice! },
      timeout: 120_000,
    });
    const out = JSON.parse(stdout) as Output;
    expect(out.server).toBe(`agent-workspaces/${workspaceId}`);
    expect(out.tools).toEqual(["Bash", "Edit", "Glob", "Grep", "Read", "Skill", "Write"]);
    const c = out.calls;
    expect(Object.keys(c)).toEqual(["0:Write", "1:Read", "2:Edit", "3:Bash", "4:Glob", "5:Grep", "6:Skill", "7:Skill", "8:Read"]);
    for (const [call, result] of Object.entries(c)) if (call !== "8:Read") expect({ call, isError: result.isError }).toEqual({ call, isError: false });
    expect(c["1:Read"]!.text).toContain("hello from python");
    expect(c["3:Bash"]!.text).toContain("edited line");
    expect(c["3:Bash"]!.text).toContain("bash-ran");
    expect(c["4:Glob"]!.text).toContain("hello.txt");
    expect(c["5:Grep"]!.text).toContain("edited line");
    expect(c["6:Skill"]!.text).toContain("greeter: Greets people.");
    expect(c["7:Skill"]!.text).toContain("Say hello politely.");
    // Bad input is a tool error the model can read; an unknown tool is the spec's -32602.
    expect(c["8:Read"]).toEqual({ isError: true, text: expect.stringContaining("file_path") });
    expect(out.unknown).toEqual({ code: -32602, message: "Unknown tool: NoSuchTool" });
  });
});
