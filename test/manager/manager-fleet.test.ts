import { promises as fs } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { LocalDriver, RECORDS_DIR, metadataRecordPath } from "../../sdk/backends/local/driver.js";
import type { FleetEntry } from "../../sdk/contract/fleet.js";
import { assignWorkspaceId, parseFleetOutputs, type ManagerEvent } from "../../sdk/manager/index.js";
import { LocalWorkspaceManager } from "../../sdk/backends/local/index.js";
import { sleep } from "../support/manager-fixtures.js";

let root: string;
let basedir: string;
let stackDir: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "mgr-fleet-"));
  basedir = path.join(root, "runtime");
  stackDir = path.join(root, "declared");
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Provisions a workspace the way the Pulumi provider does (LocalDriver, managed by pulumi) and returns its fleet entry. */
async function declare(userId: string, agentId: string, extra: Partial<FleetEntry> = {}): Promise<FleetEntry> {
  const workspaceId = extra.workspaceId ?? assignWorkspaceId({ userId, agentId });
  const driver = new LocalDriver({ kind: "local", basedir: stackDir });
  const description = await driver.create({ workspaceId, userId, agentId, managedBy: "pulumi" });
  await fs.writeFile(path.join(driver.folderFor(workspaceId), "seeded.txt"), `for ${userId}`);
  return { workspaceId, userId, agentId, backend: { kind: "local", basedir: stackDir }, managedBy: "pulumi", location: description.location, ...extra };
}

const meta = async (dir: string) => JSON.parse(await fs.readFile(metadataRecordPath(dir), "utf8")) as Record<string, unknown>;

describe("fleet from stack outputs", () => {
  it("reattaches declared ids (once, however many callers) and creates the rest as runtime-managed", async () => {
    const alice = await declare("alice", "coder");
    const createdAt = (await meta(alice.location.hostPath!)).createdAt;
    const events: ManagerEvent[] = [];
    await using m = LocalWorkspaceManager.fromOutputs({ [alice.workspaceId]: alice }, { basedir, onEvent: (e: ManagerEvent) => events.push(e) });
    expect(m.stats().declared).toBe(1);

    const got = await Promise.all(Array.from({ length: 50 }, () => m.getWorkspace("alice", "coder", "s1")));
    expect(new Set(got).size).toBe(1);
    const ws = got[0]!;
    expect(ws.workspaceId).toBe(alice.workspaceId);
    expect(ws.workdir).toBe(alice.location.hostPath);
    expect(await fs.readFile(path.join(ws.workdir, "seeded.txt"), "utf8")).toBe("for alice");
    expect(events.filter((e) => e.type !== "error")).toMatchObject([
      { type: "reattach", workspaceId: alice.workspaceId, managedBy: "pulumi", userId: "alice" },
    ]);
    // Reattached, not re-created: the stack's metadata is untouched.
    expect(await meta(ws.workdir)).toMatchObject({ managedBy: "pulumi", createdAt });

    const bob = await m.getWorkspace("bob", "coder");
    expect(bob.workdir).toBe(path.join(basedir, bob.workspaceId));
    expect(await meta(bob.workdir)).toMatchObject({ managedBy: "runtime", userId: "bob" });
    expect(events.at(-1)).toMatchObject({ type: "create", managedBy: "runtime" });
    expect((await fs.readdir(basedir)).filter((name) => name !== RECORDS_DIR)).toEqual([bob.workspaceId]);

    // A declared owner is enforced for explicit ids.
    await expect(m.getWorkspace("mallory", "coder", undefined, alice.workspaceId)).rejects.toMatchObject({ code: "conflict", field: "userId" });
  });

  it("accepts the raw map, plain stack outputs and Automation API outputs alike", async () => {
    const a = await declare("u1", "a1");
    const map = { [a.workspaceId]: a };
    const raw = parseFleetOutputs(map);
    expect(parseFleetOutputs({ workspaces: map, other: 1 })).toEqual(raw);
    expect(parseFleetOutputs({ workspaces: { value: map, secret: false }, other: { value: "x", secret: false } })).toEqual(raw);
    expect(raw[a.workspaceId]).toMatchObject({ managedBy: "pulumi", userId: "u1" });
    // A workspace that happens to be named "workspaces" is still read as a map entry.
    const named = await declare("u2", "a2", { workspaceId: "workspaces" });
    expect(Object.keys(parseFleetOutputs({ workspaces: named }))).toEqual(["workspaces"]);
  });

  it("refuses malformed outputs naming the field", async () => {
    const a = await declare("u1", "a1");
    expect(() => parseFleetOutputs({ [a.workspaceId]: { ...a, workspaceId: "other" } })).toThrow(
      new RegExp(`workspaces\\.${a.workspaceId}\\.workspaceId: must equal its key`),
    );
    expect(() => parseFleetOutputs({ "../etc": { ...a, workspaceId: "../etc" } })).toThrow(/workspaces/);
    expect(() => parseFleetOutputs({ [a.workspaceId]: { ...a, backend: { kind: "local", bogus: 1 } } })).toThrow(/backend/);
    expect(() => parseFleetOutputs([1, 2])).toThrow(/workspaces: stack outputs must be a JSON object/);
    const docker = { ...a, workspaceId: "d1", backend: { kind: "docker" } } as unknown as FleetEntry;
    expect(() => LocalWorkspaceManager.fromOutputs({ d1: docker }, { basedir })).toThrow(
      /workspaces\.d1\.backend\.kind: is 'docker' but this manager serves 'local'/,
    );
    await using m = LocalWorkspaceManager.fromOutputs({ d1: docker, [a.workspaceId]: a }, { basedir, ignoreOtherBackends: true });
    expect(m.declared("d1")).toBeUndefined();
    expect(m.declared(a.workspaceId)).toBeDefined();
  });

  it("recreates a declared workspace its backend lost, and says so", async () => {
    const a = await declare("u1", "a1");
    await rm(a.location.hostPath!, { recursive: true });
    const events: ManagerEvent[] = [];
    await using m = LocalWorkspaceManager.fromOutputs({ workspaces: { [a.workspaceId]: a } }, { basedir, onEvent: (e: ManagerEvent) => events.push(e) });
    const ws = await m.getWorkspace("u1", "a1");
    expect(ws.workdir).toBe(a.location.hostPath);
    expect(events).toMatchObject([{ type: "create", recreated: true, managedBy: "pulumi" }]);
    expect(await meta(ws.workdir)).toMatchObject({ managedBy: "pulumi", userId: "u1" });
  });

  it("applies a declared ttlSeconds to that workspace only", async () => {
    const a = await declare("u1", "a1", { ttlSeconds: 0.03 });
    await using m = LocalWorkspaceManager.fromOutputs({ [a.workspaceId]: a }, { basedir });
    const declared = await m.getWorkspace("u1", "a1");
    const runtime = await m.getWorkspace("u2", "a1");
    await sleep(60);
    expect(await m.sweep()).toMatchObject({ evicted: 1 });
    expect(m.cachedIds()).toEqual([runtime.workspaceId]);
    expect(declared.isAlive).toBe(false);
  });
});
