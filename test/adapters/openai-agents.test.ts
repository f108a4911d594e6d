import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import { Agent, Usage, run, setTracingDisabled, type AgentInputItem, type Model, type ModelRequest, type ModelResponse } from "@openai/agents";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { workspaceMcpServers, workspaceTools } from "../../sdk/adapters/openai-agents/index.js";
import type { Workspace, WorkspaceTool } from "../../sdk/index.js";
import { AGENT, REMINDER, SESSION, openWorkspace, readAgentFile, tempBase, type Kind } from "./fixtures.js";

// No traces leave a test run.
setTracingDisabled(true);

/** A Model that plays a script: one list of function calls per turn, then a final message. */
class ScriptedModel implements Model {
  readonly requests: ModelRequest[] = [];
  #turn = 0;
  constructor(readonly script: Array<Array<{ tool: string; input: unknown }>>) {}
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(structuredClone(request));
    const calls = this.script[this.#turn++];
    if (!calls)
      return { usage: new Usage(), output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "done" }] }] };
    return {
      usage: new Usage(),
      output: calls.map((c, i) => ({
        type: "function_call",
        callId: `call${this.#turn}_${i}`,
        name: c.tool,
        arguments: JSON.stringify(c.input),
        status: "completed",
      })),
    };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error("not scripted");
  }
  /** Tool outputs the model was given, by call id. */
  outputs(): Map<string, string> {
    const out = new Map<string, string>();
    const input = this.requests.at(-1)!.input as AgentInputItem[];
    for (const item of input) {
      const i = item as { type?: string; callId?: string; output?: unknown };
      if (i.type !== "function_call_result") continue;
      const o = i.output as string | { type: string; text: string };
      out.set(i.callId!, typeof o === "string" ? o : typeof o.text === "string" ? o.text : JSON.stringify(o));
    }
    return out;
  }
}

const SEQ = "seq 1 5000";

