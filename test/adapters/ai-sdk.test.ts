import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import { generateText, stepCountIs, type ModelMessage } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import type { LanguageModelV3CallOptions, LanguageModelV3Content } from "@ai-sdk/provider";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { workspaceToolkit, workspaceToolSet } from "../../sdk/adapters/ai-sdk/index.js";
import type { Workspace, WorkspaceTool } from "../../sdk/index.js";
import { AGENT, REMINDER, SESSION, openWorkspace, readAgentFile, tempBase, type Kind } from "./fixtures.js";

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

/** A model that plays a script: one list of tool calls per step, then a final text. */
function scriptedModel(script: Array<Array<{ tool: string; input: unknown }>>) {
  const prompts: LanguageModelV3CallOptions["prompt"][] = [];
  let step = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      prompts.push(options.prompt);
      const calls = script[step++];
      if (!calls) return { content: [{ type: "text", text: "done" }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
      const content: LanguageModelV3Content[] = calls.map((c, i) => ({
        type: "tool-call",
        toolCallId: `call${step}_${i}`,
        toolName: c.tool,
        input: JSON.stringify(c.input),
      }));
      return { content, finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [] };
    },
  });
  return { model, prompts };
}

/** Every tool outcome of the run by call id: the result text, or the tool-error message. */
function outcomes(result: Awaited<ReturnType<typeof generateText>>): Map<string, { tool: string; text: string; error: boolean }> {
  const out = new Map<string, { tool: string; text: string; error: boolean }>();
  for (const step of result.steps)
    for (const part of step.content) {
      if (part.type === "tool-result") out.set(part.toolCallId, { tool: part.toolName, text: String(part.output), error: false });
      if (part.type === "tool-error") out.set(part.toolCallId, { tool: part.toolName, text: String((part.error as Error).message ?? part.error), error: true });
    }
  return out;
}

const SEQ = "seq 1 5000";

