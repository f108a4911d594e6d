/**
 * Runtime manager figures, each against a baseline measured in the same run:
 *   - cache-hit getWorkspace (explicit id, and id derived by the PER_AGENT policy) vs a bare Map.get plus one await;
 *   - an idle sweep over 10,000 cached workspaces vs a bare loop over a 10,000-entry Map;
 *   - 1000 concurrent callers for one cold id: how many provisionings ran;
 *   - 200 distinct cold ids on LocalWorkspaceManager, asked at once vs one after another (the
 *     reference's single cache lock serialises them);
 *   - replica leases: cache-hit getWorkspace on workspaces holding a lease (renewal timer running)
 *     vs the same without leases, renewals per minute per workspace under load, and the cost of one
 *     renewal and one freshness check on the host-side lease files.
 * Run: npx tsx bench/manager.ts   (node --expose-gc --import tsx bench/manager.ts also collects before the sweep)
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { FileLeases } from "../sdk/kit/lease.js";
import { WorkspaceManager, type ManagedIdentity, type ManagedWorkspace } from "../sdk/manager/index.js";
import { LocalWorkspaceManager } from "../sdk/backends/local/index.js";

/** An in-memory workspace: isolates the manager's own cost from any backend. */
class MemoryWorkspace implements ManagedWorkspace {
  inFlight = 0;
  lastActivityAt = Date.now();
  constructor(readonly workspaceId: string) {}
  touch(): void {
    this.lastActivityAt = Date.now();
  }
  async initialize(): Promise<void> {}
  async close(): Promise<void> {}
}

/** The same, over a backend with replica leases (host-side lease files, as Docker and Bubblewrap use). */
class LeasedMemoryWorkspace extends MemoryWorkspace {
  constructor(
    workspaceId: string,
    readonly leases: FileLeases,
  ) {
    super(workspaceId);
  }
  async releaseBackend(): Promise<"released" | "kept"> {
    return "released";
  }
  async ensureRunning(): Promise<void> {}
}

const median = (xs: number[]) => quantile(xs, 0.5);
function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
}
const us = (ms: number) => `${(ms * 1000).toFixed(3)} µs`;

/** Times each call individually (same timer for baseline and subject). */
async function perCall(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < 20_000; i++) await fn(); // warm-up (JIT)
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    out[i] = performance.now() - t;
  }
  return out;
}

