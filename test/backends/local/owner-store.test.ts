import { execFileSync } from "node:child_process";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalDriver, metadataRecordPath } from "../../../sdk/backends/local/driver.js";
import { HostRecordStore, readClaim, readJsonFile, recordClaim } from "../../../sdk/kit/owner-store.js";
import { expectCode } from "../../contract/helpers.js";

let base: string;
beforeAll(async () => {
  base = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-owner-store-"));
});
afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

describe("HostRecordStore", () => {
  it("creates once (0600 in a 0700 folder), replaces atomically, and reads back", async () => {
    const store = new HostRecordStore(path.join(base, "s1", "owners"));
    expect(await store.read("w1")).toBeNull();
    expect(await store.create("w1", { a: 1 })).toBe(true);
    expect(await store.create("w1", { a: 2 })).toBe(false);
    expect(await store.read("w1")).toEqual({ a: 1 });
    await store.replace("w1", { a: 3 });
    expect(await store.read("w1")).toEqual({ a: 3 });
    expect((await fs.stat(store.file("w1"))).mode & 0o777).toBe(0o600);
    expect((await fs.stat(store.dir)).mode & 0o777).toBe(0o700);
    expect(await fs.readdir(store.dir)).toEqual(["w1.json"]);
    await store.remove("w1");
    await store.prune();
    await expect(fs.stat(store.dir)).rejects.toThrow(/ENOENT/);
  });

  it("fails closed on a record it cannot read: symlink, FIFO (without blocking), folder, oversized, bad JSON", async () => {
    const dir = path.join(base, "bad");
    await fs.mkdir(dir, { recursive: true });
    await fs.writeFile(path.join(dir, "target.json"), "{}");
    await fs.symlink(path.join(dir, "target.json"), path.join(dir, "link.json"));
    execFileSync("mkfifo", [path.join(dir, "fifo.json")]);
    await fs.mkdir(path.join(dir, "folder.json"));
    await fs.writeFile(path.join(dir, "big.json"), `"${"x".repeat(70_000)}"`);
    await fs.writeFile(path.join(dir, "broken.json"), "{ nope");
    await expectCode(readJsonFile(path.join(dir, "link.json")), "invalid_argument", /symlink/);
    await expectCode(readJsonFile(path.join(dir, "fifo.json")), "invalid_argument", /not a regular file/);
    await expectCode(readJsonFile(path.join(dir, "folder.json")), "invalid_argument", /not a regular file/);
    await expectCode(readJsonFile(path.join(dir, "big.json")), "invalid_argument", /over 65536 bytes/);
    await expectCode(readJsonFile(path.join(dir, "broken.json")), "invalid_argument", /not valid JSON/);
  });

  it("records a claim once: the same owner again is a no-op, another user a conflict, a forged claim an error", async () => {
    const store = new HostRecordStore(path.join(base, "claims"));
    await recordClaim(store, "w1", "w1", { userId: "alice" });
    await recordClaim(store, "w1", "w1", { userId: "alice" });
    await expectCode(recordClaim(store, "w1", "w1", { userId: "mallory" }), "conflict", /another user/);
    expect(await readClaim(store, "w1", "w1")).toMatchObject({ userId: "alice" });
    const racing = await Promise.allSettled(["u1", "u2", "u3", "u4"].map((userId) => recordClaim(store, "w2", "w2", { userId })));
    expect(racing.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    await store.replace("w3", { version: 1, workspaceId: "other", userId: "x", claimedAt: "now" });
    await expectCode(readClaim(store, "w3", "w3"), "invalid_argument", /records workspace 'other'/);
  });
});

describe("LocalDriver owner records", () => {
  it("keeps a path-spec record beside the folder, whatever its name, and refuses a folder that would hold its own records", async () => {
    const folder = path.join(base, "exact", "my workspace");
    const driver = new LocalDriver({ kind: "local", path: folder });
    await driver.create({ workspaceId: "p1", userId: "alice", managedBy: "runtime" });
    expect(JSON.parse(await fs.readFile(metadataRecordPath(folder), "utf8"))).toMatchObject({ workspaceId: "p1", userId: "alice" });
    expect(await fs.readdir(folder)).toEqual([]);
    expect(() => new LocalDriver({ kind: "local", path: path.join(base, ".agentws") })).toThrow(/backend\.path/);
    expect(() => new LocalDriver({ kind: "local", path: "/" })).toThrow(/backend\.path/);
  });

  it("claims an unowned folder once, durably, and never over a creator's owner", async () => {
    const basedir = path.join(base, "claim");
    const driver = new LocalDriver({ kind: "local", basedir });
    await driver.create({ workspaceId: "pool1", managedBy: "runtime" });
    expect((await driver.find("pool1"))?.userId).toBeUndefined();
    await driver.claimOwner("pool1", { userId: "alice" });
    expect((await new LocalDriver({ kind: "local", basedir }).find("pool1"))?.userId).toBe("alice");
    await expectCode(driver.claimOwner("pool1", { userId: "mallory" }), "conflict");
    await driver.create({ workspaceId: "owned", userId: "bob", managedBy: "runtime" });
    await expectCode(driver.claimOwner("owned", { userId: "alice" }), "conflict");
    await expectCode(driver.claimOwner("never", { userId: "alice" }), "not_found");
    await driver.destroy("pool1", { deleteData: true });
    await driver.destroy("owned", { deleteData: true });
    expect(await fs.readdir(basedir)).toEqual([]);
  });
});
