import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { WorkspaceError, UnavailableError } from "../../sdk/errors.js";
import { WorkspaceManager, type ManagedIdentity, type ManagerEvent } from "../../sdk/manager/index.js";
import { FolderWorkspace, checksums, deferred, sleep } from "../support/manager-fixtures.js";

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "mgr-cache-"));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A manager over FolderWorkspace that records every workspace it built. */
function folderManager(
  options: {
    ttl?: number;
    sweepInterval?: number;
    eviction?: "pause" | "close";
    sweep?: "background" | "lazy";
    hooks?: FolderWorkspace["hooks"];
    failInit?: (identity: ManagedIdentity) => Error | undefined;
  } = {},
) {
  const built: FolderWorkspace[] = [];
  const events: ManagerEvent[] = [];
  const manager = new WorkspaceManager<FolderWorkspace>({
    ttl: options.ttl ?? 3600,
    sweepInterval: options.sweepInterval ?? 3600,
    profile: { eviction: options.eviction ?? "pause", sweep: options.sweep ?? "background" },
    onEvent: (e) => events.push(e),
    factory: (identity) => {
      const ws = new FolderWorkspace(identity, path.join(root, identity.workspaceId), {
        ...options.hooks,
        beforeInitialize: async () => {
          await options.hooks?.beforeInitialize?.();
          const err = options.failInit?.(identity);
          if (err) throw err;
        },
      });
      built.push(ws);
      return ws;
    },
  });
  return { manager, built, events };
}