async function benchHits(): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), "bench-mgr-"));
  try {
    await using m = new LocalWorkspaceManager({ basedir: dir });
    const ws = await m.getWorkspace("u1", "a1", "s1");
    const id = ws.workspaceId;
    const map = new Map([[id, ws]]);
    const N = 200_000;
    // Interleave rounds so drift (thermal, GC) hits both sides alike.
    const base: number[] = [];
    const explicit: number[] = [];
    const derived: number[] = [];
    for (let round = 0; round < 5; round++) {
      base.push(...(await perCall(N / 5, async () => await map.get(id))));
      explicit.push(...(await perCall(N / 5, () => m.getWorkspace("u1", "a1", "s1", id))));
      derived.push(...(await perCall(N / 5, () => m.getWorkspace("u1", "a1", "s1"))));
    }
    console.log("cache-hit getWorkspace (LocalWorkspaceManager, real LocalWorkspace), per call:");
    console.log(`  baseline Map.get + await : median ${us(median(base))}, p99 ${us(quantile(base, 0.99))}`);
    for (const [name, xs] of [
      ["explicit workspaceId", explicit],
      ["derived id (per_agent)", derived],
    ] as const)
      console.log(
        `  ${name.padEnd(24)} : median ${us(median(xs))} (${(median(xs) / median(base)).toFixed(2)}x baseline), p99 ${us(quantile(xs, 0.99))} (${(quantile(xs, 0.99) / quantile(base, 0.99)).toFixed(2)}x)`,
      );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function benchSweep(): Promise<void> {
  const N = 10_000;
  await using m = new WorkspaceManager<MemoryWorkspace>({ ttl: 3600, factory: (i: ManagedIdentity) => new MemoryWorkspace(i.workspaceId) });
  await Promise.all(Array.from({ length: N }, (_, i) => m.getWorkspace(`u${i}`, "a", undefined, `w${i}`)));
  const plain = new Map(m.cachedIds().map((id) => [id, m.peek(id)!]));
  // Let the 10,000 fresh workspaces be promoted out of the young generation first: otherwise the
  // first scavenges (copying them) land inside the measured sweeps.
  for (let i = 0; i < 50; i++) await m.sweep();
  (globalThis as { gc?: () => void }).gc?.();
  const baseline: number[] = [];
  const sweeps: number[] = [];
  for (let i = 0; i < 200; i++) {
    let t = performance.now();
    let idle = 0;
    const now = Date.now();
    for (const ws of plain.values()) if (now - ws.lastActivityAt > 3_600_000 && ws.inFlight === 0) idle++;
    baseline.push(performance.now() - t);
    t = performance.now();
    const r = await m.sweep();
    sweeps.push(performance.now() - t);
    if (r.evicted !== 0 || idle !== 0) throw new Error("nothing should be idle");
  }
  // Every workspace idle: the sweep that evicts (closes) all 10,000.
  const t = performance.now();
  const r = await m.sweep(Date.now() + 3_601_000);
  const evictAll = performance.now() - t;
  console.log(`idle sweep over ${N} cached workspaces:`);
  console.log(`  baseline bare Map loop    : median ${(median(baseline) * 1000).toFixed(0)} µs, p99 ${(quantile(baseline, 0.99) * 1000).toFixed(0)} µs`);
  console.log(
    `  sweep, none idle          : median ${(median(sweeps) * 1000).toFixed(0)} µs (${(median(sweeps) / median(baseline)).toFixed(2)}x baseline), p99 ${(quantile(sweeps, 0.99) * 1000).toFixed(0)} µs`,
  );
  console.log(`  sweep evicting all ${r.evicted} : ${evictAll.toFixed(2)} ms (${(evictAll / median(baseline)).toFixed(0)}x baseline)`);
}

async function benchSingleFlight(): Promise<void> {
  let provisionings = 0;
  await using m = new WorkspaceManager<MemoryWorkspace>({
    factory: (i: ManagedIdentity) => {
      provisionings++;
      return new MemoryWorkspace(i.workspaceId);
    },
  });
  const got = await Promise.all(Array.from({ length: 1000 }, () => m.getWorkspace("u1", "a1")));
  console.log(`single flight: 1000 concurrent callers for one cold id -> ${provisionings} provisioning(s), ${new Set(got).size} distinct workspace(s)`);
}

async function benchColdParallel(): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), "bench-mgr-cold-"));
  try {
    const N = 200;
    const serial: number[] = [];
    const parallel: number[] = [];
    for (let round = 0; round < 3; round++) {
      {
        await using m = new LocalWorkspaceManager({ basedir: path.join(dir, `s${round}`) });
        const t = performance.now();
        for (let i = 0; i < N; i++) await m.getWorkspace(`u${i}`, "a");
        serial.push(performance.now() - t);
      }
      {
        await using m = new LocalWorkspaceManager({ basedir: path.join(dir, `p${round}`) });
        const t = performance.now();
        await Promise.all(Array.from({ length: N }, (_, i) => m.getWorkspace(`u${i}`, "a")));
        parallel.push(performance.now() - t);
      }
    }
    console.log(`${N} distinct cold ids (LocalWorkspaceManager, real folders):`);
    console.log(`  one after another (baseline): median ${median(serial).toFixed(1)} ms`);
    console.log(`  all at once                 : median ${median(parallel).toFixed(1)} ms (${(median(parallel) / median(serial)).toFixed(2)}x baseline)`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** getWorkspace hits spread over `ids` for `ms` of wall time, yielding to timers every 1000 calls (as a server's I/O would). */
async function hammer(m: WorkspaceManager, ids: string[], ms: number): Promise<number> {
  const until = performance.now() + ms;
  let calls = 0;
  while (performance.now() < until) {
    for (let i = 0; i < 1000; i++) await m.getWorkspace("u", "a", undefined, ids[(calls + i) % ids.length]);
    calls += 1000;
    await new Promise((r) => setImmediate(r));
  }
  return calls;
}

async function benchLeases(): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), "bench-mgr-leases-"));
  try {
    const leases = new FileLeases(path.join(dir, "leases"));
    const ttl = 3; // seconds: renewals every ttl/3 = 1 s, so a few seconds of load show the rate
    await using plain = new WorkspaceManager<MemoryWorkspace>({ ttl, factory: (i: ManagedIdentity) => new MemoryWorkspace(i.workspaceId) });
    await using leased = new WorkspaceManager<LeasedMemoryWorkspace>({
      ttl,
      factory: (i: ManagedIdentity) => new LeasedMemoryWorkspace(i.workspaceId, leases),
    });
    const one = ["w-hit"];
    await plain.getWorkspace("u", "a", undefined, one[0]);
    await leased.getWorkspace("u", "a", undefined, one[0]);
    const N = 200_000;
    const base: number[] = [];
    const without: number[] = [];
    const withLeases: number[] = [];
    const map = new Map([[one[0], plain.peek(one[0]!)]]);
    for (let round = 0; round < 5; round++) {
      base.push(...(await perCall(N / 5, async () => await map.get(one[0]!))));
      without.push(...(await perCall(N / 5, () => plain.getWorkspace("u", "a", undefined, one[0]))));
      withLeases.push(...(await perCall(N / 5, () => leased.getWorkspace("u", "a", undefined, one[0]))));
      await new Promise((r) => setTimeout(r, 50)); // let the renewal timer run between rounds
    }
    console.log("replica leases: cache-hit getWorkspace (explicit id), per call:");
    console.log(`  baseline Map.get + await : median ${us(median(base))}, p99 ${us(quantile(base, 0.99))}`);
    console.log(
      `  no leases                : median ${us(median(without))} (${(median(without) / median(base)).toFixed(2)}x baseline), p99 ${us(quantile(without, 0.99))}`,
    );
    console.log(
      `  leases + renewal timer   : median ${us(median(withLeases))} (${(median(withLeases) / median(base)).toFixed(2)}x baseline, ${(median(withLeases) / median(without)).toFixed(2)}x no leases), p99 ${us(quantile(withLeases, 0.99))}`,
    );

    // Renewals under load: 50 workspaces all active, hit as fast as the loop goes for 6 s.
    const ids = Array.from({ length: 50 }, (_, i) => `w-load-${i}`);
    await Promise.all(ids.map((id) => leased.getWorkspace("u", "a", undefined, id)));
    const before = leased.leaseStats().renewals;
    const ms = 6_000;
    const calls = await hammer(leased, ids, ms);
    const renewals = leased.leaseStats().renewals - before;
    const perMin = (renewals / ids.length) * (60_000 / ms);
    console.log(
      `  under load: ${ids.length} workspaces, ${(calls / (ms / 1000) / 1000).toFixed(0)}k hits/s for ${ms / 1000} s (ttl ${ttl} s, renew every ${ttl / 3} s):`,
    );
    console.log(
      `    ${renewals} renewals = ${perMin.toFixed(1)} renewals per minute per workspace (bound: 60 / renew interval in s = ${(60 / (ttl / 3)).toFixed(0)}; default ttl 3600 s renews every 30 s = 2 per minute)`,
    );

    // The I/O one renewal and one freshness check cost, against a bare stat of the same file.
    const { stat } = await import("node:fs/promises");
    const file = path.join(leases.root, one[0]!, leased.replicaId);
    const timeIt = async (n: number, fn: () => Promise<unknown>) => {
      const xs: number[] = [];
      for (let i = 0; i < n; i++) {
        const t = performance.now();
        await fn();
        xs.push(performance.now() - t);
      }
      return xs;
    };
    const statX = await timeIt(2000, () => stat(file));
    const renewX = await timeIt(2000, () => leases.renew(one[0]!, leased.replicaId, 3000));
    await leases.renew(one[0]!, plain.replicaId, 3000); // another replica's lease to find
    const checkX = await timeIt(2000, () => leases.othersActive(one[0]!, leased.replicaId));
    console.log(
      `  lease file I/O: baseline stat ${us(median(statX))}; renew (utimes) ${us(median(renewX))} (${(median(renewX) / median(statX)).toFixed(2)}x); othersActive (readdir + lstat) ${us(median(checkX))} (${(median(checkX) / median(statX)).toFixed(2)}x)`,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

console.log(`node ${process.version}, ${process.platform}/${process.arch}`);
if (process.argv.includes("--leases")) {
  await benchLeases();
  process.exit(0);
}
await benchHits();
await benchSweep();
await benchSingleFlight();
await benchColdParallel();
await benchLeases();