describe.each<Kind>(["local", "bubblewrap"])("OpenAI Agents on a %s workspace", (kind) => {
  let base: string;
  let ws: Workspace;
  beforeAll(async () => {
    base = await tempBase();
    ws = await openWorkspace(kind, base);
  });
  afterAll(async () => {
    await ws?.close();
    await fs.rm(base, { recursive: true, force: true });
  });

  it("runs Bash, an in-sandbox MCP tool, a skill, a tool group and an offloaded result end to end", async () => {
    const kit = await workspaceTools(ws, { agentId: AGENT, sessionId: SESSION, groups: { files: ["Write", "Edit"] }, toolResultLimit: 1000 });
    const model = new ScriptedModel([
      [{ tool: "Bash", input: { command: "echo hello-from-bash" } }],
      [
        { tool: "mcp__echo__echo", input: { text: "ping" } },
        { tool: "mcp__echo__env", input: { name: "HOME" } },
      ],
      [
        { tool: "Skill", input: {} },
        { tool: "Skill", input: { name: "alpha" } },
      ],
      [{ tool: "Write", input: { file_path: "notes.txt", content: "hi" } }],
      [{ tool: "ActivateToolGroup", input: { group: "files" } }],
      [{ tool: "Write", input: { file_path: "notes.txt", content: "hi" } }],
      [{ tool: "Bash", input: { command: SEQ } }],
      [{ tool: "Bash", input: { command: 5 } }],
    ]);
    const agent = new Agent({ name: "worker", instructions: ws.getInstructions(), model, tools: kit.tools });
    const result = await run(agent, "work", { maxTurns: 20, callModelInputFilter: kit.callModelInputFilter() });
    expect(result.finalOutput).toBe("done");
    const r = model.outputs();
    expect(r.get("call1_0")).toContain("hello-from-bash");
    expect(r.get("call2_0")).toBe("ping");
    expect(JSON.parse(r.get("call2_1")!).cwd).toBe(ws.getBackend().workdir);
    expect(r.get("call3_0")).toContain("- alpha: Counts words in text files.");
    expect(r.get("call3_1")).toMatch(/^# Skill: alpha\n/);
    expect(r.get("call4_0")).toBe(
      `Error: tool 'Write' is in the tool group 'files', which is not active. Call ActivateToolGroup with {"group":"files"} first, then call 'Write' again.`,
    );
    expect(r.get("call5_0")).toBe("Tool group 'files' is active. Its tools: Edit, Write.");
    expect((await ws.getBackend().readFile("notes.txt")).toString()).toBe("hi");

    const full = (
      await ws
        .listTools()
        .find((t) => t.name === "Bash")!
        .execute({ command: SEQ })
    ).output;
    const m = REMINDER.exec(r.get("call7_0")!)!;
    expect(m).not.toBeNull();
    expect(m[1]).toBe(`${ws.getBackend().workdir}/sessions/${SESSION}/tool_result-call7_0.txt`);
    expect(r.get("call7_0")!.slice(0, m.index) + (await readAgentFile(ws, m[1]!)).toString()).toBe(full);

    // Schema failure: a result the model reads, naming the field.
    expect(r.get("call8_0")).toMatch(/^Error: Bash\.command: /);
  });

  it("hands the workspace's MCP servers to an Agent as MCP servers", async () => {
    const servers = await workspaceMcpServers(ws, { agentId: AGENT, sessionId: SESSION });
    expect(servers.map((s) => s.name)).toEqual(["echo"]);
    const model = new ScriptedModel([[{ tool: "mcp__echo__add", input: { a: 2, b: 3 } }]]);
    const agent = new Agent({ name: "mcp", instructions: "x", model, mcpServers: servers });
    const result = await run(agent, "add", { maxTurns: 5 });
    expect(result.finalOutput).toBe("done");
    expect(JSON.parse(model.outputs().get("call1_0")!)).toEqual([{ type: "input_text", text: "5" }]);
  });
});

describe("OpenAI Agents context compression and large results", () => {
  let base: string;
  let ws: Workspace;
  beforeAll(async () => {
    base = await tempBase();
    ws = await openWorkspace("local", base);
  });
  afterAll(async () => {
    await ws?.close();
    await fs.rm(base, { recursive: true, force: true });
  });

  it("compresses older items into context.jsonl with the exact lines, once, with the summary reminder", async () => {
    const kit = await workspaceTools(ws, {
      agentId: AGENT,
      sessionId: "compress",
      compression: { contextTokens: 1000, summarize: () => "Summary: long input." },
    });
    const model = new ScriptedModel([[{ tool: "Bash", input: { command: "echo one" } }]]);
    const agent = new Agent({ name: "c", instructions: "x", model, tools: kit.tools });
    const input: AgentInputItem[] = [
      { type: "message", role: "user", content: "a".repeat(4000) },
      { type: "message", role: "user", content: "now run it" },
    ];
    await run(agent, input, { maxTurns: 5, callModelInputFilter: kit.callModelInputFilter() });
    const file = `${ws.getBackend().workdir}/sessions/compress/context.jsonl`;
    const rows = (await readAgentFile(ws, file)).toString().split("\n");
    expect(rows.length).toBe(2);
    const { id, created_at } = JSON.parse(rows[0]!) as { id: string; created_at: string };
    expect(rows[0]).toBe(
      `{"content":"${"a".repeat(4000)}","role":"user","id":"${id}","metadata":{},"created_at":"${created_at}","usage":null,"finished_at":null,"finished_reason":null,"structured_output":null,"error":null}`,
    );
    expect(rows[1]).toBe("");
    const summary = `Summary: long input.\n<system-reminder>The compressed context is offloaded to '${file}', you can refer to it when needed.</system-reminder>`;
    expect(model.requests.length).toBe(2);
    for (const req of model.requests) {
      const items = req.input as Array<{ content?: unknown }>;
      expect(items[0]).toMatchObject({ role: "user", content: [{ type: "input_text", text: summary }] });
      expect(items[1]).toMatchObject({ role: "user", content: "now run it" });
    }
  });

  it("offloads a 100 MiB tool result: a bounded head for the model, the rest in the file", async () => {
    const size = 100 * 1024 * 1024;
    const big: WorkspaceTool = {
      name: "Big",
      description: "returns 100 MiB",
      inputSchema: z.object({}),
      jsonSchema: { type: "object", properties: {} },
      execute: async () => ({ ok: true, output: "0123456789abcdef".repeat(size / 16) }),
    };
    const kit = await workspaceTools(ws, { agentId: AGENT, sessionId: "big", extraTools: [big] });
    const model = new ScriptedModel([[{ tool: "Big", input: {} }]]);
    await run(new Agent({ name: "b", instructions: "x", model, tools: kit.tools }), "big", { maxTurns: 3 });
    const text = model.outputs().get("call1_0")!;
    const m = REMINDER.exec(text)!;
    expect(m.index).toBe(200_000);
    expect((await fs.stat(m[1]!)).size).toBe(size - 200_000);
    const expected = createHash("sha256")
      .update("0123456789abcdef".repeat(size / 16).slice(200_000))
      .digest("hex");
    expect(
      createHash("sha256")
        .update(await fs.readFile(m[1]!))
        .digest("hex"),
    ).toBe(expected);
  }, 60_000);
});
