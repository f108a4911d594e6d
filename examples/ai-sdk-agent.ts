/**
 * An AI SDK agent working in a Local workspace and in a Bubblewrap workspace (when bwrap is installed).
 *   npx tsx examples/ai-sdk-agent.ts                      a scripted model, no API key needed
 *   OPENAI_API_KEY=… npx tsx examples/ai-sdk-agent.ts     a real model (OPENAI_MODEL, default gpt-4o-mini)
 * In your own code: import { workspaceToolkit } from "agent-workspaces/ai-sdk".
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { generateText, stepCountIs, type LanguageModel } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { workspaceToolkit } from "agent-workspaces/ai-sdk";
import { BubblewrapWorkspace, LocalWorkspace, type Workspace } from "agent-workspaces";

const skill = fileURLToPath(new URL("./skills/release-notes", import.meta.url));

async function model(): Promise<LanguageModel> {
  if (process.env.OPENAI_API_KEY) {
    const { createOpenAI } = await import("@ai-sdk/openai");
    return createOpenAI()(process.env.OPENAI_MODEL ?? "gpt-4o-mini");
  }
  // No key: a model that plays a fixed script of tool calls, then answers.
  const script = [
    { toolName: "Skill", input: {} },
    { toolName: "Bash", input: { command: "uname -s && ls" } },
  ];
  let step = 0;
  const usage = { inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 0, text: 0, reasoning: 0 } };
  return new MockLanguageModelV3({
    doGenerate: async () => {
      const call = script[step++];
      if (!call)
        return {
          content: [{ type: "text", text: "Listed the skills and the workspace." }],
          finishReason: { unified: "stop", raw: "stop" },
          usage,
          warnings: [],
        };
      return {
        content: [{ type: "tool-call", toolCallId: `c${step}`, toolName: call.toolName, input: JSON.stringify(call.input) }],
        finishReason: { unified: "tool-calls", raw: "tool_calls" },
        usage,
        warnings: [],
      };
    },
  });
}

async function runAgent(label: string, ws: Workspace): Promise<void> {
  await ws.initialize();
  try {
    const kit = await workspaceToolkit(ws, {
      agentId: "writer",
      sessionId: "demo",
      groups: { editing: ["Write", "Edit"] },
      compression: { contextTokens: 128_000 },
    });
    const result = await generateText({
      model: await model(),
      system: ws.getInstructions(),
      prompt: "Which skills do you have? Then show what is in the workspace.",
      tools: kit.tools,
      prepareStep: kit.prepareStep,
      stopWhen: stepCountIs(10),
    });
    console.log(`\n[${label}] ${ws.workdir}`);
    for (const step of result.steps)
      for (const part of step.content)
        if (part.type === "tool-result") console.log(`  ${part.toolName} → ${String(part.output).split("\n").slice(0, 3).join(" | ")}`);
    console.log(`  answer: ${result.text}`);
  } finally {
    await ws.close();
  }
}

const base = mkdtempSync(path.join(os.tmpdir(), "example-ai-sdk-"));
try {
  await runAgent("local", new LocalWorkspace({ workdir: path.join(base, "local"), skillPaths: [skill] }));
  if (spawnSync("bwrap", ["--version"]).status === 0) await runAgent("bubblewrap", new BubblewrapWorkspace({ skillPaths: [skill] }));
  else console.log("\n[bubblewrap] skipped: bwrap is not installed");
} finally {
  rmSync(base, { recursive: true, force: true });
}
