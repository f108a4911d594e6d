/**
 * `pulumi up` of a 50-workspace local fleet and a no-change `preview` of it, each against the
 * same operation on 50 trivial dynamic resources (the engine's floor) in the same run. Real
 * engine (toolchain CLI, file backend, temp PULUMI_HOME), medians over rounds, printed as ratios.
 *   npx tsx bench/pulumi.ts            (BENCH_ROUNDS=3, BENCH_SIZE=50)
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import type { PulumiFn } from "@pulumi/pulumi/automation/index.js";
import { WorkspaceFleet } from "../providers/index.js";
import { openStack } from "../sdk/cli/engine.js";

const ROOT = join(import.meta.dirname, "..");
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SIZE = Number(process.env.BENCH_SIZE ?? 50);

const trivialProvider: pulumi.dynamic.ResourceProvider = {
  async create() {
    return { id: "x", outs: {} };
  },
  async diff() {
    return { changes: false };
  },
};

class Trivial extends pulumi.dynamic.Resource {
  constructor(name: string, opts?: pulumi.CustomResourceOptions) {
    super(trivialProvider, name, {}, opts);
  }
}

function trivialProgram(): PulumiFn {
  return async () => {
    for (let i = 0; i < SIZE; i++) new Trivial(`t${i}`);
  };
}

function fleetProgram(basedir: string): PulumiFn {
  return async () => {
    const workspaces = Array.from({ length: SIZE }, (_, i) => ({
      workspaceId: `bench-${i}`,
      backend: { kind: "local" as const, basedir },
      tags: { bench: "yes" },
    }));
    const fleet = new WorkspaceFleet("fleet", { workspaces, deleteData: true });
    return { workspaces: fleet.workspaces };
  };
}

async function measure(binDir: string, name: string, program: (dir: string) => PulumiFn): Promise<{ up: number; preview: number }> {
  const base = join(ROOT, ".cache", "pulumi-bench");
  mkdirSync(base, { recursive: true });
  const dir = mkdtempSync(join(base, `${name}-`));
  for (const d of ["project", "state", "home"]) mkdirSync(join(dir, d));
  try {
    const stack = await openStack({
      workDir: join(dir, "project"),
      projectName: `bench-${name}`,
      stackName: "bench",
      program: program(join(dir, "workspaces")),
      backendUrl: `file://${join(dir, "state")}`,
      pulumiHome: join(dir, "home"),
      passphrase: "bench",
      pulumiBinDir: binDir,
    });
    let t = performance.now();
    const up = await stack.up({ color: "never" });
    const upMs = performance.now() - t;
    if (up.summary.result !== "succeeded") throw new Error(`${name} up failed`);
    t = performance.now();
    const p = await stack.preview({ color: "never" });
    const previewMs = performance.now() - t;
    const changed = Object.entries(p.changeSummary).filter(([op, n]) => op !== "same" && n);
    if (changed.length) throw new Error(`${name}: the no-change preview found changes: ${JSON.stringify(changed)}`);
    await stack.destroy({ color: "never" });
    return { up: upMs, preview: previewMs };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const binDir = execFileSync(join(ROOT, "scripts", "pulumi-toolchain.sh"), { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim();
  execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: ROOT, stdio: "ignore" });
  const fleet: { up: number; preview: number }[] = [];
  const floor: { up: number; preview: number }[] = [];
  // Warm-up round (CLI page cache, Node module cache), not counted.
  await measure(binDir, "warm", () => trivialProgram());
  for (let r = 0; r < ROUNDS; r++) {
    // Alternate the order so drift (thermal, cache) does not favour one side.
    if (r % 2 === 0) {
      floor.push(await measure(binDir, "trivial", () => trivialProgram()));
      fleet.push(await measure(binDir, "fleet", (d) => fleetProgram(d)));
    } else {
      fleet.push(await measure(binDir, "fleet", (d) => fleetProgram(d)));
      floor.push(await measure(binDir, "trivial", () => trivialProgram()));
    }
    console.error(`round ${r + 1}/${ROUNDS}: fleet up ${fleet.at(-1)!.up.toFixed(0)} ms, trivial up ${floor.at(-1)!.up.toFixed(0)} ms`);
  }
  const row = (op: "up" | "preview") => {
    const a = median(fleet.map((x) => x[op]));
    const b = median(floor.map((x) => x[op]));
    return `${op.padEnd(8)} ${SIZE}-workspace local fleet ${(a / 1000).toFixed(2)} s  vs  ${SIZE} trivial dynamic resources ${(b / 1000).toFixed(2)} s  →  ${(a / b).toFixed(2)}x (goal ≤ 2x)`;
  };
  console.log(`bench/pulumi: medians of ${ROUNDS} rounds, real engine, file backend`);
  console.log(row("up"));
  console.log(row("preview"));
}

await main();
