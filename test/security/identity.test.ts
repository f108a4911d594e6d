import { execFileSync } from "node:child_process";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapWorkspaceManager } from "../../sdk/backends/bubblewrap/index.js";
import { hashedName } from "../../sdk/backends/bubblewrap/paths.js";
import { DockerDriver } from "../../sdk/backends/docker/driver.js";
import { DockerWorkspaceManager } from "../../sdk/backends/docker/index.js";
import { LocalWorkspaceManager } from "../../sdk/backends/local/index.js";
import { assignWorkspaceId } from "../../sdk/manager/ids.js";
import type { WorkspaceManager, ManagedWorkspace } from "../../sdk/manager/manager.js";
import type { Workspace } from "../../sdk/workspace/workspace.js";
import { uniqueId } from "../contract/fixture.js";
import { expectCode } from "../contract/helpers.js";
import { BASE_IMAGE, dockerEngine } from "../support/docker-engine.js";
import { ROOT } from "../support/sandbox-fixtures.js";

/**
 * Identity attacks (issue 9, items 4-6): a hostile caller passing empty ids, a second user asking
 * for a warm-pool workspace after its claim was evicted, and a hostile agent rewriting any owner
 * record its own Write tool can reach. Every attack ends with the other user refused.
 */

let base: string;
beforeAll(async () => {
  base = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-sec-identity-"));
});
afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

async function waitForPool(m: WorkspaceManager<ManagedWorkspace>, ready: number): Promise<void> {
  for (let i = 0; i < 3000 && (m.stats().pool?.ready ?? 0) < ready; i++) await new Promise((r) => setTimeout(r, 20));
  expect(m.stats().pool?.ready).toBeGreaterThanOrEqual(ready);
}

/** What a hostile agent's Write tool does: plant an owner record naming `user` wherever it may live. */
async function rewriteOwnerRecords(ws: Workspace, user: string): Promise<void> {
  const write = ws.listTools().find((t) => t.name === "Write")!;
  const forged = JSON.stringify({ version: 1, workspaceId: ws.workspaceId, userId: user, managedBy: "runtime", tags: {}, createdAt: new Date().toISOString() });
  for (const file_path of [
    ".agentws.json",
    `../.agentws/owners/${ws.workspaceId}.json`,
    `../.agentws/claims/${ws.workspaceId}.json`,
    `${ws.workdir}/.agentws.json`,
  ])
    await write.execute({ file_path, content: forged }).catch(() => undefined);
}

describe("empty or blank ids (item 4)", () => {
  it("an empty userId never reaches another user's workspace, cached or after eviction (Local)", async () => {
    await using m = new LocalWorkspaceManager({ basedir: path.join(base, "empty") });
    const alice = await m.getWorkspace("alice", "agent");
    await alice.getBackend().writeFile("secret.txt", "alice's");
    const id = alice.workspaceId;
    for (const blank of ["", " ", "\t\n"]) {
      // Cached.
      await expectCode(m.getWorkspace(blank, "agent", undefined, id), "invalid_argument", /userId/);
      await expectCode(m.getWorkspace(blank, "agent"), "invalid_argument", /userId/);
    }
    await m.close(id);
    expect(m.peek(id)).toBeUndefined();
    for (const blank of ["", " "]) {
      // Evicted: the folder is on disk, nothing cached.
      await expectCode(m.getWorkspace(blank, "agent", undefined, id), "invalid_argument", /userId/);
      expect(m.peek(id)).toBeUndefined();
    }
    // A fresh manager (a restart) refuses it as well.
    await using again = new LocalWorkspaceManager({ basedir: path.join(base, "empty") });
    await expectCode(again.getWorkspace("", "agent", undefined, id), "invalid_argument", /userId/);
    expect((await (await again.getWorkspace("alice", "agent", undefined, id)).getBackend().readFile("secret.txt")).toString()).toBe("alice's");
  });

  it("blank agent, session and workspace ids are invalid_argument naming the field, at every entry point", async () => {
    await using m = new LocalWorkspaceManager({ basedir: path.join(base, "blank"), isolation: "per_session" });
    await expectCode(m.getWorkspace("u", "", "s1"), "invalid_argument", /agentId/);
    await expectCode(m.getWorkspace("u", "  ", "s1"), "invalid_argument", /agentId/);
    await expectCode(m.getWorkspace("u", "a", " "), "invalid_argument", /sessionId/);
    await expectCode(m.getWorkspace("u", "a", "s1", ""), "invalid_argument", /workspaceId/);
    await expectCode(m.getWorkspace("u", "a", "s1", "  "), "invalid_argument", /workspaceId/);
    await expectCode(m.claimWorkspace({ userId: "" }), "invalid_argument", /userId/);
    await expectCode(m.claimWorkspace({ userId: "u", agentId: " " }), "invalid_argument", /agentId/);
    expect(() => m.assignWorkspaceId({ userId: "", agentId: "a" })).toThrow(/userId/);
    expect(() => m.assignWorkspaceId({ userId: "u", agentId: "\t" })).toThrow(/agentId/);
    expect(() => assignWorkspaceId({ userId: " ", agentId: "a" }, "per_user")).toThrow(/userId/);
    expect(() => m.resolveWorkspaceId("", "a", "s")).toThrow(/userId/);
    expect(m.cachedIds()).toEqual([]);
  });

  it("a workspace whose owner record cannot be read is refused, not handed out (Local)", async () => {
    const basedir = path.join(base, "unreadable");
    {
      await using m = new LocalWorkspaceManager({ basedir });
      await m.getWorkspace("alice", "agent", undefined, "locked");
    }
    // Corrupt every record of the owner the backend keeps, wherever it is.
    const records = await findFiles(basedir, (f) => f.endsWith(".json") && f.includes("locked"));
    expect(records.length).toBeGreaterThan(0);
    for (const f of records) await fs.writeFile(f, "{ truncated");
    await using m = new LocalWorkspaceManager({ basedir });
    for (const user of ["alice", "mallory"]) {
      const err = await m.getWorkspace(user, "agent", undefined, "locked").then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(err, `${user} got a workspace whose owner could not be read`).toBeInstanceOf(Error);
    }
  });
});

