/**
 * The service process of runner-fuzz.test.ts: two workspaces whose runners are hostile (a fuzzing
 * program in place of the runner, inside real Bubblewrap sandboxes) and, meanwhile, normal work on
 * other workspaces (Bubblewrap with the real runner, and a host folder). Prints one JSON line per
 * second ({"tick": ...}) and a last one ({"done": ...}) with what happened.
 * argv: <folder> <seconds>
 */
import { randomBytes } from "node:crypto";
import { promises as fs, statSync } from "node:fs";
import path from "node:path";
import { BubblewrapSandbox } from "../../sdk/backends/bubblewrap/sandbox.js";
import { BwrapLauncher } from "../../sdk/backends/bubblewrap/launch.js";
import { startBwrapRunner } from "../../sdk/backends/bubblewrap/runner.js";
import { LocalSandbox } from "../../sdk/kit/host-sandbox.js";
import { RunnerFailure, RunnerFiles, RunnerSupervisor, spawnThroughRunner } from "../../sdk/kit/runner/index.js";
import { isWorkspaceError } from "../../sdk/errors.js";
import type { Sandbox } from "../../sdk/sandbox.js";
import { hostileRunnerSource } from "../support/hostile-runner.js";

const [dir, secondsArg] = process.argv.slice(2);
const until = Date.now() + Number(secondsArg) * 1000;
const stats = { hostileCalls: 0, hostileOk: 0, typed: 0, untyped: [] as string[], runners: 0, normalOps: 0, normalFailures: [] as string[] };
const MiB = 1 << 20;

async function bwrap(name: string): Promise<BubblewrapSandbox> {
  const root = path.join(dir!, name);
  await fs.mkdir(path.join(root, "ws"), { recursive: true });
  await fs.mkdir(path.join(root, "tmp"), { recursive: true });
  return BubblewrapSandbox.open({ hostRoot: path.join(root, "ws"), hostTmp: path.join(root, "tmp"), network: "none", persistent: true });
}

/** A workspace whose every runner is the fuzzing program, started by Bubblewrap's own transport. */
async function hostile(name: string) {
  const sb = await bwrap(name);
  const args = await sb.argvFor([]);
  const device = statSync(sb.hostRoot, { bigint: true }).dev;
  const launcher = new BwrapLauncher();
  const sup = new RunnerSupervisor(
    () => {
      stats.runners++;
      return startBwrapRunner(launcher, args, sb.workdir, device, hostileRunnerSource("fuzz"));
    },
    { callTimeoutMs: 1500, killGraceMs: 500 },
  );
  return { sb, sup, files: new RunnerFiles(async () => ({ client: sup.get() })) };
}

/** Any outcome but an untyped error is fine for a call on a hostile runner (it fails, or gets what the runner sent within caps). */
async function attacked(h: Awaited<ReturnType<typeof hostile>>): Promise<void> {
  while (Date.now() < until) {
    const op = Math.floor(Math.random() * 7);
    stats.hostileCalls++;
    try {
      if (op === 0) await h.files.stat("a");
      else if (op === 1) {
        const b = await h.files.readFile("a", { maxBytes: MiB });
        if (b.length > MiB) throw new Error(`a read capped at 1 MiB returned ${b.length} bytes`);
      } else if (op === 2) await h.files.list("");
      else if (op === 3) await h.files.writeFile("w.txt", "x".repeat(100));
      else if (op === 4) {
        const r = await h.sup.get().exec({ argv: ["true"], cwd: "", env: {}, maxOutputBytes: MiB, timeoutMs: 1000 });
        if (r.stdout.length > MiB || r.stderr.length > MiB) throw new Error(`an exec capped at 1 MiB returned ${r.stdout.length}+${r.stderr.length} bytes`);
      } else if (op === 5) {
        const p = spawnThroughRunner(Promise.resolve({ client: h.sup.get() }), { argv: ["cat"], cwd: "", env: {} });
        p.stdout.resume();
        p.stderr.resume();
        const timer = setTimeout(() => p.kill(), 1000);
        await p.exited;
        clearTimeout(timer);
      } else await h.files.readDirTyped("");
      stats.hostileOk++;
    } catch (e) {
      if (isWorkspaceError(e) || e instanceof RunnerFailure) stats.typed++;
      else stats.untyped.push(String(e).slice(0, 300));
    }
  }
}

/** Normal work on a workspace nobody attacks: every call must succeed with the right bytes. */
async function normal(sb: Sandbox, name: string): Promise<void> {
  let i = 0;
  while (Date.now() < until) {
    const body = randomBytes(1 + Math.floor(Math.random() * 200_000));
    const file = `n/${name}-${i++ % 5}.bin`;
    try {
      await sb.writeFile(file, body);
      const back = await sb.readFile(file, { maxBytes: MiB });
      if (!back.equals(body)) throw new Error(`${file} read back different bytes`);
      const r = await sb.exec(["sh", "-c", `echo ${name} $((${i} + 1))`], { timeoutMs: 20_000 });
      if (r.exitCode !== 0 || r.stdout.toString() !== `${name} ${i + 1}\n`)
        throw new Error(`exec gave ${r.exitCode} '${r.stdout.toString()}' '${r.stderr.toString()}'`);
      if (!(await sb.list("n")).some((f) => f.name === path.posix.basename(file))) throw new Error(`${file} missing from the listing`);
      stats.normalOps += 4;
    } catch (e) {
      stats.normalFailures.push(`${name}: ${String(e).slice(0, 300)}`);
    }
  }
}

const local = path.join(dir!, "local");
await fs.mkdir(path.join(local, "n"), { recursive: true });
const calm = [await bwrap("calm-1"), await bwrap("calm-2")];
for (const sb of calm) await sb.mkdir("n");
const localSb = new LocalSandbox(local);
const hostiles = [await hostile("hostile-1"), await hostile("hostile-2")];
const ticker = setInterval(
  () =>
    console.log(
      JSON.stringify({ tick: { rss: process.memoryUsage().rss, ...stats, untyped: stats.untyped.length, normalFailures: stats.normalFailures.length } }),
    ),
  1000,
);
console.log(JSON.stringify({ ready: { rss: process.memoryUsage().rss } }));
await Promise.all([...hostiles.map(attacked), normal(calm[0]!, "calm-1"), normal(calm[1]!, "calm-2"), normal(localSb, "local")]);
clearInterval(ticker);
for (const h of hostiles) await h.sup.stop();
for (const sb of calm) await sb.close();
console.log(JSON.stringify({ done: stats }));