describe.each<Kind>(["local", "bubblewrap"])("AI SDK on a %s workspace", (kind) => {
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
    const kit = await workspaceToolkit(ws, {
      agentId: AGENT,
      sessionId: SESSION,
      groups: { files: { description: "write files", tools: ["Write", "Edit"] } },
      toolResultLimit: 1000,
    });
    expect(Object.keys(kit.tools)).toEqual([
      "Bash",
      "Edit",
      "Glob",
      "Grep",
      "Read",
      "Write",
      "mcp__echo__echo",
      "mcp__echo__add",
      "mcp__echo__sleep",
      "mcp__echo__env",
      "mcp__echo__fail",
      "mcp__echo__die",
      "mcp__echo__exit",
      "Skill",
      "ActivateToolGroup",
    ]);
    const { model, prompts } = scriptedModel([
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
    const result = await generateText({ model, tools: kit.tools, prompt: "work", stopWhen: stepCountIs(20), prepareStep: kit.prepareStep });
    expect(result.text).toBe("done");
    const r = outcomes(result);
    expect(r.get("call1_0")!.text).toContain("hello-from-bash");
    expect(r.get("call2_0")!.text).toBe("ping");
    // The MCP server runs inside the sandbox: its working directory is the workspace root there.
    expect(JSON.parse(r.get("call2_1")!.text).cwd).toBe(ws.getBackend().workdir);
    expect(r.get("call3_0")!.text).toContain("- alpha: Counts words in text files.");
    expect(r.get("call3_1")!.text).toMatch(/^# Skill: alpha\n/);
    expect(r.get("call4_0")!.text).toBe(
      `Error: tool 'Write' is in the tool group 'files', which is not active. Call ActivateToolGroup with {"group":"files"} first, then call 'Write' again.`,
    );
    expect(r.get("call5_0")!.text).toBe("Tool group 'files' is active. Its tools: Edit, Write.");
    expect(r.get("call6_0")!.error).toBe(false);
    expect((await ws.getBackend().readFile("notes.txt")).toString()).toBe("hi");

    // Offloaded: the head is kept, the file holds exactly the rest.
    const full = (
      await ws
        .listTools()
        .find((t) => t.name === "Bash")!
        .execute({ command: SEQ })
    ).output;
    const offloaded = r.get("call7_0")!.text;
    const m = REMINDER.exec(offloaded);
    expect(m).not.toBeNull();
    const head = offloaded.slice(0, m!.index);
    expect(head.length).toBe(Math.floor((1000 / (Buffer.byteLength(full) / 4)) * full.length));
    expect(m![1]).toBe(`${ws.getBackend().workdir}/sessions/${SESSION}/tool_result-call7_0.txt`);
    expect(head + (await readAgentFile(ws, m![1]!)).toString()).toBe(full);

    // Schema failure: a tool error the model reads, naming the field; nothing thrown.
    const bad = r.get("call8_0")!;
    expect(bad.error).toBe(true);
    expect(bad.text).toMatch(/Invalid input for tool Bash/);
    expect(bad.text).toContain('"command"');
    const last = prompts.at(-1)!;
    const toolMsg = last.at(-1)!;
    expect(toolMsg.role).toBe("tool");
    expect(JSON.stringify(toolMsg.content)).toContain("command");
  });
});

describe("AI SDK context compression and large results", () => {
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

  it("compresses older messages into context.jsonl with the exact lines, once, and keeps the summary reminder", async () => {
    const kit = await workspaceToolkit(ws, {
      agentId: AGENT,
      sessionId: "compress",
      compression: { contextTokens: 1000, summarize: () => "Summary: the user asked twice." },
    });
    const { model, prompts } = scriptedModel([[{ tool: "Bash", input: { command: "echo one" } }]]);
    const messages: ModelMessage[] = [
      { role: "user", content: "a".repeat(4000) },
      { role: "assistant", content: [{ type: "text", text: "ok" }] },
      { role: "user", content: "now run it" },
    ];
    await generateText({ model, tools: kit.tools, system: "You are a test.", messages, stopWhen: stepCountIs(5), prepareStep: kit.prepareStep });
    const file = `${ws.getBackend().workdir}/sessions/compress/context.jsonl`;
    const lines = (await readAgentFile(ws, file)).toString();
    // The reference's message shape: defaults filled in, keys in its order; only id and time vary.
    const rows = lines.split("\n");
    // The recent messages within the reserve (10% of the context) stay verbatim.
    expect(rows.length).toBe(2);
    expect(rows[1]).toBe("");
    const tail = (row: string) => {
      const { id, created_at } = JSON.parse(row) as { id: string; created_at: string };
      expect(id).toMatch(/^[0-9a-f]{32}$/);
      return `"id":"${id}","metadata":{},"created_at":"${created_at}","usage":null,"finished_at":null,"finished_reason":null,"structured_output":null,"error":null}`;
    };
    expect(rows[0]).toBe(`{"content":"${"a".repeat(4000)}","role":"user",${tail(rows[0]!)}`);
    const summary = `Summary: the user asked twice.\n<system-reminder>The compressed context is offloaded to '${file}', you can refer to it when needed.</system-reminder>`;
    for (const p of prompts) {
      expect(p[0]).toEqual({ role: "system", content: "You are a test." });
      expect(p[1]).toMatchObject({ role: "user", content: [{ type: "text", text: summary }] });
      expect(p[2]).toMatchObject({ role: "assistant", content: [{ type: "text", text: "ok" }] });
      expect(p[3]).toMatchObject({ role: "user", content: [{ type: "text", text: "now run it" }] });
    }
    expect(prompts.length).toBe(2);
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
    const tools = await workspaceToolSet(ws, { agentId: AGENT, sessionId: "big", extraTools: [big] });
    const { model } = scriptedModel([[{ tool: "Big", input: {} }]]);
    const result = await generateText({ model, tools, prompt: "big", stopWhen: stepCountIs(3) });
    const text = outcomes(result).get("call1_0")!.text;
    const m = REMINDER.exec(text)!;
    expect(m).not.toBeNull();
    expect(m.index).toBe(200_000);
    const stat = await fs.stat(m[1]!);
    expect(stat.size).toBe(size - 200_000);
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

describe("AI SDK adapter options", () => {
  it("refuses bad options with the field named", async () => {
    const base = await tempBase();
    const ws = await openWorkspace("local", base);
    try {
      await expect(workspaceToolkit(ws, { sessionId: "" })).rejects.toThrow(/sessionId/);
      await expect(workspaceToolkit(ws, { sessionId: "s", groups: { basic: ["Bash"] } })).rejects.toThrow(/groups\.basic/);
      await expect(workspaceToolkit(ws, { sessionId: "s", compression: { contextTokens: 1000, triggerRatio: 0.95 } })).rejects.toThrow(
        /compression\.triggerRatio/,
      );
    } finally {
      await ws.close();
      await fs.rm(base, { recursive: true, force: true });
    }
  });
});
