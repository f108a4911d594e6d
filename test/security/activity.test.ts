import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapDriver } from "../../sdk/backends/bubblewrap/driver.js";
import { hashedName } from "../../sdk/backends/bubblewrap/paths.js";
import { BubblewrapWorkspace } from "../../sdk/backends/bubblewrap/index.js";
import { DockerDriver } from "../../sdk/backends/docker/driver.js";
import { DockerWorkspaceManager } from "../../sdk/backends/docker/index.js";
import { LocalWorkspaceManager } from "../../sdk/backends/local/index.js";
import type { ManagedWorkspace, WorkspaceManager } from "../../sdk/manager/manager.js";
import type { Workspace } from "../../sdk/workspace/workspace.js";
import { uniqueId } from "../contract/fixture.js";
import { BASE_IMAGE, dockerEngine } from "../support/docker-engine.js";
import { ROOT } from "../support/sandbox-fixtures.js";

/**
 * Activity through the handle (issue 9, item 14): a user's own tool bound to getBackend() runs a
 * long command while idle sweeps run. The sweep must see the workspace busy (never close or pause
 * it under the command), and a handle held past an eviction fails at once with a clear error
 * instead of hanging on a paused container. Item 15: a failed initialize of an ephemeral
 * bubblewrap workspace leaves nothing behind.
 */

/** Far past any TTL: the sweep treats every workspace as expired by the clock. */
const LATER = () => Date.now() + 24 * 3600_000;

async function attack(m: WorkspaceManager<ManagedWorkspace & Workspace>, ws: Workspace): Promise<void> {
  const handle = ws.getBackend();
  // A long command and a long-lived process through the handle, as a user's own tool would start them.
  const command = handle.exec(["sh", "-c", "sleep 2; echo finished"]);
  const proc = handle.spawn(["sh", "-c", "read line; echo got:$line"]);
  const procOut: Buffer[] = [];
  proc.stdout.on("data", (c: Buffer) => procOut.push(c));
  await new Promise((r) => setTimeout(r, 300));
  // File operations through the handle count too.
  await handle.writeFile("note.txt", "x");
  const swept = await m.sweep(LATER());
  expect(swept).toMatchObject({ evicted: 0, busy: 1 });
  expect(m.peek(ws.workspaceId)).toBe(ws);
  const r = await command;
  expect(r.exitCode).toBe(0);
  expect(r.stdout.toString()).toBe("finished\n");
  // The exec ended; the spawned process still lives: still busy.
  expect(await m.sweep(LATER())).toMatchObject({ evicted: 0, busy: 1 });
  proc.stdin.end("hello\n");
  expect(await proc.exited).toBe(0);
  expect(Buffer.concat(procOut).toString()).toBe("got:hello\n");
  // Idle now: the sweep evicts it, and the handle held since then fails at once, clearly.
  expect(await m.sweep(LATER())).toMatchObject({ evicted: 1, busy: 0 });
  const late = await handle.exec(["echo", "late"]).then(
    () => undefined,
    (e: unknown) => e as Error & { code?: string },
  );
  expect(late, "a command through a handle held past the eviction ran").toBeInstanceOf(Error);
  expect(late!.code).toBe("closed");
  expect(late!.message).toMatch(/getWorkspace|initialize/);
  // The next request gets a working workspace again.
  const again = await m.getWorkspace("u", "a", undefined, ws.workspaceId);
  expect((await again.getBackend().exec(["cat", "note.txt"])).stdout.toString()).toBe("x");
}

/** An explicit close while a command runs through the handle: the command ends, nothing hangs. */
async function closeUnderCommand(m: WorkspaceManager<ManagedWorkspace & Workspace>, ws: Workspace): Promise<void> {
  const handle = ws.getBackend();
  const command = handle.exec(["sleep", "600"]);
  const proc = handle.spawn(["sleep", "600"]);
  await new Promise((r) => setTimeout(r, 300));
  await m.close(ws.workspaceId);
  const r = await command;
  expect(r.exitCode).not.toBe(0);
  await proc.exited;
  expect(ws.isAlive).toBe(false);
}

describe("activity through getBackend() (item 14)", () => {
  let base: string;
  beforeAll(async () => {
    base = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-sec-activity-"));
  });
  afterAll(async () => {
    await fs.rm(base, { recursive: true, force: true });
  });

  it("Local: a sweep never closes a workspace under a command or process started through the handle", async () => {
    await using m = new LocalWorkspaceManager({ basedir: base, ttl: 0.05, sweepInterval: 3600 });
    const ws = await m.getWorkspace("u", "a", undefined, uniqueId("act"));
    await attack(m as never, ws);
  });

  it("Local: closing a workspace ends the commands running through its handle", async () => {
    await using m = new LocalWorkspaceManager({ basedir: base });
    await closeUnderCommand(m as never, await m.getWorkspace("u", "a", undefined, uniqueId("close")));
  });
});

const engine = await dockerEngine();

describe.skipIf(!engine)("activity through getBackend() on Docker (item 14)", () => {
  const ids: string[] = [];
  afterAll(async () => {
    const d = new DockerDriver({ baseImage: BASE_IMAGE });
    await Promise.all(ids.map((w) => d.destroy(w).catch(() => undefined)));
  });

  it("a sweep never pauses a container under a command started through the handle; a held handle never hangs", async () => {
    await using m = new DockerWorkspaceManager({ baseImage: BASE_IMAGE, readOnlyPaths: [ROOT], ttl: 0.05, sweepInterval: 3600 });
    const id = uniqueId("act");
    ids.push(id);
    const ws = await m.getWorkspace("u", "a", undefined, id);
    await attack(m as never, ws);
  }, 120_000);

  it("closing (pausing) a workspace ends the commands running through its handle instead of freezing them", async () => {
    await using m = new DockerWorkspaceManager({ baseImage: BASE_IMAGE, readOnlyPaths: [ROOT] });
    const id = uniqueId("close");
    ids.push(id);
    const ws = await m.getWorkspace("u", "a", undefined, id);
    await closeUnderCommand(m as never, ws);
    expect((await ws.driver.find(id))?.state).toBe("paused");
  }, 120_000);
});

describe("failed initialize of an ephemeral bubblewrap workspace (item 15)", () => {
  async function expectNothingLeft(id: string): Promise<void> {
    const driver = new BubblewrapDriver();
    expect(await driver.find(id)).toBeNull();
    expect(await driver.hostPath(id)).toBeNull();
    const index = path.join(driver.basedir, ".agentws", "index", `${hashedName(id)}.json`);
    await expect(fs.stat(index)).rejects.toThrow(/ENOENT/);
    await expect(fs.stat(path.join(driver.basedir, hashedName(""), hashedName(id)))).rejects.toThrow(/ENOENT/);
  }

  it("leaves neither its folder nor its index record behind when connecting fails", async () => {
    const id = uniqueId("fail");
    const ws = new BubblewrapWorkspace({ workspaceId: id, readOnlyPaths: ["/nonexistent-agentws-path"] });
    await expect(ws.initialize()).rejects.toThrow(/readOnlyPaths/);
    await expectNothingLeft(id);
  });

  it("leaves neither its folder nor its index record behind when its packages cannot be installed", async () => {
    const id = uniqueId("failpkg");
    const ws = new BubblewrapWorkspace({ workspaceId: id, pythonPackages: ["/nonexistent-agentws-path/x.whl"] });
    await expect(ws.initialize()).rejects.toMatchObject({ code: "provision_failed" });
    await expectNothingLeft(id);
  });
});
