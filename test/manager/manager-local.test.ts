import { promises as fs } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { metadataRecordPath } from "../../sdk/backends/local/driver.js";
import { IsolationPolicy, WorkspaceManager, type ManagerEvent } from "../../sdk/manager/index.js";
import { LocalWorkspaceManager } from "../../sdk/backends/local/index.js";
import { FolderWorkspace, checksums, sleep } from "../support/manager-fixtures.js";

let root: string;
let basedir: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "mgr-local-"));
  basedir = path.join(root, "workspaces");
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const metadata = async (dir: string) => JSON.parse(await fs.readFile(metadataRecordPath(dir), "utf8")) as Record<string, unknown>;
const tool = (ws: Awaited<ReturnType<LocalWorkspaceManager["getWorkspace"]>>, name: string) => ws.listTools().find((t) => t.name === name)!;

describe("LocalWorkspaceManager", () => {
  it("gives every workspace id its own folder, stamped with its owner, and reattaches after a restart", async () => {
    const events: ManagerEvent[] = [];
    {
      await using m = new LocalWorkspaceManager({ basedir, onEvent: (e) => events.push(e) });
      const a = await m.getWorkspace("u1", "a1", "s1");
      const b = await m.getWorkspace("u2", "a1", "s1"); // same agent id, another user (fault 17)
      expect(a.workspaceId).toBe("4bf1218b645ff727");
      expect(a.workdir).toBe(path.join(basedir, "4bf1218b645ff727"));
      expect(b.workdir).not.toBe(a.workdir);
      expect(a.isAlive).toBe(true);
      expect(await metadata(a.workdir)).toMatchObject({ workspaceId: a.workspaceId, userId: "u1", agentId: "a1", managedBy: "runtime" });
      await tool(a, "Write").execute({ file_path: "notes.txt", content: "mine" });
      expect(await fs.readFile(path.join(b.workdir, "notes.txt")).catch(() => null)).toBeNull();
      m.isolation = IsolationPolicy.PER_SESSION;
      const s1 = await m.getWorkspace("u1", "a1", "s1");
      const s2 = await m.getWorkspace("u1", "a1", "s2");
      expect(new Set([a.workdir, b.workdir, s1.workdir, s2.workdir]).size).toBe(4);
    }
    expect(events.filter((e) => e.type === "create")).toHaveLength(4);

    await using m2 = new LocalWorkspaceManager({ basedir, onEvent: (e) => events.push(e) });
    const again = await m2.getWorkspace("u1", "a1");
    expect(events.at(-1)).toMatchObject({ type: "reattach", workspaceId: "4bf1218b645ff727", managedBy: "runtime" });
    expect(await tool(again, "Read").execute({ file_path: "notes.txt" })).toMatchObject({ ok: true });
    // The owner survives the restart: another user cannot take the id explicitly.
    await expect(m2.getWorkspace("u2", "a9", undefined, "4bf1218b645ff727")).rejects.toMatchObject({ code: "conflict", field: "userId" });
  });

  it("refuses a workspace folder that is a symlink out of basedir", async () => {
    const outside = path.join(root, "outside");
    await fs.mkdir(outside, { recursive: true });
    await fs.mkdir(basedir, { recursive: true });
    await fs.symlink(outside, path.join(basedir, "evil"));
    await using m = new LocalWorkspaceManager({ basedir });
    await expect(m.getWorkspace("u1", "a1", undefined, "evil")).rejects.toMatchObject({ code: "path_escape" });
    expect(await fs.readdir(outside)).toEqual([]);
    await expect(m.getWorkspace("u1", "a1", undefined, "../outside")).rejects.toMatchObject({ code: "invalid_argument", field: "workspaceId" });
  });

  it("rejects unknown options naming them", () => {
    expect(() => new LocalWorkspaceManager({ basedir, workdir: "/x" } as never)).toThrow(/options/);
    expect(() => new LocalWorkspaceManager({ basedir: "" })).toThrow(/options\.basedir/);
  });

  it("closes an idle workspace and reopens it with every file intact", async () => {
    const events: ManagerEvent[] = [];
    await using m = new LocalWorkspaceManager({ basedir, ttl: 0.05, sweepInterval: 0.05, onEvent: (e) => events.push(e) });
    const ws = await m.getWorkspace("u1", "a1");
    await tool(ws, "Write").execute({ file_path: "src/main.py", content: "print('hi')\n" });
    expect(await tool(ws, "Bash").execute({ command: "mkdir -p data && head -c 200000 /dev/urandom > data/blob.bin" })).toMatchObject({ ok: true });
    await ws.offloadContext("s1", [{ role: "user", content: "remember this" }] as never);
    const before = await checksums(ws.workdir);
    expect(Object.keys(before)).toEqual(expect.arrayContaining(["src/main.py", "data/blob.bin"]));

    await sleep(80);
    expect(await m.sweep()).toMatchObject({ evicted: 1 });
    expect(ws.isAlive).toBe(false);
    expect(events.filter((e) => e.type === "evict")).toMatchObject([{ reason: "idle", paused: false }]);

    const back = await m.getWorkspace("u1", "a1");
    expect(back).not.toBe(ws);
    expect(back.isAlive).toBe(true);
    expect(await checksums(back.workdir)).toEqual(before);
    expect(events.at(-1)).toMatchObject({ type: "reattach", workspaceId: ws.workspaceId });
  });

  it("does not evict a workspace while a long tool call runs", async () => {
    await using m = new LocalWorkspaceManager({ basedir, ttl: 0.05 });
    const ws = await m.getWorkspace("u1", "a1");
    const call = tool(ws, "Bash").execute({ command: "sleep 0.6; echo finished > done.txt; echo ok" });
    await sleep(200);
    expect(ws.inFlight).toBe(1);
    expect(await m.sweep()).toMatchObject({ evicted: 0, busy: 1 });
    expect(await call).toMatchObject({ ok: true });
    expect(ws.isAlive).toBe(true);
    expect(await fs.readFile(path.join(ws.workdir, "done.txt"), "utf8")).toBe("finished\n");
  });
});

