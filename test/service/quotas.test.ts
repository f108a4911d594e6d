import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LocalWorkspaceManager } from "../../sdk/backends/local/index.js";
import { LIMIT_FLAGS, serviceLimits } from "../../sdk/cli/serve.js";
import { PostgresSessionStore, SqliteSessionStore, createApp, type ServiceLimits, type SessionRecord, type SessionStore } from "../../sdk/service/index.js";
import { freshDatabase, postgresUrl } from "../support/postgres.js";
import { startTestService, type Running } from "./service-fixture.js";

/**
 * Quotas and rate limits (issue 26 item 6) and metric names (item 13), on a real service over
 * loopback. Rates are tiny (one token per 100 s) so a burst's outcome never depends on timing.
 */
const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

const OFF: Partial<ServiceLimits> = {
  userRequestsPerSecond: 0,
  globalRequestsPerSecond: 0,
  maxSessionsPerUser: 0,
  maxLiveWorkspacesPerUser: 0,
  maxLiveWorkspaces: 0,
};

async function service(limits: Partial<ServiceLimits>, options: { store?: SessionStore; basedir?: string; users?: string[] } = {}): Promise<Running> {
  const svc = await startTestService({ limits: { ...OFF, ...limits }, ...options });
  cleanups.push(() => svc.close());
  return svc;
}

async function expectLimited(r: Response, limit: string): Promise<Record<string, unknown>> {
  expect(r.status).toBe(429);
  expect(r.headers.get("content-type")).toBe("application/problem+json");
  expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  const body = (await r.json()) as Record<string, unknown>;
  expect(body).toMatchObject({ status: 429, title: "rate_limited", retryable: true });
  expect(Number(body.retryAfterMs)).toBeGreaterThan(0);
  expect(body.field).toBeUndefined();
  expect(String(body.detail)).not.toMatch(/alice|bob/);
  expect(r.headers.get("retry-after")).toBe(String(Math.ceil(Number(body.retryAfterMs) / 1000)));
  expect(body.limit).toBe(limit);
  return body;
}

