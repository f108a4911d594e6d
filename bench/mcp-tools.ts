// MCP transport and built-in tool costs, as ratios against a baseline measured in the same run.
//   npx tsx bench/mcp-tools.ts
// 1. stdio MCP over Sandbox.spawn (our SandboxProcessTransport) vs the SDK's own StdioClientTransport:
//    connect + initialize, and one echo tool call (medians).
// 2. Grep's scan fallback vs ripgrep on the same tree (when rg is installed).
// 3. Glob's walk over the Sandbox API vs `find` run in the sandbox.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { LocalSandbox } from "../sdk/kit/host-sandbox.js";
import { SandboxProcessTransport } from "../sdk/workspace/mcp-transport.js";
import { createBuiltinTools } from "../sdk/workspace/tools/index.js";
import { hasRipgrep } from "../sdk/workspace/tools/grep.js";
import { ECHO_SERVER_PATH } from "../test/fixtures/mcp/paths.js";

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
async function time(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}
const row = (label: string, ours: number, base: number, baseLabel: string) =>
  console.log(
    `${label.padEnd(34)} ours ${ours.toFixed(2).padStart(8)} ms   ${baseLabel} ${base.toFixed(2).padStart(8)} ms   ratio ${(ours / base).toFixed(2)}`,
  );

const dir = mkdtempSync(path.join(os.tmpdir(), "bench-mcp-tools-"));
const sandbox = new LocalSandbox(dir);
try {
  // 1. MCP
  const connectOurs: number[] = [];
  const connectBase: number[] = [];
  const callOurs: number[] = [];
  const callBase: number[] = [];
  for (let round = 0; round < 6; round++) {
    // Alternate who goes first so warm-up does not favour either side.
    for (const which of round % 2 ? (["base", "ours"] as const) : (["ours", "base"] as const)) {
      const client = new Client({ name: "bench", version: "1" });
      const transport =
        which === "ours"
          ? new SandboxProcessTransport(() => sandbox.spawn([process.execPath, ECHO_SERVER_PATH]))
          : new StdioClientTransport({ command: process.execPath, args: [ECHO_SERVER_PATH], stderr: "pipe" });
      (which === "ours" ? connectOurs : connectBase).push(await time(() => client.connect(transport)));
      for (let i = 0; i < 60; i++)
        (which === "ours" ? callOurs : callBase).push(await time(() => client.callTool({ name: "echo", arguments: { text: `x${i}` } })));
      await client.close();
    }
  }
  row("MCP connect + initialize", median(connectOurs), median(connectBase), "SDK stdio");
  row("MCP echo call", median(callOurs), median(callBase), "SDK stdio");

  // A tree for Grep and Glob: 40 dirs × 50 files.
  for (let d = 0; d < 40; d++)
    await Promise.all(
      Array.from({ length: 50 }, (_, f) =>
        sandbox.writeFile(`tree/d${d}/f${f}.${f % 2 ? "ts" : "txt"}`, `line one\nneedle ${d}-${f}\n${"filler text\n".repeat(40)}`),
      ),
    );
  const track = <T>(fn: () => Promise<T>) => fn();
  const scan = createBuiltinTools(sandbox, { track, grepEngine: "scan" }).find((t) => t.name === "Grep")!;
  if (await hasRipgrep(sandbox)) {
    const rg = createBuiltinTools(sandbox, { track, grepEngine: "rg" }).find((t) => t.name === "Grep")!;
    const s: number[] = [];
    const r: number[] = [];
    for (let i = 0; i < 7; i++) {
      s.push(await time(() => scan.execute({ pattern: "needle 3", path: "tree", output_mode: "count", head_limit: 0 })));
      r.push(await time(() => rg.execute({ pattern: "needle 3", path: "tree", output_mode: "count", head_limit: 0 })));
    }
    row("Grep 2000 files (scan vs rg)", median(s), median(r), "rg       ");
  } else console.log("Grep: rg not installed, scan-vs-rg ratio skipped");

  const glob = createBuiltinTools(sandbox, { track }).find((t) => t.name === "Glob")!;
  const g: number[] = [];
  const f: number[] = [];
  for (let i = 0; i < 7; i++) {
    g.push(await time(() => glob.execute({ pattern: "tree/**/*.ts", head_limit: 0 })));
    f.push(await time(() => sandbox.exec(["find", "tree", "-name", "*.ts", "-type", "f"])));
  }
  row("Glob 2000 files (walk vs find)", median(g), median(f), "find     ");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
