/**
 * Sandbox backend figures, each a median against a baseline measured in the same run:
 *   - Bubblewrap: `exec(["true"])` through the in-sandbox runner vs spawning a bare `bwrap ... true` (goal ≤ 0.3x);
 *   - Docker: `exec(["true"])` through the in-sandbox runner vs `docker exec <container> true` from the CLI (goal ≤ 0.1x);
 *   - Bubblewrap and Docker (host folder): a 1 MiB writeFile + readFile through the runner vs the
 *     host-folder path (LocalSandbox on the same folder; goal ≤ 1.5x), each half apart, and listing a 1000-entry
 *     folder the same two ways (goal ≤ 2x);
 *   - Docker: the runner's stat and 1 MiB write + read over its private pipe pair vs over the dockerd relay;
 *   - Docker: cold create of a workspace with a cached image (driver.create) vs `docker run -d` of the same image;
 *   - Docker: resume from pause (driver.resume) vs `docker unpause` from the CLI;
 *   - Docker: a manager's getWorkspace after an idle eviction (resume and reconnect) vs `docker unpause`.
 * Needs bwrap, and for Docker an engine (DOCKER_HOST, else scripts/dockerd.sh starts the private one)
 * with the base image (scripts/base-image.sh). Run: npx tsx bench/sandbox.ts [rounds]
 */
import { execFile, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { BubblewrapDriver } from "../sdk/backends/bubblewrap/driver.js";
import { dockerClient } from "../sdk/backends/docker/client.js";
import { DockerDriver, containerName } from "../sdk/backends/docker/driver.js";
import { DockerWorkspaceManager } from "../sdk/backends/docker/index.js";
import { startDockerRunner } from "../sdk/backends/docker/runner.js";
import { LocalSandbox } from "../sdk/kit/host-sandbox.js";
import { RunnerClient, RunnerFiles } from "../sdk/kit/runner/index.js";
import type { Sandbox } from "../sdk/sandbox.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const ROUNDS = Number(process.argv[2] ?? 30);
const BASE_IMAGE = process.env.AGENTWS_BASE_IMAGE ?? "agentws-base:bookworm";
const run = promisify(execFile);

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
const ms = (v: number) => `${v.toFixed(1)} ms`;

function row(name: string, subject: number[], baseline: number[], baselineName: string, goal?: number): void {
  const ratio = median(subject) / median(baseline);
  const verdict = goal === undefined ? "" : ratio <= goal ? `  (goal ≤ ${goal}x: met)` : `  (goal ≤ ${goal}x: NOT met)`;
  console.log(`${name.padEnd(44)} ${ms(median(subject)).padStart(10)}  vs ${baselineName} ${ms(median(baseline))}  → ${ratio.toFixed(2)}x${verdict}`);
}

/** Alternates subject and baseline so drift (cache, CPU frequency) hits both alike. */
async function paired(n: number, subject: () => Promise<unknown>, baseline: () => Promise<unknown>): Promise<[number[], number[]]> {
  for (let i = 0; i < 3; i++) await Promise.all([subject(), baseline()].map((p) => p.catch(() => undefined)));
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < n; i++) {
    for (const [fn, out] of i % 2
      ? ([
          [subject, a],
          [baseline, b],
        ] as const)
      : ([
          [baseline, b],
          [subject, a],
        ] as const)) {
      const t = performance.now();
      await fn();
      out.push(performance.now() - t);
    }
  }
  return [a, b];
}

function spawnWait(cmd: string, args: string[]): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const c = spawn(cmd, args, { stdio: ["ignore", "ignore", "ignore"] });
    c.once("error", reject);
    c.once("exit", resolve);
  });
}

async function benchBubblewrap(base: string): Promise<void> {
  const d = new BubblewrapDriver({ basedir: base });
  await d.create({ workspaceId: "bench-bwrap", managedBy: "runtime" });
  const sb = await d.connect("bench-bwrap");
  try {
    const bare = await sb.argvFor(["true"]);
    const [subject, baseline] = await paired(
      ROUNDS,
      async () => {
        const r = await sb.exec(["true"]);
        if (r.exitCode !== 0) throw new Error(r.stderr.toString());
      },
      () => spawnWait("bwrap", bare),
    );
    row("bubblewrap exec(true)", subject, baseline, "bare bwrap true", 0.3);
    await benchFiles("bubblewrap", sb, sb.hostRoot);
  } finally {
    await sb.close();
  }
}

