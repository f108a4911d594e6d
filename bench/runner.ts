/**
 * The in-sandbox runner's cold start: from spawning `python3 -I -S -c <runner source>` to the answer of
 * its first request (an exec of `true`), against a bare Python that runs `true` the standard way
 * (`python3 -I -S -c "import subprocess; subprocess.run(['true'])"`, spawn to exit), paired rounds,
 * medians. Every connect on Bubblewrap, Docker and Kubernetes, and every OpenSandbox runner after the
 * first, pays this once. Runs on this host's python3 (the runner is the same program in a sandbox).
 * Run: npx tsx bench/runner.ts [rounds]
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { RUNNER_SOURCE, RunnerClient, runnerArgv } from "../sdk/kit/runner/index.js";

const ROUNDS = Number(process.argv[2] ?? 20);
// The interpreter itself, not a launcher in front of it (pyenv's shim is a shell script that costs ~100 ms).
const PYTHON = execFileSync("python3", ["-c", "import sys; print(sys.executable)"]).toString().trim();
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function runnerFirstAnswer(root: string): Promise<number> {
  const t = performance.now();
  const [cmd, ...args] = runnerArgv(PYTHON, root, RUNNER_SOURCE);
  const child = spawn(cmd!, args, { stdio: ["pipe", "pipe", "inherit"] });
  const client = new RunnerClient({
    stdin: child.stdin,
    stdout: child.stdout,
    pid: child.pid,
    exited: new Promise((r) => child.once("close", () => r({ why: "" }))),
    kill: () => child.kill("SIGKILL"),
  });
  // Sent at once, as a connect's first operation is: the runner reads it once it is up.
  const r = await client.exec({ argv: ["true"], cwd: "", env: {}, maxOutputBytes: 100 });
  const ms = performance.now() - t;
  if (r.exitCode !== 0) throw new Error(`the runner's exec of true failed: ${r.stderr.toString()}`);
  await client.stop();
  return ms;
}

function bareSubprocess(): Promise<number> {
  const t = performance.now();
  const child = spawn(PYTHON, ["-I", "-S", "-c", "import subprocess; subprocess.run(['true'], check=True)"], { stdio: "inherit" });
  return new Promise((resolve, reject) => child.once("close", (code) => (code === 0 ? resolve(performance.now() - t) : reject(new Error(`exit ${code}`)))));
}

const root = await mkdtemp(path.join(tmpdir(), "agentws-bench-runner-"));
try {
  await runnerFirstAnswer(root);
  await bareSubprocess();
  const ours: number[] = [];
  const base: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    if (i % 2) {
      ours.push(await runnerFirstAnswer(root));
      base.push(await bareSubprocess());
    } else {
      base.push(await bareSubprocess());
      ours.push(await runnerFirstAnswer(root));
    }
  }
  const [a, b] = [median(ours), median(base)];
  console.log(`runner cold start to its first answer (exec true), ${ROUNDS} rounds, ${PYTHON}`);
  console.log(`runner ${a.toFixed(1)} ms  vs python3 + subprocess.run(true) ${b.toFixed(1)} ms  → ${(a / b).toFixed(2)}x`);
} finally {
  await rm(root, { recursive: true, force: true });
}
