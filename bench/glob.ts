/**
 * Glob under adversarial patterns, each against a normal pattern as baseline, measured in the same
 * run (medians over rounds, alternating):
 *   1. Glob tool, `*a*a*a*a*a*a*a*ab` in a folder holding one 60-character name (the input a
 *      backtracking matcher spent 47 s on)                                 vs  `*.txt` there
 *   2. Glob tool, `** /` + 12 stars over a small tree of such names          vs  `** /*.txt`
 *   3. Grep's glob filter (scan engine), (`** /`) x 12 + stars, same tree    vs  `*.txt`
 *   4. the segment matcher alone, row 1's pattern against the 60-character name, per call
 * Goal: every adversarial median under 5 ms.
 * Run: npx tsx bench/glob.ts
 */
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { LocalSandbox } from "../sdk/kit/host-sandbox.js";
import { compileSegment } from "../sdk/workspace/tools/glob-match.js";
import { createBuiltinTools } from "../sdk/workspace/tools/index.js";

const ROUNDS = 15;
const GOAL_MS = 5;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const time = async (fn: () => Promise<unknown>) => {
  const t = performance.now();
  await fn();
  return performance.now() - t;
};

async function main(): Promise<void> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-bench-glob-"));
  try {
    await fs.mkdir(path.join(root, "one"));
    await fs.writeFile(path.join(root, "one", "a".repeat(60)), "aaa\n");
    await fs.writeFile(path.join(root, "one", "note.txt"), "aaa\n");
    for (let d = 0; d < 4; d++) {
      const dir = path.join(root, "tree", `dir${d}`, "deeper");
      await fs.mkdir(dir, { recursive: true });
      for (let f = 0; f < 5; f++) await fs.writeFile(path.join(d % 2 ? dir : path.dirname(dir), `${"a".repeat(56)}${String(f).padStart(4, "0")}`), "aaa\n");
      await fs.writeFile(path.join(dir, "note.txt"), "aaa\n");
    }
    const tools = new Map(createBuiltinTools(new LocalSandbox(root), { track: (fn) => fn(), grepEngine: "scan" }).map((t) => [t.name, t]));
    const glob = tools.get("Glob")!;
    const grep = tools.get("Grep")!;
    const stars = "*a*a*a*a*a*a*a*a*a*a*a*ab";
    const deep = `${"**/".repeat(12)}${stars}`;
    const name60 = "a".repeat(60);
    const evil = compileSegment("*a*a*a*a*a*a*a*ab");
    const plain = compileSegment("*.txt");
    const cases: Array<[string, () => Promise<unknown>, () => Promise<unknown>]> = [
      [
        "Glob *a*a*a*a*a*a*a*ab, 60-char name / *.txt",
        () => glob.execute({ pattern: "*a*a*a*a*a*a*a*ab", path: "one" }),
        () => glob.execute({ pattern: "*.txt", path: "one" }),
      ],
      [
        "Glob **/ + 12 stars, tree / **/*.txt",
        () => glob.execute({ pattern: `**/${stars}`, path: "tree" }),
        () => glob.execute({ pattern: "**/*.txt", path: "tree" }),
      ],
      [
        "Grep glob (**/)x12 + stars / *.txt",
        () => grep.execute({ pattern: "aaa", path: "tree", glob: deep }),
        () => grep.execute({ pattern: "aaa", path: "tree", glob: "*.txt" }),
      ],
      ["matcher alone, row 1's input, per call", async () => evil(name60), async () => plain(name60)],
    ];
    const rows: Array<{ figure: string; ours: number; baseline: number }> = [];
    for (const [figure, adversarial, normal] of cases) {
      const a: number[] = [];
      const b: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        if (r % 2 === 0) {
          a.push(await time(adversarial));
          b.push(await time(normal));
        } else {
          b.push(await time(normal));
          a.push(await time(adversarial));
        }
      }
      rows.push({ figure, ours: median(a), baseline: median(b) });
    }
    console.log(
      `Glob under adversarial patterns (medians; ${ROUNDS} rounds alternating; node ${process.version}, ${os.cpus().length} CPUs, load ${os.loadavg()[0]!.toFixed(1)})\n`,
    );
    console.log(["figure".padEnd(46), "adv ms".padStart(10), "normal ms".padStart(10), "ratio".padStart(8), "goal".padStart(9), "  ok"].join(""));
    for (const r of rows)
      console.log(
        [
          r.figure.padEnd(46),
          r.ours.toFixed(3).padStart(10),
          r.baseline.toFixed(3).padStart(10),
          `${(r.ours / r.baseline).toFixed(2)}x`.padStart(8),
          `< ${GOAL_MS} ms`.padStart(9),
          r.ours < GOAL_MS ? "  yes" : "  NO",
        ].join(""),
      );
    if (rows.some((r) => r.ours >= GOAL_MS)) process.exitCode = 1;
  } finally {
    await fs.rm(root, { recursive: true, force: true });
  }
}

await main();