/** File round trips through the sandbox's runner against LocalSandbox on the same host folder. */
async function benchFiles(kind: string, sb: Sandbox, hostRoot: string): Promise<void> {
  const host = new LocalSandbox(hostRoot);
  const mib = Buffer.alloc(1 << 20, 0x61);
  const roundTrip = (s: Sandbox, name: string) => async () => {
    await s.writeFile(name, mib);
    if ((await s.readFile(name)).length !== mib.length) throw new Error("short read");
  };
  const [viaRunner, viaHost] = await paired(ROUNDS, roundTrip(sb, "bench-r.bin"), roundTrip(host, "bench-h.bin"));
  row(`${kind} 1 MiB write+read`, viaRunner, viaHost, "host folder", 1.5);
  // The two halves apart: a big write is one round trip into a spare the runner made ahead (descriptor
  // hand-off), a big read one round trip and a read of the runner's descriptor.
  const [wRunner, wHost] = await paired(
    ROUNDS,
    () => sb.writeFile("bench-r.bin", mib),
    () => host.writeFile("bench-h.bin", mib),
  );
  row(`${kind} 1 MiB write`, wRunner, wHost, "host folder");
  const [rRunner, rHost] = await paired(
    ROUNDS,
    () => sb.readFile("bench-r.bin"),
    () => host.readFile("bench-h.bin"),
  );
  row(`${kind} 1 MiB read`, rRunner, rHost, "host folder");
  await sb.mkdir("bench-list");
  await Promise.all(Array.from({ length: 1000 }, (_, i) => host.writeFile(`bench-list/f${i}.txt`, "x")));
  const listing = (s: Sandbox) => async () => {
    if ((await s.list("bench-list")).length !== 1000) throw new Error("short listing");
  };
  const [listRunner, listHost] = await paired(ROUNDS, listing(sb), listing(host));
  row(`${kind} list of 1000 entries`, listRunner, listHost, "host folder", 2);
  await sb.remove("bench-list");
}

/** The same runner calls over its private pipe pair and over the dockerd relay (two runners side by side). */
async function benchPrivatePipes(
  docker: ReturnType<typeof dockerClient>,
  container: ReturnType<ReturnType<typeof dockerClient>["getContainer"]>,
): Promise<void> {
  const transport = startDockerRunner(docker, container, [], "/workspace", true);
  const priv = new RunnerClient(transport);
  const relay = new RunnerClient({ ...startDockerRunner(docker, container, [], "/workspace", true), relayed: false });
  try {
    await Promise.all([priv.ready, relay.ready]);
    for (let i = 0; i < 100 && priv.channel !== "private"; i++) await new Promise((r) => setTimeout(r, 10));
    if (priv.channel !== "private") return console.log("docker private pipes: skipped, the runner could not open them");
    const [p, r] = [new RunnerFiles(async () => ({ client: priv })), new RunnerFiles(async () => ({ client: relay }))];
    const [statP, statR] = await paired(
      ROUNDS * 4,
      () => p.stat("nothing-here"),
      () => r.stat("nothing-here"),
    );
    row("docker stat, private pipes", statP, statR, "dockerd relay");
    const mib = Buffer.alloc(1 << 20, 0x61);
    const rw = (f: RunnerFiles, name: string) => async () => {
      await f.writeFile(name, mib);
      await f.readFile(name);
    };
    const [rwP, rwR] = await paired(ROUNDS, rw(p, "bench-p.bin"), rw(r, "bench-q.bin"));
    row("docker 1 MiB write+read, private pipes", rwP, rwR, "dockerd relay");
  } finally {
    await Promise.all([priv.stop(), relay.stop()]);
  }
}