const create = (svc: Running, user: string, agentId: string) => svc.call(user, "POST", "/sessions", { agentId });
const metric = async (svc: Running, line: string): Promise<number> => {
  const text = await (await fetch(`${svc.url}/metrics`)).text();
  const m = new RegExp(`^${line.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
};

describe("request rate", () => {
  it("answers a burst over a user's rate with 429, Retry-After and a problem body; another user is unaffected", async () => {
    const svc = await service({ userRequestsPerSecond: 0.01, userRequestBurst: 5 });
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const r = await svc.call("alice", "GET", "/sessions");
      statuses.push(r.status);
      if (r.status === 429) await expectLimited(r, "user_rate");
      else await r.arrayBuffer();
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    // Bob has a bucket of his own.
    expect((await svc.call("bob", "GET", "/sessions")).status).toBe(200);
    // Unauthenticated requests are still a 401 (the rate is per authenticated user), /metrics is not limited.
    expect((await svc.call(null, "GET", "/sessions")).status).toBe(401);
    expect(await metric(svc, 'agentws_limit_refusals_total{limit="user_rate"}')).toBe(3);
  });

  it("holds a global rate over all users, per replica", async () => {
    const svc = await service({ globalRequestsPerSecond: 0.01, globalRequestBurst: 3 });
    for (let i = 0; i < 3; i++) expect((await svc.call(i % 2 ? "bob" : "alice", "GET", "/sessions")).status).toBe(200);
    await expectLimited(await svc.call("bob", "GET", "/sessions"), "global_rate");
    await expectLimited(await svc.call("alice", "GET", "/sessions"), "global_rate");
    expect(await metric(svc, 'agentws_limit_refusals_total{limit="global_rate"}')).toBe(2);
  });
});

describe("sessions per user", () => {
  it("refuses a session over the quota (nothing stored), leaves other users alone, and frees room on delete", async () => {
    const svc = await service({ maxSessionsPerUser: 3 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await create(svc, "alice", "a");
      expect(r.status).toBe(201);
      ids.push(((await r.json()) as { sessionId: string }).sessionId);
    }
    const refused = await expectLimited(await create(svc, "alice", "a"), "sessions_per_user");
    expect(refused.detail).toContain("3 sessions per user");
    expect(((await (await svc.call("alice", "GET", "/sessions")).json()) as { total: number }).total).toBe(3);
    expect((await create(svc, "bob", "a")).status).toBe(201);
    expect((await svc.call("alice", "DELETE", `/sessions/${ids[0]}`)).status).toBe(204);
    expect((await create(svc, "alice", "a")).status).toBe(201);
    expect(await metric(svc, 'agentws_limit_refusals_total{limit="sessions_per_user"}')).toBe(1);
  });

  it("lets exactly one of 12 concurrent creates at quota-1 through, on one replica and on two sharing a store", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "quota-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const store = new SqliteSessionStore(path.join(dir, "s.db"));
    const a = await service({ maxSessionsPerUser: 5 }, { store, basedir: path.join(dir, "ws"), users: ["alice", "bob"] });
    // A second replica: its own manager and process-local state, the same store and tokens.
    const b = await service(
      { maxSessionsPerUser: 5 },
      { store: new SqliteSessionStore(path.join(dir, "s.db")), basedir: path.join(dir, "ws"), users: ["carol"] },
    );
    b.tokens.alice = a.tokens.alice!;
    for (let i = 0; i < 4; i++) expect((await create(a, "alice", `agent${i}`)).status).toBe(201);
    // New agents: each replica reserves its slot, then provisions; only the store's check stops the second insert.
    const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => create(i % 2 ? b : a, "alice", `fresh${i}`)));
    expect(burst.map((r) => r.status).sort()).toEqual([201, ...Array<number>(11).fill(429)]);
    expect((await store.listSessions("alice", { limit: 100, offset: 0 })).total).toBe(5);
    // Different agents again, now all 12 on one replica at quota-1 after a delete.
    const list = (await (await a.call("alice", "GET", "/sessions")).json()) as { sessions: Array<{ sessionId: string }> };
    expect((await a.call("alice", "DELETE", `/sessions/${list.sessions[0]!.sessionId}`)).status).toBe(204);
    const again = await Promise.all(Array.from({ length: 12 }, (_, i) => create(a, "alice", `other${i}`)));
    expect(again.map((r) => r.status).sort()).toEqual([201, ...Array<number>(11).fill(429)]);
    expect((await store.listSessions("alice", { limit: 100, offset: 0 })).total).toBe(5);
  });
});

describe("workspaces open per user", () => {
  it("refuses opening a new workspace over the limit, never a call on an open one; other users are unaffected", async () => {
    const svc = await service({ maxLiveWorkspacesPerUser: 2 });
    const s1 = (await (await create(svc, "alice", "one")).json()) as { sessionId: string; workspaceId: string };
    expect((await create(svc, "alice", "two")).status).toBe(201);
    // A second session on an open workspace (same agent, PER_AGENT) takes no new room.
    expect((await create(svc, "alice", "one")).status).toBe(201);
    await expectLimited(await create(svc, "alice", "three"), "live_workspaces_per_user");
    expect(((await (await svc.call("alice", "GET", "/sessions")).json()) as { total: number }).total).toBe(3);
    // Calls on the open workspaces go on.
    const w = `/sessions/${s1.sessionId}/workspace`;
    expect((await svc.call("alice", "POST", `${w}/offload/tool-result`, { id: "c1", output: "still served" })).status).toBe(201);
    expect((await svc.call("alice", "GET", `${w}/directories?path=`)).status).toBe(200);
    // Bob opens his own.
    expect((await create(svc, "bob", "three")).status).toBe(201);
    // Once one of alice's is closed (as the idle sweep does), she may open another; reopening the closed one is then refused.
    await svc.manager.close(s1.workspaceId);
    expect((await create(svc, "alice", "three")).status).toBe(201);
    await expectLimited(await svc.call("alice", "GET", `${w}/directories?path=`), "live_workspaces_per_user");
    expect(await metric(svc, 'agentws_limit_refusals_total{limit="live_workspaces_per_user"}')).toBe(2);
  });

  it("lets concurrent opens of new workspaces at the limit through only up to it", async () => {
    const svc = await service({ maxLiveWorkspacesPerUser: 3 });
    const burst = await Promise.all(Array.from({ length: 10 }, (_, i) => create(svc, "alice", `agent${i}`)));
    expect(burst.filter((r) => r.status === 201)).toHaveLength(3);
    expect(burst.filter((r) => r.status === 429)).toHaveLength(7);
    expect(svc.manager.stats().cached).toBe(3);
  });

  it("holds a global limit of open workspaces", async () => {
    const svc = await service({ maxLiveWorkspaces: 2 });
    expect((await create(svc, "alice", "a")).status).toBe(201);
    expect((await create(svc, "bob", "a")).status).toBe(201);
    await expectLimited(await create(svc, "bob", "b"), "live_workspaces");
    expect(await metric(svc, 'agentws_limit_refusals_total{limit="live_workspaces"}')).toBe(1);
  });
});

const pgAdmin = postgresUrl();
describe.skipIf(!pgAdmin)("PostgreSQL session quota", () => {
  it("stores at most the quota when two replicas' pools insert 20 sessions at once", async () => {
    const db = await freshDatabase(pgAdmin!);
    cleanups.push(db.drop);
    const [one, two] = await Promise.all([PostgresSessionStore.open(db.url), PostgresSessionStore.open(db.url)]);
    cleanups.push(
      () => one.close(),
      () => two.close(),
    );
    const record = (i: number): SessionRecord => ({
      sessionId: `s${i}`,
      userId: "u",
      agentId: "a",
      workspaceId: "w",
      name: "n",
      cwd: null,
      createdAt: i,
      updatedAt: i,
    });
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => (i % 2 ? one : two).createSession(record(i), { maxPerUser: 5 })));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(5);
    for (const r of results) if (r.status === "rejected") expect((r.reason as { code?: string }).code).toBe("rate_limited");
    expect((await one.listSessions("u", { limit: 100, offset: 0 })).total).toBe(5);
    // Another user is not held back by u's quota.
    await one.createSession({ ...record(99), userId: "v" }, { maxPerUser: 5 });
  });
});

describe("agentws serve limit flags", () => {
  it("maps flags and environment variables to ServiceLimits, a flag winning, and refuses bad values", () => {
    expect(serviceLimits({ "rate-limit": "5", "max-live-workspaces": "0" }, { AGENTWS_RATE_LIMIT: "9", AGENTWS_MAX_SESSIONS_PER_USER: "50" })).toEqual({
      userRequestsPerSecond: 5,
      maxLiveWorkspaces: 0,
      maxSessionsPerUser: 50,
    });
    expect(() => serviceLimits({ "rate-burst": "-1" }, {})).toThrow(/--rate-burst/);
    expect(() => serviceLimits({}, { AGENTWS_MAX_LIVE_WORKSPACES: "lots" })).toThrow(/--max-live-workspaces/);
    expect(Object.keys(LIMIT_FLAGS)).toHaveLength(7);
  });
});

describe("/metrics names", () => {
  it("types every metric by Prometheus conventions: counters end _total, nothing else does, histograms carry a unit", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "metrics-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const manager = new LocalWorkspaceManager({ basedir: path.join(dir, "ws") });
    const store = new SqliteSessionStore(":memory:");
    const { app, dispose } = createApp({
      workspaceManager: manager,
      sessionStore: store,
      backend: "local",
      processMetrics: true,
      auth: { authenticate: async (t) => (t === "t" ? "alice" : undefined) },
    });
    cleanups.push(async () => {
      dispose();
      await manager[Symbol.asyncDispose]();
      await store.close();
    });
    const h = { authorization: "Bearer t", "content-type": "application/json" };
    const s = (await (await app.request("/sessions", { method: "POST", headers: h, body: JSON.stringify({ agentId: "a" }) })).json()) as { sessionId: string };
    expect((await app.request(`/sessions/${s.sessionId}/workspace/directories?path=`, { headers: h })).status).toBe(200);
    const text = await (await app.request("/metrics")).text();
    const types = [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!] as const);
    expect(types.length).toBeGreaterThan(20);
    for (const [name, type] of types) {
      expect(name, name).toMatch(/^agentws_[a-z][a-z0-9_]*$/);
      expect(name, name).not.toMatch(/process_process/);
      if (type === "counter") expect(name, `${name} is a counter`).toMatch(/_total$/);
      else expect(name, `${name} is a ${type}`).not.toMatch(/_total$/);
      if (type === "histogram") expect(name, name).toMatch(/_(seconds|bytes)$/);
    }
    const typeOf = new Map(types);
    expect(typeOf.get("agentws_workspace_cache_hits_total")).toBe("counter");
    expect(typeOf.get("agentws_limit_refusals_total")).toBe("counter");
    // One lookup provisioned (the create), the directory listing was a hit.
    expect(text).toMatch(/^agentws_workspace_cache_hits_total 1$/m);
    expect(text).toMatch(/^agentws_workspace_cache_misses_total 1$/m);
  });
});
