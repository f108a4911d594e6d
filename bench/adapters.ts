// Adapter overhead per tool call, as a ratio against calling the tool's `execute` directly in the same run.
//   npx tsx bench/adapters.ts
// Each side calls the same built-in Read tool of one LocalWorkspace on a small file (an in-process
// tool, so the adapter's share is as visible as it can be). "AI SDK" is the ToolSet entry's execute,
// "OpenAI Agents" the FunctionTool's invoke (JSON arguments in, as the runner calls it); the "bare"
// rows are each framework's own tool wrapping execute and nothing else, so the adapter's own share
// shows as the last two ratios. Medians of
// batches; the order of the sides rotates each round so warm-up favours none. Goal: ratio ≤ 1.1.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { RunContext, tool } from "@openai/agents";
import { tool as aiTool } from "ai";
import { workspaceToolkit } from "../sdk/adapters/ai-sdk/index.js";
import { workspaceTools } from "../sdk/adapters/openai-agents/index.js";
import { LocalWorkspace } from "../sdk/index.js";

const BATCH = 200;
const ROUNDS = 15;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const dir = mkdtempSync(path.join(os.tmpdir(), "bench-adapters-"));
const ws = new LocalWorkspace({ workdir: dir });
try {
  await ws.initialize();
  await ws.getBackend().writeFile("notes.txt", "hello\n".repeat(50));
  const input = { file_path: "notes.txt" };
  const direct = ws.listTools().find((t) => t.name === "Read")!;
  const ai = (await workspaceToolkit(ws, { sessionId: "bench" })).tools.Read!;
  const agents = (await workspaceTools(ws, { sessionId: "bench" })).tools.find((t) => t.name === "Read")!;
  // The frameworks' own cost: a bare tool of each that only calls execute (what any integration pays).
  const aiBare = aiTool({ description: "Read", inputSchema: direct.inputSchema as never, execute: (i: unknown) => direct.execute(i) });
  const agentsBare = tool({
    name: "Read",
    description: "Read",
    parameters: direct.jsonSchema as never,
    strict: false,
    execute: (i: unknown) => direct.execute(i),
  });
  const ctx = new RunContext({});
  const args = JSON.stringify(input);

  const sides: Record<string, (i: number) => Promise<unknown>> = {
    direct: () => direct.execute(input),
    "AI SDK": async (i) => ai.execute!(input, { toolCallId: `c${i}`, messages: [] }),
    "AI SDK bare": async (i) => aiBare.execute!(input, { toolCallId: `c${i}`, messages: [] }),
    "Agents bare": (i) => agentsBare.invoke(ctx, args, { toolCall: { type: "function_call", callId: `c${i}`, name: "Read", arguments: args } }),
    "OpenAI Agents": (i) => agents.invoke(ctx, args, { toolCall: { type: "function_call", callId: `c${i}`, name: "Read", arguments: args } }),
  };
  const names = Object.keys(sides);
  const times: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(round + k) % names.length]!;
      const t = performance.now();
      for (let i = 0; i < BATCH; i++) await sides[name]!(i);
      times[name]!.push((performance.now() - t) / BATCH);
    }
  }
  const base = median(times.direct!);
  console.log(`Read on a LocalWorkspace, ${BATCH} calls × ${ROUNDS} rounds, median µs per call`);
  for (const name of names) {
    const m = median(times[name]!);
    console.log(`${name.padEnd(16)} ${(m * 1000).toFixed(1).padStart(8)} µs   ratio ${(m / base).toFixed(3)}`);
  }
  // Our adapter alone: each integration against the bare tool of its own framework.
  for (const [ours, bare] of [
    ["AI SDK", "AI SDK bare"],
    ["OpenAI Agents", "Agents bare"],
  ] as const) {
    console.log(`${ours} adapter vs ${bare}: ratio ${(median(times[ours]!) / median(times[bare]!)).toFixed(3)}`);
  }
} finally {
  await ws.close();
  rmSync(dir, { recursive: true, force: true });
}
