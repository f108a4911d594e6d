import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileLeases, pauseUnlessLeased } from "../../sdk/kit/lease.js";
import { newReplicaId } from "../../sdk/contract/leases.js";
import type { ManagerEvent } from "../../sdk/manager/events.js";
import { WorkspaceManager, type ManagedIdentity, type ManagedWorkspace } from "../../sdk/manager/manager.js";
import { expectCode } from "../contract/helpers.js";

/** One backend object's state, shared by the replicas of a test (what a container is to two processes). */
class SharedObject {
  state: "running" | "paused" = "running";
  pauses = 0;
  /** Runs inside pause(), between the guard's two lease checks. */
  duringPause: (() => Promise<void>) | undefined;
  /** Runs inside initialize(), after the object was resumed and before the first operation on it. */
  duringInitialize: (() => Promise<void>) | undefined;
}

/** A workspace over a SharedObject with real lease files: the manager's part, without a backend process. */
class SharedWorkspace implements ManagedWorkspace {
  inFlight = 0;
  lastActivityAt = Date.now();
  constructor(
    readonly workspaceId: string,
    readonly leases: FileLeases,
    readonly object: SharedObject,
  ) {}
  touch(): void {
    this.lastActivityAt = Date.now();
  }
  async initialize(): Promise<void> {
    this.object.state = "running";
    await this.object.duringInitialize?.();
    if (this.object.state !== "running") throw new Error("paused under initialize");
  }
  async close(): Promise<void> {}
  async releaseBackend(guard: { replicaId: string }): Promise<"released" | "kept"> {
    const driver = {
      leases: this.leases,
      pause: async () => {
        this.object.state = "paused";
        this.object.pauses++;
        await this.object.duringPause?.();
      },
      resume: async () => {
        this.object.state = "running";
      },
    };
    return (await pauseUnlessLeased(driver, this.workspaceId, guard)) === "paused" ? "released" : "kept";
  }
}

