import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBackend } from "../../../sdk/contract/driver.js";
import { loadDriver } from "../../../sdk/backends/load.js";
import { LocalDriver, METADATA_FILE, RECORDS_DIR, metadataRecordPath } from "../../../sdk/backends/local/driver.js";
import { LocalSandbox } from "../../../sdk/kit/host-sandbox.js";
import { expectCode } from "../../contract/helpers.js";

let base: string;
beforeAll(async () => {
  base = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-driver-"));
});
afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

const identity = (workspaceId: string, extra: Record<string, unknown> = {}) => ({
  workspaceId,
  userId: "u1",
  agentId: "a1",
  managedBy: "runtime" as const,
  tags: { team: "x" },
  ...extra,
});
const readMeta = async (folder: string) => JSON.parse(await fs.readFile(metadataRecordPath(folder), "utf8")) as Record<string, unknown>;

describe("LocalDriver", () => {
  it("creates <basedir>/<id> with its record in <basedir>/.agentws/owners, finds it, and adopts it on a second create", async () => {
    const basedir = path.join(base, "b1");
    const driver = new LocalDriver({ kind: "local", basedir });
    expect(await driver.find("ws1")).toBeNull();
    const created = await driver.create(identity("ws1"));
    const folder = path.join(basedir, "ws1");
    expect(created).toEqual({
      workspaceId: "ws1",
      kind: "local",
      state: "running",
      userId: "u1",
      agentId: "a1",
      managedBy: "runtime",
      tags: { team: "x" },
      location: { hostPath: folder },
    });
    const meta = await readMeta(folder);
    expect(meta).toMatchObject({ version: 1, workspaceId: "ws1", userId: "u1", agentId: "a1", managedBy: "runtime", tags: { team: "x" } });
    expect(await driver.find("ws1")).toEqual(created);
    expect(await driver.create(identity("ws1", { managedBy: "pulumi", tags: {} }))).toEqual(created);
    expect((await readMeta(folder)).createdAt).toBe(meta.createdAt);
  });

  it("ends concurrent creates of one id with one folder and one metadata file", async () => {
    const driver = new LocalDriver({ kind: "local", basedir: path.join(base, "race") });
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => driver.create(identity("same", { tags: { n: String(i) } }))));
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    expect((await fs.readdir(path.join(base, "race"))).sort()).toEqual([RECORDS_DIR, "same"]);
    // Nothing of ours inside the folder: the agent's tools cannot reach the record.
    expect(await fs.readdir(path.join(base, "race", "same"))).toEqual([]);
    expect(await fs.readdir(path.join(base, "race", RECORDS_DIR, "owners"))).toEqual(["same.json"]);
  });

  it("refuses ids that could leave basedir, naming the field", async () => {
    const driver = new LocalDriver({ kind: "local", basedir: path.join(base, "ids") });
    for (const id of ["../x", "a/b", "", ".hidden", "..", "x".repeat(64), "a\\b"]) {
      await expectCode(driver.create(identity(id)), "invalid_argument", /workspaceId/);
      await expectCode(driver.find(id), "invalid_argument", /workspaceId/);
      await expectCode(driver.destroy(id, { deleteData: true }), "invalid_argument", /workspaceId/);
    }
    expect(await fs.readdir(base)).not.toContain("x");
  });

  it("refuses a per-id folder that is a symlink leading elsewhere", async () => {
    const basedir = path.join(base, "links");
    const outside = path.join(base, "outside-target");
    await fs.mkdir(basedir, { recursive: true });
    await fs.mkdir(outside, { recursive: true });
    await fs.symlink(outside, path.join(basedir, "evil"));
    const driver = new LocalDriver({ kind: "local", basedir });
    await expectCode(driver.create(identity("evil")), "path_escape", /symlink/);
    await expectCode(driver.find("evil"), "path_escape");
    expect(await fs.readdir(outside)).toEqual([]);
  });

  it("with `path`, holds exactly one workspace and refuses another id there", async () => {
    const folder = path.join(base, "exact");
    const driver = new LocalDriver({ kind: "local", path: folder });
    await driver.create(identity("one"));
    expect(driver.folderFor("one")).toBe(folder);
    await expectCode(driver.create(identity("two")), "conflict", /already belongs to workspace 'one'/);
    expect(await driver.find("two")).toBeNull();
    expect((await driver.find("one"))?.location.hostPath).toBe(folder);
  });

  it("destroy removes only the metadata by default (files stay and are adopted again), and everything with deleteData", async () => {
    const basedir = path.join(base, "destroy");
    const driver = new LocalDriver({ kind: "local", basedir });
    await driver.create(identity("d1"));
    const folder = path.join(basedir, "d1");
    await fs.writeFile(path.join(folder, "work.txt"), "keep me");
    await driver.destroy("d1");
    expect(await driver.find("d1")).toBeNull();
    expect(await fs.readFile(path.join(folder, "work.txt"), "utf8")).toBe("keep me");
    await driver.create(identity("d1"));
    expect(await fs.readFile(path.join(folder, "work.txt"), "utf8")).toBe("keep me");
    await driver.destroy("d1", { deleteData: true });
    await expect(fs.stat(folder)).rejects.toThrow();
    await driver.destroy("d1", { deleteData: true });
    await driver.destroy("never-made");
  });

  it("never deletes a folder that has no metadata of ours", async () => {
    const basedir = path.join(base, "foreign");
    await fs.mkdir(path.join(basedir, "f1"), { recursive: true });
    await fs.writeFile(path.join(basedir, "f1", "precious.txt"), "x");
    await new LocalDriver({ kind: "local", basedir }).destroy("f1", { deleteData: true });
    expect(await fs.readFile(path.join(basedir, "f1", "precious.txt"), "utf8")).toBe("x");
  });

  it("re-stamps tags, connects a LocalSandbox on the folder, and reports unknown ids as not_found", async () => {
    const basedir = path.join(base, "tags");
    const driver = new LocalDriver({ kind: "local", basedir });
    await driver.create(identity("t1"));
    await driver.updateTags("t1", { env: "prod" });
    expect((await driver.find("t1"))?.tags).toEqual({ env: "prod" });
    await expectCode(driver.updateTags("nope", {}), "not_found");
    const sandbox = await driver.connect("t1");
    expect(sandbox).toBeInstanceOf(LocalSandbox);
    expect(sandbox.workdir).toBe(path.join(basedir, "t1"));
    await sandbox.writeFile("hello.txt", "hi");
    expect(await fs.readFile(path.join(basedir, "t1", "hello.txt"), "utf8")).toBe("hi");
    await expectCode(driver.connect("nope"), "not_found", /create it first/);
    await driver.pause("t1");
    await driver.resume("t1");
    expect((await driver.find("t1"))?.state).toBe("running");
  });

  it("migrates an in-tree .agentws.json of an earlier version once, then never reads the tree again", async () => {
    const basedir = path.join(base, "legacy");
    await fs.mkdir(path.join(basedir, "l1"), { recursive: true });
    const legacy = { version: 1, workspaceId: "l1", userId: "u1", managedBy: "runtime", tags: {}, createdAt: "2026-01-01T00:00:00.000Z" };
    await fs.writeFile(path.join(basedir, "l1", METADATA_FILE), JSON.stringify(legacy));
    const driver = new LocalDriver({ kind: "local", basedir });
    expect(await driver.find("l1")).toMatchObject({ userId: "u1" });
    expect(await readMeta(path.join(basedir, "l1"))).toMatchObject(legacy);
    await expect(fs.stat(path.join(basedir, "l1", METADATA_FILE))).rejects.toThrow(/ENOENT/);
    await fs.writeFile(path.join(basedir, "l1", METADATA_FILE), JSON.stringify({ ...legacy, userId: "mallory" }));
    expect(await driver.find("l1")).toMatchObject({ userId: "u1" });
  });

  it("reports corrupt metadata clearly instead of guessing", async () => {
    const basedir = path.join(base, "corrupt");
    await fs.mkdir(path.join(basedir, "c1"), { recursive: true });
    await fs.writeFile(path.join(basedir, "c1", METADATA_FILE), "{ nope");
    const driver = new LocalDriver({ kind: "local", basedir });
    await expectCode(driver.find("c1"), "invalid_argument", /not valid JSON; fix or delete it/);
    await fs.writeFile(path.join(basedir, "c1", METADATA_FILE), JSON.stringify({ version: 1, workspaceId: "c1" }));
    await expectCode(driver.find("c1"), "invalid_argument", /managedBy/);
  });

  it("is what loadDriver gives for kind local, and runs the ensure state machine", async () => {
    const driver = await loadDriver({ kind: "local", basedir: path.join(base, "ensure") });
    expect(driver.kind).toBe("local");
    expect((await ensureBackend(driver, identity("e1"))).outcome).toBe("created");
    expect((await ensureBackend(driver, identity("e1"))).outcome).toBe("reattached");
    await driver.destroy("e1");
    expect((await ensureBackend(driver, identity("e1"), { expectExisting: true })).outcome).toBe("recreated");
  });

  it("validates its spec", () => {
    expect(() => new LocalDriver({ kind: "local", basedir: "" })).toThrow(/backend\.basedir/);
    expect(() => new LocalDriver({ kind: "local", bogus: 1 } as never)).toThrow(/backend/);
  });
});
