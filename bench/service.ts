/**
 * The HTTP service's per-request overhead, against a bare route of the same framework on the same
 * machine in the same run: a `Hono` app with one `GET /` returning JSON, served by the same
 * @hono/node-server. For each route: p50 / p99 latency and throughput with N concurrent
 * keep-alive clients over loopback, and the ratio to the bare route.
 *   - GET /healthz: the middleware alone (request id, JSON log to a silent logger, metrics);
 *   - GET /sessions/{id}: + bearer auth (a hashed-token lookup in SQLite) + a session read;
 *   - GET .../workspace/files: + the manager (cache hit) + a confined 4 KiB file read;
 *   - POST .../offload/tool-result: + body validation + an exclusive file create.
 * The Python reference's FastAPI app is not started here (it needs its storage and message bus).
 * Run: npx tsx bench/service.ts [seconds per route, default 3] [concurrency, default 16]
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Hono } from "hono";
import { LocalWorkspaceManager } from "../sdk/backends/local/index.js";
import { SqliteSessionStore, createApp, newToken, startService } from "../sdk/service/index.js";

const seconds = Number(process.argv[2] ?? 3);
const concurrency = Number(process.argv[3] ?? 16);
const dir = await mkdtemp(path.join(tmpdir(), "bench-svc-"));
const manager = new LocalWorkspaceManager({ basedir: path.join(dir, "ws") });
const store = new SqliteSessionStore(path.join(dir, "s.db"));
const { token, hash } = newToken();
await store.addTokenHash("bench", hash);
const { app, dispose } = createApp({ workspaceManager: manager, sessionStore: store, backend: "local", processMetrics: false });
const service = await startService({ app });
const bareApp = new Hono();
bareApp.get("/", (c) => c.json({ ok: true }));
const bare = await startService({ app: bareApp });

const auth = { authorization: `Bearer ${token}`, "content-type": "application/json" };
const session = (await (await fetch(`${service.url}/sessions`, { method: "POST", headers: auth, body: JSON.stringify({ agentId: "bench" }) })).json()) as { sessionId: string; workspaceId: string };
await writeFile(path.join(dir, "ws", session.workspaceId, "file.txt"), "x".repeat(4096));
const w = `/sessions/${session.sessionId}/workspace`;

interface Result {
  p50: number;
  p99: number;
  rps: number;
}

async function measure(url: string, init: () => RequestInit): Promise<Result> {
  const latencies: number[] = [];
  // Warm-up, not counted.
  for (let i = 0; i < 50; i++) await (await fetch(url, init())).arrayBuffer();
  const until = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const t = performance.now();
        const r = await fetch(url, init());
        await r.arrayBuffer();
        if (!r.ok) throw new Error(`${url}: ${r.status}`);
        latencies.push(performance.now() - t);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { p50: latencies[Math.floor(latencies.length * 0.5)]!, p99: latencies[Math.floor(latencies.length * 0.99)]!, rps: latencies.length / elapsed };
}

let call = 0;
const routes: Array<[string, string, () => RequestInit]> = [
  ["GET /healthz", `${service.url}/healthz`, () => ({})],
  ["GET /sessions/{id}", `${service.url}/sessions/${session.sessionId}`, () => ({ headers: auth })],
  ["GET .../files (4 KiB)", `${service.url}${w}/files?path=file.txt`, () => ({ headers: auth })],
  ["POST .../offload/tool-result", `${service.url}${w}/offload/tool-result`, () => ({ method: "POST", headers: auth, body: JSON.stringify({ id: `c${call++}`, output: "y".repeat(1024) }) })],
];

const fmt = (r: Result) => `p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, ${r.rps.toFixed(0)} req/s`;
console.log(`service bench: ${seconds} s per route, ${concurrency} concurrent clients, Node ${process.version}`);
const baseline = await measure(`${bare.url}/`, () => ({}));
console.log(`  ${"bare Hono GET / (baseline)".padEnd(32)} ${fmt(baseline)}`);
for (const [name, url, init] of routes) {
  // The baseline again beside each route: the machine is shared, so each ratio uses its own neighbour.
  const base = await measure(`${bare.url}/`, () => ({}));
  const r = await measure(url, init);
  console.log(`  ${name.padEnd(32)} ${fmt(r)}  | p50 ${(r.p50 / base.p50).toFixed(2)}x, throughput ${(r.rps / base.rps).toFixed(2)}x of bare`);
}

await service.close();
await bare.close();
dispose();
await manager[Symbol.asyncDispose]();
await store.close();
await rm(dir, { recursive: true, force: true });