describe("identity records that cannot be read (item 4, fail closed)", () => {
  it("Bubblewrap: an index record that is not a readable file refuses every user, without blocking and without re-creating over it", async () => {
    const basedir = path.join(base, "bwunreadable");
    const id = uniqueId("bwlocked");
    {
      await using m = new BubblewrapWorkspaceManager({ basedir, readOnlyPaths: [ROOT] });
      await m.getWorkspace("alice", "agent", undefined, id);
    }
    const index = path.join(basedir, ".agentws", "index", `${hashedName(id)}.json`);
    await fs.rm(index);
    execFileSync("mkfifo", [index]);
    await using m = new BubblewrapWorkspaceManager({ basedir, readOnlyPaths: [ROOT] });
    for (const user of ["alice", "mallory"]) await expectCode(m.getWorkspace(user, "agent", undefined, id), "internal", /cannot be read/);
    expect((await fs.lstat(index)).isFIFO()).toBe(true);
  }, 20_000);
});

describe("warm-pool claims are durable (item 5)", () => {
  it("Local: claim, eviction, then another user is refused (same manager and after a restart)", async () => {
    const basedir = path.join(base, "pool");
    const m = new LocalWorkspaceManager({ basedir, prewarm: { size: 1, maxPerSecond: 50 } });
    m.start();
    await waitForPool(m, 1);
    const ws = await m.claimWorkspace({ userId: "alice", agentId: "agent" });
    expect(m.stats().pool?.hits).toBe(1);
    const id = ws.workspaceId;
    await ws.getBackend().writeFile("secret.txt", "alice's");
    await m.close(id);
    await expectCode(m.getWorkspace("mallory", "agent", undefined, id), "conflict", /another user/);
    await m[Symbol.asyncDispose]();
    await using again = new LocalWorkspaceManager({ basedir });
    await expectCode(again.getWorkspace("mallory", "agent", undefined, id), "conflict", /another user/);
    expect((await (await again.getWorkspace("alice", "agent", undefined, id)).getBackend().readFile("secret.txt")).toString()).toBe("alice's");
  });

  it("Bubblewrap: claim, eviction, then another user is refused", async () => {
    const basedir = path.join(base, "bwpool");
    const m = new BubblewrapWorkspaceManager({ basedir, readOnlyPaths: [ROOT], prewarm: { size: 1, maxPerSecond: 50 } });
    m.start();
    await waitForPool(m, 1);
    const ws = await m.claimWorkspace({ userId: "alice" });
    expect(m.stats().pool?.hits).toBe(1);
    const id = ws.workspaceId;
    await m.close(id);
    await expectCode(m.getWorkspace("mallory", "agent", undefined, id), "conflict", /another user/);
    await m[Symbol.asyncDispose]();
    await using again = new BubblewrapWorkspaceManager({ basedir, readOnlyPaths: [ROOT] });
    await expectCode(again.getWorkspace("mallory", "agent", undefined, id), "conflict", /another user/);
    await again.getWorkspace("alice", "agent", undefined, id);
  });
});

