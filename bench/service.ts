/**
 * The HTTP service against bare routes of the same framework, on the same machine in the same run,
 * both served by @hono/node-server over loopback with keep-alive clients:
 *   (a) a route's overhead: p50 / p99 latency and throughput with N concurrent clients, against a
 *       bare `Hono` app answering the same JSON (measured again beside each route: the machine is
 *       shared, so each ratio uses its own neighbour):
 *       - GET /healthz: the middleware alone (request id, JSON log to a silent logger, metrics);
 *       - GET /sessions/{id}: + bearer auth (a hashed-token lookup in SQLite) + the rate limiter + a session read;
 *       - GET .../workspace/files: + the manager (cache hit) + a confined 4 KiB file read;
 *       - POST .../offload/tool-result: + body validation + an exclusive file create;
 *   (b) sessions per second: 100 concurrent clients (100 users, one agent each, so after its first
 *       create a client's workspace is a cache hit) POSTing /sessions on the Local backend and
 *       SQLite, against a bare Hono POST parsing the body and answering 201 with a session's JSON.
 * Every quota and rate limit is on, set far above what the bench sends: their checks run, none refuses.
 * The Python reference's FastAPI app is not started here (it needs its storage and message bus).
 * Run: npx tsx bench/service.ts [seconds per measure, default 3] [concurrency of (a), default 16] [clients of (b), default 100]
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Hono } from "hono";
import { LocalWorkspaceManager } from "../sdk/backends/local/index.js";
import { SqliteSessionStore, createApp, newToken, startService, type ServiceLimits } from "../sdk/service/index.js";

const seconds = Number(process.argv[2] ?? 3);
const concurrency = Number(process.argv[3] ?? 16);
const clients = Number(process.argv[4] ?? 100);
/** On, and out of reach: the bench measures the checks, not refusals. */
const HIGH: Partial<ServiceLimits> = {
  userRequestsPerSecond: 1e9,
  userRequestBurst: 1e9,
  globalRequestsPerSecond: 1e9,
  globalRequestBurst: 1e9,
  maxSessionsPerUser: 1e9,
  maxLiveWorkspacesPerUser: 1e6,
  maxLiveWorkspaces: 1e6,
};

const dir = await mkdtemp(path.join(tmpdir(), "bench-svc-"));
const manager = new LocalWorkspaceManager({ basedir: path.join(dir, "ws") });
const store = new SqliteSessionStore(path.join(dir, "s.db"));
const users = Array.from({ length: Math.max(clients, 1) }, () => newToken());
for (const [i, t] of users.entries()) await store.addTokenHash(`bench${i}`, t.hash);
const token = users[0]!.token;
const { app, dispose } = createApp({ workspaceManager: manager, sessionStore: store, backend: "local", processMetrics: false, limits: HIGH });
const service = await startService({ app });

const auth = { authorization: `Bearer ${token}`, "content-type": "application/json" };
const created = await fetch(`${service.url}/sessions`, { method: "POST", headers: auth, body: JSON.stringify({ agentId: "bench" }) });
const session = (await created.json()) as { sessionId: string; workspaceId: string };
await writeFile(path.join(dir, "ws", session.workspaceId, "file.txt"), "x".repeat(4096));
const w = `/sessions/${session.sessionId}/workspace`;

// The bare app answers what the service answers: the session's JSON.
const view = await (await fetch(`${service.url}/sessions/${session.sessionId}`, { headers: auth })).json();
const bareApp = new Hono();
bareApp.get("/", (c) => c.json(view));
bareApp.post("/", async (c) => c.json({ ...(view as object), agentId: ((await c.req.json()) as { agentId: string }).agentId }, 201));
const bare = await startService({ app: bareApp });

interface Result {
  p50: number;
  p99: number;
  rps: number;
}

/** `workers` loops sending requests for `seconds`; `init(worker)` makes each request. */
async function measure(url: string, init: (worker: number) => RequestInit, workers = concurrency, want?: number): Promise<Result> {
  const latencies: number[] = [];
  // Warm-up, not counted.
  for (let i = 0; i < 50; i++) await (await fetch(url, init(i % workers))).arrayBuffer();
  const until = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      while (performance.now() < until) {
        const t = performance.now();
        const r = await fetch(url, init(worker));
        await r.arrayBuffer();
        if (want === undefined ? !r.ok : r.status !== want) throw new Error(`${url}: ${r.status}`);
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
  [
    "POST .../offload/tool-result",
    `${service.url}${w}/offload/tool-result`,
    () => ({ method: "POST", headers: auth, body: JSON.stringify({ id: `c${call++}`, output: "y".repeat(1024) }) }),
  ],
];

const fmt = (r: Result) => `p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, ${r.rps.toFixed(0)} req/s`;
const versus = (r: Result, base: Result) => `p50 ${(r.p50 / base.p50).toFixed(2)}x, throughput ${(r.rps / base.rps).toFixed(2)}x of bare`;
console.log(`service bench: ${seconds} s per measure, Node ${process.version}`);
console.log(`(a) route overhead, ${concurrency} concurrent clients`);
console.log(`  ${"bare Hono GET / (baseline)".padEnd(32)} ${fmt(await measure(`${bare.url}/`, () => ({})))}`);
for (const [name, url, init] of routes) {
  const base = await measure(`${bare.url}/`, () => ({}));
  const r = await measure(url, init);
  console.log(`  ${name.padEnd(32)} ${fmt(r)}  | ${versus(r, base)}`);
}

console.log(`(b) POST /sessions, ${clients} concurrent clients (one user and agent each), Local backend, SQLite`);
const post = (agentId: string): RequestInit => ({ method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ agentId }) });
const baseCreate = await measure(`${bare.url}/`, () => post("bench"), clients, 201);
const creates = await measure(
  `${service.url}/sessions`,
  (worker) => ({ ...post("bench"), headers: { authorization: `Bearer ${users[worker]!.token}`, "content-type": "application/json" } }),
  clients,
  201,
);
console.log(`  ${"bare Hono POST / (baseline)".padEnd(32)} ${fmt(baseCreate)}`);
console.log(`  ${"POST /sessions".padEnd(32)} ${fmt(creates)}  | ${creates.rps.toFixed(0)} sessions/s, ${versus(creates, baseCreate)}`);

await service.close();
await bare.close();
dispose();
await manager[Symbol.asyncDispose]();
await store.close();
await rm(dir, { recursive: true, force: true });