async function benchDocker(base: string): Promise<void> {
  const docker = dockerClient();
  const d = new DockerDriver({ basedir: base, baseImage: BASE_IMAGE });
  const id = `bench-${process.pid}`;
  const cli = ["-H", process.env.DOCKER_HOST ?? "unix:///var/run/docker.sock"];
  await d.create({ workspaceId: id, managedBy: "runtime" });
  try {
    const sb = await d.connect(id);
    const name = containerName(id);
    const [execs, cliExecs] = await paired(
      ROUNDS,
      async () => {
        const r = await sb.exec(["true"]);
        if (r.exitCode !== 0) throw new Error(r.stderr.toString());
      },
      () => run("docker", [...cli, "exec", name, "true"]),
    );
    row("docker exec(true)", execs, cliExecs, "docker exec CLI", 0.1);
    if (sb.fileAccess === "host") {
      await benchFiles("docker", sb, path.join(base, id));
      await benchPrivatePipes(docker, docker.getContainer(name));
    } else console.log("docker files: skipped, the engine does not share the host folder");

    const image = await d.imageTag();
    const coldIds: string[] = [];
    const runIds: string[] = [];
    const n = Math.max(5, Math.floor(ROUNDS / 3));
    const [creates, runs] = await paired(
      n,
      async () => {
        const w = `bench-cold-${process.pid}-${coldIds.length}`;
        coldIds.push(w);
        await d.create({ workspaceId: w, managedBy: "runtime" });
      },
      async () => {
        const { stdout } = await run("docker", [...cli, "run", "-d", "--init", image, "sleep", "infinity"]);
        runIds.push(stdout.trim());
      },
    );
    row("docker cold create (cached image)", creates, runs, "docker run -d CLI");
    await Promise.all([...coldIds.map((w) => d.destroy(w, { deleteData: true })), ...runIds.map((c) => docker.getContainer(c).remove({ force: true }))]);

    // Only the resume is timed; the pause before it is setup.
    const r: number[] = [];
    const u: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      await d.pause(id);
      let t = performance.now();
      await d.resume(id);
      r.push(performance.now() - t);
      await docker.getContainer(name).pause();
      t = performance.now();
      await run("docker", [...cli, "unpause", name]);
      u.push(performance.now() - t);
    }
    row("docker resume from pause", r, u, "docker unpause CLI");

    // What a request pays after an idle eviction: the manager resumes and reconnects the workspace.
    const m = new DockerWorkspaceManager({ basedir: base, baseImage: BASE_IMAGE, ttl: 0.001, sweepInterval: 3600 });
    const evicted = `bench-evicted-${process.pid}`;
    try {
      await m.getWorkspace("bench", "agent", undefined, evicted);
      const back: number[] = [];
      const unpauses: number[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        await new Promise((done) => setTimeout(done, 5));
        if ((await m.sweep()).evicted !== 1) throw new Error("the idle workspace was not evicted");
        let t = performance.now();
        await m.getWorkspace("bench", "agent", undefined, evicted);
        back.push(performance.now() - t);
        await docker.getContainer(name).pause();
        t = performance.now();
        await run("docker", [...cli, "unpause", name]);
        unpauses.push(performance.now() - t);
      }
      row("manager getWorkspace after an idle eviction", back, unpauses, "docker unpause CLI");
    } finally {
      await m.closeAll();
      await d.destroy(evicted, { deleteData: true });
    }
  } finally {
    await d.destroy(id, { deleteData: true });
  }
}

async function dockerAvailable(): Promise<string | null> {
  try {
    await dockerClient().ping();
  } catch {
    try {
      const { stdout } = await run(path.join(ROOT, "scripts/dockerd.sh"), ["start"]);
      const m = /DOCKER_HOST=(\S+)/.exec(stdout);
      if (m) process.env.DOCKER_HOST = m[1];
      await dockerClient().ping();
    } catch (e) {
      return `no Docker engine (${String((e as Error).message).slice(0, 200)})`;
    }
  }
  try {
    await dockerClient().getImage(BASE_IMAGE).inspect();
  } catch {
    await run(path.join(ROOT, "scripts/base-image.sh"), [BASE_IMAGE], { maxBuffer: 1 << 24 });
  }
  return null;
}

const base = await mkdtemp(path.join(tmpdir(), "bench-sandbox-"));
try {
  console.log(`sandbox backends, medians of ${ROUNDS} paired rounds`);
  await benchBubblewrap(base);
  const skip = await dockerAvailable();
  if (skip) console.log(`docker: skipped, ${skip}`);
  else await benchDocker(base);
} finally {
  await rm(base, { recursive: true, force: true });
}
