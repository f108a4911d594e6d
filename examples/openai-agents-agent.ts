/**
 * An OpenAI Agents SDK agent working in a Local workspace and in a Bubblewrap workspace (when bwrap is installed).
 *   npx tsx examples/openai-agents-agent.ts                    a scripted model, no API key needed
 *   OPENAI_API_KEY=… npx tsx examples/openai-agents-agent.ts   a real model (OPENAI_MODEL, default gpt-4o-mini)
 * In your own code: import { workspaceTools } from "agent-workspaces/openai-agents".
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Agent, Usage, run, setTracingDisabled, type Model, type ModelResponse } from "@openai/agents";
import { workspaceTools } from "agent-workspaces/openai-agents";
import { BubblewrapWorkspace, LocalWorkspace, type Workspace } from "agent-workspaces";

// Traces go to OpenAI only with a key; without one the SDK would warn at exit.
if (!process.env.OPENAI_API_KEY) setTracingDisabled(true);

const skill = fileURLToPath(new URL("./skills/release-notes", import.meta.url));

/** No key: a Model that plays a fixed script of tool calls, then answers. */
class ScriptedModel implements Model {
  #step = 0;
  readonly #script = [
    { name: "Skill", arguments: { name: "release-notes" } },
    { name: "Bash", arguments: { command: "uname -s && ls" } },
  ];
  async getResponse(): Promise<ModelResponse> {
    const call = this.#script[this.#step++];
    if (!call)
      return {
        usage: new Usage(),
        output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Loaded the skill and looked around." }] }],
      };
    return {
      usage: new Usage(),
      output: [{ type: "function_call", callId: `c${this.#step}`, name: call.name, arguments: JSON.stringify(call.arguments), status: "completed" }],
    };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error("the scripted model does not stream");
  }
}

async function runAgent(label: string, ws: Workspace): Promise<void> {
  await ws.initialize();
  try {
    const kit = await workspaceTools(ws, {
      agentId: "writer",
      sessionId: "demo",
      groups: { editing: ["Write", "Edit"] },
      compression: { contextTokens: 128_000 },
    });
    const agent = new Agent({
      name: "writer",
      instructions: ws.getInstructions(),
      model: process.env.OPENAI_API_KEY ? (process.env.OPENAI_MODEL ?? "gpt-4o-mini") : new ScriptedModel(),
      tools: kit.tools,
    });
    const result = await run(agent, "Load the release-notes skill, then show what is in the workspace.", {
      maxTurns: 10,
      callModelInputFilter: kit.callModelInputFilter(),
    });
    console.log(`\n[${label}] ${ws.workdir}`);
    for (const item of result.newItems)
      if (item.type === "tool_call_output_item") console.log(`  → ${String(item.output).split("\n").slice(0, 3).join(" | ")}`);
    console.log(`  answer: ${String(result.finalOutput)}`);
  } finally {
    await ws.close();
  }
}

const base = mkdtempSync(path.join(os.tmpdir(), "example-openai-agents-"));
try {
  await runAgent("local", new LocalWorkspace({ workdir: path.join(base, "local"), skillPaths: [skill] }));
  if (spawnSync("bwrap", ["--version"]).status === 0) await runAgent("bubblewrap", new BubblewrapWorkspace({ skillPaths: [skill] }));
  else console.log("\n[bubblewrap] skipped: bwrap is not installed");
} finally {
  rmSync(base, { recursive: true, force: true });
}