describe("warm pool", () => {
  it("hands off ready members with a fresh idle clock, refills, counts hits and misses, and removes unclaimed folders on dispose", async () => {
    const events: ManagerEvent[] = [];
    const m = new LocalWorkspaceManager({ basedir, prewarm: { size: 2, maxPerSecond: 50 }, onEvent: (e) => events.push(e) });
    m.start();
    for (let i = 0; i < 200 && m.stats().pool!.ready < 2; i++) await sleep(10);
    expect(m.stats().pool).toMatchObject({ ready: 2, building: 0, hits: 0, misses: 0 });
    const readyIds = events.filter((e) => e.type === "pool-ready").map((e) => e.workspaceId);
    expect(readyIds).toHaveLength(2);

    await sleep(30);
    const claimedAt = Date.now();
    const first = await m.claimWorkspace({ userId: "u1", agentId: "a1" });
    expect(readyIds).toContain(first.workspaceId);
    expect(first.isAlive).toBe(true);
    expect(first.lastActivityAt).toBeGreaterThanOrEqual(claimedAt); // idle clock reset at hand-off
    expect(m.stats().pool!.ready + m.stats().pool!.building).toBe(2); // refill started at once
    expect(await m.getWorkspace("u1", "a1", undefined, first.workspaceId)).toBe(first);
    await expect(m.getWorkspace("u2", "a1", undefined, first.workspaceId)).rejects.toMatchObject({ code: "conflict" });

    // Drain faster than the pool refills: some claims miss and are built cold.
    const more = await Promise.all(Array.from({ length: 5 }, () => m.claimWorkspace({ userId: "u1" })));
    expect(new Set([first, ...more].map((w) => w.workspaceId)).size).toBe(6);
    const { hits, misses } = m.stats().pool!;
    expect(hits + misses).toBe(6);
    expect(misses).toBeGreaterThanOrEqual(3);
    expect(events.filter((e) => e.type === "pool-hit")).toHaveLength(hits);
    expect(events.filter((e) => e.type === "pool-miss")).toHaveLength(misses);

    for (let i = 0; i < 200 && m.stats().pool!.ready < 2; i++) await sleep(10);
    const unclaimed = events
      .filter((e) => e.type === "pool-ready")
      .map((e) => e.workspaceId)
      .filter((id) => !more.some((w) => w.workspaceId === id) && id !== first.workspaceId);
    expect(unclaimed.length).toBeGreaterThanOrEqual(2);
    await m[Symbol.asyncDispose]();
    const left = await fs.readdir(basedir);
    for (const w of [first, ...more]) expect(left).toContain(w.workspaceId);
    for (const id of unclaimed) expect(left).not.toContain(id);
  });

  it("caps the build rate, and failed builds are reported while claims fall back to cold builds", async () => {
    let failPool = true;
    const events: ManagerEvent[] = [];
    await using m = new WorkspaceManager<FolderWorkspace>({
      prewarm: { size: 3, maxCreating: 3, maxPerSecond: 1 },
      onEvent: (e) => events.push(e),
      factory: (identity) =>
        new FolderWorkspace(identity, path.join(root, identity.workspaceId), {
          beforeInitialize: async () => {
            if (failPool && !identity.userId) throw new Error("quota exceeded");
          },
        }),
    });
    m.start();
    // One build per second: the other two wait although maxCreating allows three.
    expect(m.stats().pool).toMatchObject({ building: 1, ready: 0 });
    for (let i = 0; i < 100 && m.stats().pool!.failures < 1; i++) await sleep(10);
    expect(events.filter((e) => e.type === "error")).toMatchObject([{ phase: "pool", code: "provision_failed" }]);
    const ws = await m.claimWorkspace({ userId: "u1", agentId: "a1" });
    expect(ws.alive).toBe(true);
    expect(m.stats().pool).toMatchObject({ hits: 0, misses: 1 });
    failPool = false;
  });
});