describe("replica leases", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-leases-test-"));
  });
  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("a lease counts for other replicas until it expires or is released, never for its own replica", async () => {
    const leases = new FileLeases(path.join(dir, "basic"));
    const [a, b] = [newReplicaId(), newReplicaId()];
    expect(await leases.othersActive("w1", a)).toBe(false);
    await leases.renew("w1", b, 60_000);
    expect(await leases.othersActive("w1", a)).toBe(true);
    expect(await leases.othersActive("w1", b)).toBe(false);
    expect(await leases.othersActive("w2", a)).toBe(false);
    await leases.release("w1", b);
    expect(await leases.othersActive("w1", a)).toBe(false);
    // Expired: a dead replica's lease stops counting by itself.
    await leases.renew("w1", b, 30);
    await new Promise((r) => setTimeout(r, 80));
    expect(await leases.othersActive("w1", a)).toBe(false);
    // Names that are not replica ids, and folders, are not leases.
    await fs.writeFile(path.join(leases.root, "w1", "not-a-replica"), "");
    await fs.mkdir(path.join(leases.root, "w1", "0".repeat(32)));
    expect(await leases.othersActive("w1", a)).toBe(false);
  });

  it("refuses bad workspace ids, replica ids and ttls, naming the field", async () => {
    const leases = new FileLeases(path.join(dir, "bad"));
    await expectCode(leases.renew("../x", newReplicaId(), 1000), "invalid_argument");
    await expectCode(leases.renew("w", "../../etc", 1000), "invalid_argument");
    await expectCode(leases.renew("w", newReplicaId(), Number.NaN), "invalid_argument");
    expect(() => new WorkspaceManager({ replicaId: "not hex", factory: () => null as never })).toThrow(/replicaId/);
  });

  it("refuses a shared lease folder someone else planted: a symlink, or a folder open to others", async () => {
    const target = path.join(dir, "planted-target");
    await fs.mkdir(target, { mode: 0o700 });
    const link = path.join(dir, "planted-link");
    await fs.symlink(target, link);
    const viaLink = new FileLeases(path.join(link, "engine"), { ownedFolder: link });
    await expectCode(viaLink.renew("w", newReplicaId(), 1000), "conflict", /not a private folder/);
    await expectCode(viaLink.othersActive("w", newReplicaId()), "conflict");
    expect(await fs.readdir(target)).toEqual([]);
    const open = path.join(dir, "planted-open");
    await fs.mkdir(open);
    await fs.chmod(open, 0o777);
    await expectCode(new FileLeases(path.join(open, "engine"), { ownedFolder: open }).renew("w", newReplicaId(), 1000), "conflict");
    // Our own private folder is fine.
    const mine = path.join(dir, "mine");
    await new FileLeases(path.join(mine, "engine"), { ownedFolder: mine }).renew("w", newReplicaId(), 1000);
    expect((await fs.stat(mine)).mode & 0o777).toBe(0o700);
  });

  it("a pause that races a replica taking a lease ends with the object running", async () => {
    const leases = new FileLeases(path.join(dir, "race"));
    const object = new SharedObject();
    const [idle, busy] = [newReplicaId(), newReplicaId()];
    object.duringPause = () => leases.renew("w", busy, 60_000);
    const ws = new SharedWorkspace("w", leases, object);
    expect(await ws.releaseBackend({ replicaId: idle })).toBe("kept");
    expect(object).toMatchObject({ state: "running", pauses: 1 });
    object.duringPause = undefined;
    // Checked before pausing: no pause at all while the lease is there.
    expect(await ws.releaseBackend({ replicaId: idle })).toBe("kept");
    expect(object.pauses).toBe(1);
  });

  it("an idle replica hands the object over to the active one, and whoever goes idle last pauses it", async () => {
    const leases = new FileLeases(path.join(dir, "managers"));
    const object = new SharedObject();
    const events: Record<"a" | "b", ManagerEvent[]> = { a: [], b: [] };
    const make = (name: "a" | "b") =>
      new WorkspaceManager<SharedWorkspace>({
        ttl: 0.2,
        sweepInterval: 3600,
        leaseRenewInterval: 0.05,
        profile: { eviction: "pause" },
        factory: (i: ManagedIdentity) => new SharedWorkspace(i.workspaceId, leases, object),
        onEvent: (e) => events[name].push(e),
      });
    await using a = make("a");
    await using b = make("b");
    await a.getWorkspace("u", "x", undefined, "w");
    await b.getWorkspace("u", "x", undefined, "w");
    // A idles past its TTL while B keeps working.
    const until = Date.now() + 400;
    while (Date.now() < until) {
      await b.getWorkspace("u", "x", undefined, "w");
      await new Promise((r) => setTimeout(r, 20));
    }
    expect((await a.sweep()).evicted).toBe(1);
    expect(object).toMatchObject({ state: "running", pauses: 0 });
    expect(events.a.find((e) => e.type === "evict")).toMatchObject({ paused: false, keptForReplica: true });
    expect(a.cachedIds()).toEqual([]);
    // B goes idle and its sweep pauses: A released its lease when it evicted.
    await new Promise((r) => setTimeout(r, 300));
    expect((await b.sweep()).evicted).toBe(1);
    expect(object).toMatchObject({ state: "paused", pauses: 1 });
    expect(events.b.filter((e) => e.type === "pause")).toHaveLength(1);
  });

  it("a replica holds its lease while it provisions: another replica's sweep never pauses the object under its initialize", async () => {
    const leases = new FileLeases(path.join(dir, "provisioning"));
    const object = new SharedObject();
    const evictions: ManagerEvent[] = [];
    const make = (onEvent?: (e: ManagerEvent) => void) =>
      new WorkspaceManager<SharedWorkspace>({
        ttl: 0.05,
        sweepInterval: 3600,
        profile: { eviction: "pause" },
        factory: (i: ManagedIdentity) => new SharedWorkspace(i.workspaceId, leases, object),
        ...(onEvent ? { onEvent } : {}),
      });
    await using a = make((e) => e.type === "evict" && evictions.push(e));
    await using b = make();
    await a.getWorkspace("u", "x", undefined, "w");
    await new Promise((r) => setTimeout(r, 100));
    // A goes idle right while B initializes (after B's resume, before B's first operation).
    object.duringInitialize = async () => {
      object.duringInitialize = undefined;
      expect((await a.sweep()).evicted).toBe(1);
    };
    await b.getWorkspace("u", "x", undefined, "w");
    expect(object).toMatchObject({ state: "running", pauses: 0 });
    expect(evictions).toMatchObject([{ paused: false, keptForReplica: true }]);
    // A failed provisioning gives its lease back at once: the object can be paused again.
    await b.closeAll();
    await using c = make();
    object.duringInitialize = async () => {
      object.duringInitialize = undefined;
      throw new Error("the backend refused");
    };
    await expect(c.getWorkspace("u", "x", undefined, "w")).rejects.toThrow(/refused/);
    expect(await leases.othersActive("w", a.replicaId)).toBe(false);
  });

  it("a handed-over object is paused by a later sweep once the other replica's lease lapses", async () => {
    const leases = new FileLeases(path.join(dir, "handover"));
    const object = new SharedObject();
    const pauses: ManagerEvent[] = [];
    await using a = new WorkspaceManager<SharedWorkspace>({
      ttl: 0.1,
      sweepInterval: 3600,
      profile: { eviction: "pause" },
      factory: (i: ManagedIdentity) => new SharedWorkspace(i.workspaceId, leases, object),
      onEvent: (e) => e.type === "pause" && pauses.push(e),
    });
    await a.getWorkspace("u", "x", undefined, "w");
    // Another replica's lease, which it will never renew nor release (it was killed).
    await leases.renew("w", newReplicaId(), 400);
    await new Promise((r) => setTimeout(r, 150));
    await a.sweep();
    expect(object.state).toBe("running");
    await a.sweep();
    expect(object.state).toBe("running");
    await new Promise((r) => setTimeout(r, 400));
    await a.sweep();
    expect(object).toMatchObject({ state: "paused", pauses: 1 });
    expect(pauses).toHaveLength(1);
  });
});