describe("owner records out of the agent's reach (item 6)", () => {
  it("Local: the agent's Write tool rewrites every owner record it can reach; another user is still refused", async () => {
    const basedir = path.join(base, "forge");
    let id: string;
    {
      await using m = new LocalWorkspaceManager({ basedir });
      const ws = await m.getWorkspace("alice", "agent", undefined, uniqueId("forge"));
      id = ws.workspaceId;
      await ws.getBackend().writeFile("secret.txt", "alice's");
      await rewriteOwnerRecords(ws, "mallory");
      // Cached: the owner check holds.
      await expectCode(m.getWorkspace("mallory", "agent", undefined, id), "conflict", /another user/);
    }
    // Evicted, then a restarted manager: only what the agent could not write decides.
    await using m = new LocalWorkspaceManager({ basedir });
    await expectCode(m.getWorkspace("mallory", "agent", undefined, id), "conflict", /another user/);
    expect((await (await m.getWorkspace("alice", "agent", undefined, id)).getBackend().readFile("secret.txt")).toString()).toBe("alice's");
  });

  it("Local: a pool-claimed workspace whose agent forges its owner record stays its claimer's", async () => {
    const basedir = path.join(base, "forge-pool");
    const m = new LocalWorkspaceManager({ basedir, prewarm: { size: 1, maxPerSecond: 50 } });
    m.start();
    await waitForPool(m, 1);
    const ws = await m.claimWorkspace({ userId: "alice" });
    await rewriteOwnerRecords(ws, "mallory");
    const id = ws.workspaceId;
    await m[Symbol.asyncDispose]();
    await using again = new LocalWorkspaceManager({ basedir });
    await expectCode(again.getWorkspace("mallory", "agent", undefined, id), "conflict", /another user/);
  });

  it("Bubblewrap: the agent, root of its own tree, forges owner files; another user is still refused", async () => {
    const basedir = path.join(base, "bwforge");
    let id: string;
    {
      await using m = new BubblewrapWorkspaceManager({ basedir, readOnlyPaths: [ROOT] });
      const ws = await m.getWorkspace("alice", "agent", undefined, uniqueId("bwforge"));
      id = ws.workspaceId;
      await rewriteOwnerRecords(ws, "mallory");
      await ws.getBackend().exec(["sh", "-c", `echo '{"userId":"mallory"}' > /workspace/.agentws.json; ls -a / /workspace > /dev/null`]);
    }
    await using m = new BubblewrapWorkspaceManager({ basedir, readOnlyPaths: [ROOT] });
    await expectCode(m.getWorkspace("mallory", "agent", undefined, id), "conflict", /another user/);
  });
});

const engine = await dockerEngine();

describe.skipIf(!engine)("Docker: warm-pool claims and forged owner files (items 5, 6)", () => {
  const ids: string[] = [];
  let basedir: string;
  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-sec-identity-docker-"));
  });
  afterAll(async () => {
    for (const spec of [{ basedir }, {}]) {
      const d = new DockerDriver({ ...spec, baseImage: BASE_IMAGE });
      await Promise.all(ids.map((w) => d.destroy(w, { deleteData: true }).catch(() => undefined)));
    }
    await fs.rm(basedir, { recursive: true, force: true });
  });

  for (const persistent of [true, false]) {
    it(`claim, an agent running as root forging owner files, eviction (pause), then another user is refused (${persistent ? "bind mount" : "ephemeral"})`, async () => {
      const options = { ...(persistent ? { basedir } : {}), baseImage: BASE_IMAGE, readOnlyPaths: [ROOT], prewarm: { size: 1, maxPerSecond: 50 } };
      const m = new DockerWorkspaceManager(options);
      m.start();
      await waitForPool(m, 1);
      const ws = await m.claimWorkspace({ userId: "alice" });
      ids.push(ws.workspaceId);
      expect(m.stats().pool?.hits).toBe(1);
      const id = ws.workspaceId;
      await rewriteOwnerRecords(ws, "mallory");
      await ws.getBackend().exec(["sh", "-c", `echo '{"userId":"mallory"}' > /workspace/.agentws.json`]);
      await m.close(id);
      expect((await ws.driver.find(id))?.state).toBe("paused");
      await expectCode(m.getWorkspace("mallory", "agent", undefined, id), "conflict", /another user/);
      await m[Symbol.asyncDispose]();
      const { prewarm: _prewarm, ...plain } = options;
      await using again = new DockerWorkspaceManager(plain);
      await expectCode(again.getWorkspace("mallory", "agent", undefined, id), "conflict", /another user/);
      const back = await again.getWorkspace("alice", "agent", undefined, id);
      expect((await back.getBackend().exec(["true"])).exitCode).toBe(0);
    }, 180_000);
  }
});

async function findFiles(dir: string, match: (file: string) => boolean): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fs.readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await findFiles(full, match)));
    else if (match(full)) out.push(full);
  }
  return out;
}
