import { spawn, type ChildProcess } from "node:child_process";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { containerName, DockerDriver } from "../../sdk/backends/docker/driver.js";
import { dockerClient } from "../../sdk/backends/docker/client.js";
import type { EvictEvent, ManagerEvent } from "../../sdk/manager/events.js";
import { uniqueId } from "../contract/fixture.js";
import { BASE_IMAGE, dockerEngine } from "../support/docker-engine.js";
import { ROOT } from "../support/sandbox-fixtures.js";

/**
 * Service replicas sharing one backend object, as real processes (test/support/replica.ts): an
 * idle replica's sweep never pauses what another replica is using, and a replica that dies
 * without cleanup stops counting once its lease expires.
 */
const engine = await dockerEngine();
const BUSY_MS = Number(process.env.AGENTWS_REPLICAS_BUSY_MS ?? 60_000);
const SCRIPT = path.join(ROOT, "test/support/replica.ts");

interface Line {
  t: number;
  type: string;
  event?: ManagerEvent;
  message?: string;
  ok?: number;
  failed?: number;
  lastOpAt?: number;
  replicaId?: string;
}

class Replica {
  readonly lines: Line[] = [];
  readonly child: ChildProcess;
  readonly #stderr: string[] = [];

  constructor(config: Record<string, unknown>) {
    this.child = spawn(process.execPath, ["--import", "tsx", SCRIPT, JSON.stringify(config)], { cwd: ROOT, stdio: ["pipe", "pipe", "pipe"], env: process.env });
    createInterface({ input: this.child.stdout! }).on("line", (l) => {
      try {
        this.lines.push(JSON.parse(l) as Line);
      } catch {
        this.#stderr.push(`stdout: ${l}`);
      }
    });
    this.child.stderr!.on("data", (d: Buffer) => this.#stderr.push(d.toString()));
  }

  get failures(): Line[] {
    return this.lines.filter((l) => l.type === "failure");
  }
  events(type: ManagerEvent["type"]): (Line & { event: ManagerEvent })[] {
    return this.lines.filter((l): l is Line & { event: ManagerEvent } => l.type === "event" && l.event?.type === type);
  }
  keptEvictions(): Line[] {
    return this.events("evict").filter((l) => (l.event as EvictEvent).keptForReplica === true);
  }

  async waitFor(pred: (l: Line) => boolean, timeoutMs: number, what: string): Promise<Line> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.lines.find(pred);
      if (hit) return hit;
      if (this.child.exitCode !== null) throw new Error(`replica exited (${this.child.exitCode}) before ${what}: ${this.#stderr.join("").slice(-2000)}`);
      if (Date.now() > until) throw new Error(`no ${what} within ${timeoutMs} ms; stderr: ${this.#stderr.join("").slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Closes stdin: the replica disposes its manager and exits. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once("exit", r));
    this.child.stdin!.end();
    await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000))]);
    if (this.child.exitCode === null) this.child.kill("SIGKILL");
  }
}

/** Pause actions the engine reports for one container, with the engine's timestamps (ms). */
async function watchEnginePauses(workspaceId: string): Promise<{ pauses: number[]; stop: () => void }> {
  const stream = (await dockerClient().getEvents({
    filters: { type: ["container"], container: [containerName(workspaceId)], event: ["pause"] },
  })) as NodeJS.ReadableStream & { destroy(): void };
  const pauses: number[] = [];
  createInterface({ input: stream }).on("line", (l) => {
    const e = JSON.parse(l) as { timeNano?: number; time?: number };
    pauses.push(e.timeNano ? e.timeNano / 1e6 : (e.time ?? 0) * 1000);
  });
  return { pauses, stop: () => stream.destroy() };
}

async function waitUntil(pred: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > until) throw new Error(`not ${what} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Replica A: idle with a short TTL and a frequent sweep, poking the workspace now and then (so it
 * keeps provisioning and evicting it). Replica B: exec and file operations back to back for BUSY_MS.
 */
async function idleAndBusy(base: Record<string, unknown>): Promise<{ a: Replica; b: Replica; busyFrom: number; busyDone: Line }> {
  const a = new Replica({ ...base, mode: "idle", ttl: 0.6, sweepInterval: 0.2, pokeMs: 3_000 });
  await a.waitFor((l) => l.type === "ready", 120_000, "replica A ready");
  const b = new Replica({ ...base, mode: "busy", ttl: 1.5, sweepInterval: 0.5, busyMs: BUSY_MS });
  const busyFrom = (await b.waitFor((l) => l.type === "ready", 120_000, "replica B ready")).t;
  const busyDone = await b.waitFor((l) => l.type === "busy-done", BUSY_MS + 60_000, "end of B's operations");
  return { a, b, busyFrom, busyDone };
}

/** While B worked (from its first operation to its last): B's operations and A's pokes all succeeded, and A's sweep kept evicting. */
function expectNoFailures(a: Replica, b: Replica, busyFrom: number, busyDone: Line): void {
  expect(b.failures.map((l) => l.message)).toEqual([]);
  expect(a.failures.map((l) => l.message)).toEqual([]);
  expect(busyDone.failed).toBe(0);
  expect(busyDone.ok).toBeGreaterThan(20);
  expect(a.events("evict").filter((l) => l.t > busyFrom && l.t < busyDone.lastOpAt!).length).toBeGreaterThan(0);
}

const during = (from: number, to: number) => (t: number) => t > from && t <= to;

describe.concurrent("replicas sharing one backend object", () => {
  let basedir: string;
  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-replicas-test-"));
  });
  const dockerIds: string[] = [];
  afterAll(async () => {
    const d = new DockerDriver({ basedir: path.join(basedir, "docker") });
    if (engine) await Promise.all(dockerIds.map((w) => d.destroy(w).catch(() => undefined)));
    await fs.rm(basedir, { recursive: true, force: true });
  });

  it.skipIf(!engine)(
    "Docker: an idle replica never pauses the container another replica is using",
    async () => {
      const workspaceId = uniqueId("replicas");
      dockerIds.push(workspaceId);
      const base = { kind: "docker", basedir: path.join(basedir, "docker"), workspaceId, baseImage: BASE_IMAGE, readOnlyPaths: [ROOT] };
      // The engine's own record of pauses, whichever replica asked for them.
      const { pauses, stop } = await watchEnginePauses(workspaceId);
      let a: Replica | undefined;
      let b: Replica | undefined;
      try {
        const r = await idleAndBusy(base);
        ({ a, b } = r);
        const busy = during(r.busyFrom, r.busyDone.lastOpAt!);
        expectNoFailures(r.a, r.b, r.busyFrom, r.busyDone);
        // A's sweep ran while B worked and left the container running for B: neither the engine
        // nor any replica saw a pause then.
        expect(r.a.keptEvictions().filter((l) => busy(l.t)).length).toBeGreaterThan(0);
        expect(pauses.filter(busy)).toEqual([]);
        expect([...r.a.events("pause"), ...r.b.events("pause")].filter((l) => busy(l.t))).toEqual([]);
        // Once both are idle, the last one's sweep pauses it.
        await waitUntil(() => pauses.some((t) => t > r.busyDone.lastOpAt!), 30_000, "paused after both replicas went idle");
      } finally {
        stop();
        await Promise.all([a?.stop(), b?.stop()]);
      }
    },
    BUSY_MS + 240_000,
  );

  // Bubblewrap keeps no process between commands: eviction only closes this replica's handle, so
  // there is nothing to pause; what must hold is that A's evictions never break B's operations.
  it(
    "Bubblewrap: an idle replica's evictions never break another replica's operations",
    async () => {
      const workspaceId = uniqueId("replicas");
      const base = { kind: "bubblewrap", basedir: path.join(basedir, "bwrap"), workspaceId, readOnlyPaths: [ROOT] };
      let a: Replica | undefined;
      let b: Replica | undefined;
      try {
        const r = await idleAndBusy(base);
        ({ a, b } = r);
        expectNoFailures(r.a, r.b, r.busyFrom, r.busyDone);
        expect([...r.a.events("pause"), ...r.b.events("pause")]).toEqual([]);
      } finally {
        await Promise.all([a?.stop(), b?.stop()]);
      }
    },
    BUSY_MS + 240_000,
  );

  it.skipIf(!engine)(
    "Docker: a replica killed without cleanup stops counting once its lease expires; the survivor's sweep pauses",
    async () => {
      const workspaceId = uniqueId("replicas-kill");
      dockerIds.push(workspaceId);
      const dockerBase = path.join(basedir, "docker");
      const base = { kind: "docker", basedir: dockerBase, workspaceId, baseImage: BASE_IMAGE, readOnlyPaths: [ROOT] };
      const { pauses, stop } = await watchEnginePauses(workspaceId);
      const doomed = new Replica({ ...base, mode: "busy", ttl: 2, sweepInterval: 0.5, busyMs: 600_000 });
      let survivor: Replica | undefined;
      try {
        const ready = await doomed.waitFor((l) => l.type === "ready", 120_000, "doomed replica ready");
        survivor = new Replica({ ...base, mode: "idle", ttl: 0.6, sweepInterval: 0.2 });
        await survivor.waitFor((l) => l.type === "ready", 120_000, "survivor ready");
        // The survivor went idle while the other worked: it handed the container over, unpaused.
        await survivor.waitFor(
          (l) => l.type === "event" && l.event?.type === "evict" && (l.event as EvictEvent).keptForReplica === true,
          30_000,
          "a kept eviction",
        );
        expect(pauses).toEqual([]);
        doomed.child.kill("SIGKILL");
        await new Promise((r) => doomed.child.once("exit", r));
        const killedAt = Date.now();
        // Nothing released the dead replica's lease: it is still on disk, and it only expires.
        const leaseFile = path.join(dockerBase, ".agentws", "leases", workspaceId, ready.replicaId!);
        expect((await fs.stat(leaseFile)).isFile()).toBe(true);
        await waitUntil(() => pauses.length > 0, 30_000, "paused by the survivor after the dead replica's lease expired");
        expect(pauses[0]!).toBeGreaterThan(killedAt);
        // The survivor reports it once its guarded pause has settled (after the engine's event).
        await survivor.waitFor((l) => l.type === "event" && l.event?.type === "pause", 30_000, "the survivor's pause event");
        expect(survivor.failures).toEqual([]);
      } finally {
        stop();
        await Promise.all([survivor?.stop(), doomed.stop()]);
      }
    },
    300_000,
  );
});