describe("single flight", () => {
  it("1000 concurrent calls for one cold id provision exactly once and share the workspace", async () => {
    const gate = deferred();
    const { manager, built } = folderManager({ hooks: { beforeInitialize: () => gate.promise } });
    await using _m = manager;
    const calls = Array.from({ length: 1000 }, () => manager.getWorkspace("u1", "a1", "s1"));
    expect(manager.stats().provisioning).toBe(1);
    gate.resolve();
    const got = await Promise.all(calls);
    expect(built).toHaveLength(1);
    expect(built[0]!.initializeCalls).toBe(1);
    expect(new Set(got).size).toBe(1);
    expect(got[0]).toBe(built[0]);
    expect(manager.stats()).toMatchObject({ cached: 1, provisioning: 0 });
  });

  it("200 distinct cold ids provision concurrently, not one after another", async () => {
    // Every initialize waits until all 200 have started: serialised provisioning would never get there.
    let started = 0;
    const all = deferred();
    const { manager, built } = folderManager({
      hooks: {
        beforeInitialize: async () => {
          if (++started === 200) all.resolve();
          await Promise.race([all.promise, sleep(20_000).then(() => Promise.reject(new Error(`only ${started} of 200 provisionings ran at once`)))]);
        },
      },
    });
    await using _m = manager;
    const got = await Promise.all(Array.from({ length: 200 }, (_, i) => manager.getWorkspace(`u${i}`, "a1")));
    expect(started).toBe(200);
    expect(new Set(got.map((w) => w.workspaceId)).size).toBe(200);
    expect(built).toHaveLength(200);
    expect(manager.stats().cached).toBe(200);
  });

  it("a provisioning failure reaches every waiter, is not cached, closes the half-built workspace, and the next call retries", async () => {
    const gate = deferred();
    let fail = true;
    const { manager, built, events } = folderManager({
      hooks: { beforeInitialize: () => gate.promise },
      failInit: () => (fail ? new Error("backend said no") : undefined),
    });
    await using _m = manager;
    const calls = Array.from({ length: 50 }, () => manager.getWorkspace("u1", "a1"));
    gate.resolve();
    const results = await Promise.allSettled(calls);
    const reasons = results.map((r) => (r.status === "rejected" ? r.reason : undefined));
    expect(reasons.every((r) => r instanceof WorkspaceError && r.code === "provision_failed" && /backend said no/.test(r.message))).toBe(true);
    expect(new Set(reasons).size).toBe(1);
    expect(built).toHaveLength(1);
    expect(built[0]!.closed).toBe(true); // fault 33: never leak a half-built workspace
    expect(manager.stats()).toMatchObject({ cached: 0, provisioning: 0 });
    expect(events.filter((e) => e.type === "error")).toMatchObject([{ phase: "provision", code: "provision_failed", workspaceId: "4bf1218b645ff727" }]);

    fail = false;
    const ws = await manager.getWorkspace("u1", "a1");
    expect(built).toHaveLength(2);
    expect(ws).toBe(built[1]);
    expect(ws.alive).toBe(true);
  });

  it("a cache hit returns the same object and counts as activity", async () => {
    const { manager, built } = folderManager();
    await using _m = manager;
    const a = await manager.getWorkspace("u1", "a1");
    const before = a.lastActivityAt;
    await sleep(5);
    expect(await manager.getWorkspace("u1", "a1")).toBe(a);
    expect(a.lastActivityAt).toBeGreaterThan(before);
    expect(built).toHaveLength(1);
  });

  it("never hands one id to two users", async () => {
    const { manager } = folderManager();
    await using _m = manager;
    await manager.getWorkspace("alice", "a1", undefined, "shared");
    await expect(manager.getWorkspace("bob", "a1", undefined, "shared")).rejects.toMatchObject({ code: "conflict", field: "userId" });
    // Concurrent first calls from two users for one id: one of them is refused.
    const results = await Promise.allSettled([manager.getWorkspace("carol", "a", undefined, "x1"), manager.getWorkspace("dave", "a", undefined, "x1")]);
    expect(results.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
  });

  it("refuses another user even when an idle sweep is due at that moment", async () => {
    const { manager, built } = folderManager({ ttl: 0.02, sweepInterval: 0.02, sweep: "lazy" });
    await using _m = manager;
    await manager.getWorkspace("alice", "a1", undefined, "x1");
    await sleep(50);
    await expect(manager.getWorkspace("bob", "a1", undefined, "x1")).rejects.toMatchObject({ code: "conflict" });
    expect(built).toHaveLength(1);
  });
});

describe("idle eviction", () => {
  it("pauses an idle workspace and resumes it on the next call with every file intact", async () => {
    const { manager, built, events } = folderManager({ ttl: 0.05 });
    await using _m = manager;
    const ws = await manager.getWorkspace("u1", "a1");
    await ws.writeFile("data/a.bin", Buffer.alloc(100_000, 7));
    await ws.writeFile("notes/b.txt", "hello");
    await ws.writeFile("sessions/s1/context.jsonl", '{"role":"user"}\n');
    const dir = path.join(root, ws.workspaceId);
    const before = await checksums(dir);

    await sleep(80);
    expect(await manager.sweep()).toEqual({ scanned: 1, evicted: 1, busy: 0 });
    expect(ws.closed).toBe(true);
    expect(manager.stats().cached).toBe(0);
    expect(events.filter((e) => e.type === "pause" || e.type === "evict")).toMatchObject([
      { type: "pause", workspaceId: ws.workspaceId },
      { type: "evict", workspaceId: ws.workspaceId, reason: "idle", paused: true },
    ]);

    const again = await manager.getWorkspace("u1", "a1");
    expect(again).not.toBe(ws);
    expect(again.alive).toBe(true);
    expect(built).toHaveLength(2);
    expect(await checksums(dir)).toEqual(before);
    expect(events.map((e) => e.type)).toEqual(["create", "pause", "evict", "resume"]);
    expect(events.every((e) => typeof e.durationMs === "number" && e.durationMs >= 0)).toBe(true);
    expect(Object.keys(before).sort()).toEqual(["data/a.bin", "notes/b.txt", "sessions/s1/context.jsonl"]);
  });

  it("never evicts a workspace in the middle of a long operation", async () => {
    const { manager } = folderManager({ ttl: 0.2 });
    await using _m = manager;
    const ws = await manager.getWorkspace("u1", "a1");
    const release = deferred();
    const op = ws.track(() => release.promise);
    await sleep(300);
    expect(await manager.sweep()).toEqual({ scanned: 1, evicted: 0, busy: 1 });
    expect(ws.alive).toBe(true);
    expect(manager.peek(ws.workspaceId)).toBe(ws);
    release.resolve();
    await op;
    // Finishing the operation is activity: the TTL counts from its end.
    expect((await manager.sweep()).evicted).toBe(0);
    await sleep(300);
    expect((await manager.sweep()).evicted).toBe(1);
  });

  it("an eviction racing a new request ends with one live workspace", async () => {
    const pausing = deferred();
    let holdClose = true;
    const { manager, built } = folderManager({
      ttl: 0.02,
      hooks: { beforeClose: () => (holdClose ? pausing.promise : Promise.resolve()) },
    });
    await using _m = manager;
    const first = await manager.getWorkspace("u1", "a1");
    await sleep(40);
    const sweep = manager.sweep();
    // The sweep has dropped it and is still pausing: a request comes in now.
    const requests = Array.from({ length: 20 }, () => manager.getWorkspace("u1", "a1"));
    await sleep(20);
    expect(built).toHaveLength(1); // nobody resumes before the pause finishes
    holdClose = false;
    pausing.resolve();
    const [result, got] = await Promise.all([sweep, Promise.all(requests)]);
    expect(result.evicted).toBe(1);
    expect(new Set(got).size).toBe(1);
    expect(built).toHaveLength(2);
    expect(built.filter((w) => w.alive)).toEqual([got[0]]);
    expect(first.closed).toBe(true);
    expect(manager.stats()).toMatchObject({ cached: 1, closing: 0, provisioning: 0 });
  });

  it("the background sweeper evicts on its own, and lazy managers sweep on requests", async () => {
    const bg = folderManager({ ttl: 0.02, sweepInterval: 0.02 });
    await using _bg = bg.manager;
    await bg.manager.getWorkspace("u1", "a1");
    for (let i = 0; i < 100 && bg.manager.stats().cached > 0; i++) await sleep(10);
    expect(bg.manager.stats().cached).toBe(0);

    const lazy = folderManager({ ttl: 0.02, sweepInterval: 0.02, sweep: "lazy", eviction: "close" });
    await using _lazy = lazy.manager;
    const idle = await lazy.manager.getWorkspace("u1", "a1");
    await sleep(60);
    expect(lazy.manager.peek(idle.workspaceId)).toBe(idle); // nothing runs in the background
    await lazy.manager.getWorkspace("u2", "a1");
    for (let i = 0; i < 50 && lazy.manager.peek(idle.workspaceId); i++) await sleep(5);
    expect(lazy.manager.peek(idle.workspaceId)).toBeUndefined();
    expect(idle.closed).toBe(true);
    expect(lazy.events.filter((e) => e.type === "evict")).toMatchObject([{ workspaceId: idle.workspaceId, paused: false }]);
    expect(lazy.events.some((e) => e.type === "pause")).toBe(false);
  });
});

describe("close and dispose", () => {
  it("close(id) drops one, unknown ids are a no-op, closeAll closes all in parallel, dispose refuses new calls", async () => {
    const { manager, built, events } = folderManager();
    const a = await manager.getWorkspace("u1", "a1");
    const b = await manager.getWorkspace("u2", "a1");
    const c = await manager.getWorkspace("u3", "a1");
    await manager.close(a.workspaceId);
    await manager.close("never-seen");
    expect(a.closed).toBe(true);
    expect(manager.cachedIds().sort()).toEqual([b.workspaceId, c.workspaceId].sort());

    // Closes run in parallel: each waits until both have started.
    let closing = 0;
    const both = deferred();
    for (const ws of [b, c])
      ws.hooks.beforeClose = async () => {
        if (++closing === 2) both.resolve();
        await both.promise;
      };
    await manager.closeAll();
    expect([b.closed, c.closed]).toEqual([true, true]);
    expect(manager.stats().cached).toBe(0);
    // closeAll keeps the manager usable.
    const d = await manager.getWorkspace("u1", "a1");
    expect(d.alive).toBe(true);

    await manager[Symbol.asyncDispose]();
    expect(d.closed).toBe(true);
    await expect(manager.getWorkspace("u1", "a1")).rejects.toMatchObject({ code: "closed" });
    expect(built).toHaveLength(4);
    expect(events.filter((e) => e.type === "evict").map((e) => e.type === "evict" && e.reason)).toEqual(["close", "close", "close", "dispose"]);
  });

  it("dispose waits for a provisioning in flight and closes it too", async () => {
    const gate = deferred();
    const { manager, built } = folderManager({ hooks: { beforeInitialize: () => gate.promise } });
    const pending = manager.getWorkspace("u1", "a1");
    const disposing = manager[Symbol.asyncDispose]();
    gate.resolve();
    await disposing;
    const ws = await pending;
    expect(ws).toBe(built[0]);
    expect(ws.closed).toBe(true);
    expect(manager.stats()).toMatchObject({ cached: 0, provisioning: 0, closing: 0 });
  });

  it("a failing close is reported and does not stop the others", async () => {
    const { manager, events } = folderManager({ eviction: "close" });
    const a = await manager.getWorkspace("u1", "a1");
    const b = await manager.getWorkspace("u2", "a1");
    a.hooks.beforeClose = () => Promise.reject(new UnavailableError("engine went away"));
    await manager[Symbol.asyncDispose]();
    expect(b.closed).toBe(true);
    expect(events.filter((e) => e.type === "error")).toMatchObject([{ workspaceId: a.workspaceId, phase: "close", code: "unavailable" }]);
  });

  it("a throwing event listener never breaks the manager", async () => {
    const { manager } = folderManager();
    await using _m = manager;
    manager.onEvent(() => {
      throw new Error("listener bug");
    });
    expect((await manager.getWorkspace("u1", "a1")).alive).toBe(true);
  });
});
