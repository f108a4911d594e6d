import { execFile } from "node:child_process";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerDriver } from "../../../sdk/backends/docker/driver.js";
import { DockerWorkspaceManager } from "../../../sdk/backends/docker/index.js";
import type { DockerSandbox } from "../../../sdk/backends/docker/sandbox.js";
import type { ManagerEvent } from "../../../sdk/manager/events.js";
import { assignWorkspaceId } from "../../../sdk/manager/ids.js";
import { uniqueId } from "../../contract/fixture.js";
import { expectCode } from "../../contract/helpers.js";
import { BASE_IMAGE, containersFor, dockerEngine } from "../../support/docker-engine.js";
import { ECHO_SERVER, ROOT } from "../../support/sandbox-fixtures.js";

const engine = await dockerEngine();
const run = promisify(execFile);

describe.skipIf(!engine)("DockerWorkspaceManager", () => {
  let basedir: string;
  const ids: string[] = [];
  const manager = (extra: Partial<ConstructorParameters<typeof DockerWorkspaceManager>[0]> = {}) =>
    new DockerWorkspaceManager({ basedir, baseImage: BASE_IMAGE, readOnlyPaths: [ROOT], ...extra });

  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-dkmgr-test-"));
  });
  afterAll(async () => {
    const d = new DockerDriver({ basedir });
    await Promise.all(ids.map((w) => d.destroy(w).catch(() => undefined)));
    await fs.rm(basedir, { recursive: true, force: true });
  });

  it("puts each workspace id in <basedir>/<workspaceId> and labels its container with the identity", async () => {
    await using m = manager();
    const user = uniqueId("user");
    const ws = await m.getWorkspace(user, "agent-1");
    ids.push(ws.workspaceId);
    expect(ws.workspaceId).toBe(assignWorkspaceId({ userId: user, agentId: "agent-1" }));
    const d = await ws.driver.find(ws.workspaceId);
    expect(d).toMatchObject({ userId: user, agentId: "agent-1", managedBy: "runtime", state: "running" });
    expect(d!.location.hostPath).toBe(path.join(await fs.realpath(basedir), ws.workspaceId));
    // Two sessions of one agent under PER_SESSION get two folders, never one shared.
    await using s = manager({ isolation: "per_session" });
    const [a, b] = [await s.getWorkspace(user, "agent-1", "s1"), await s.getWorkspace(user, "agent-1", "s2")];
    ids.push(a.workspaceId, b.workspaceId);
    expect(a.workspaceId).not.toBe(b.workspaceId);
    expect((await a.driver.find(a.workspaceId))!.location.hostPath).not.toBe((await b.driver.find(b.workspaceId))!.location.hostPath);
  });

  it("two managers racing for one id end with one container", async () => {
    const w = uniqueId("mrace");
    ids.push(w);
    const [m1, m2] = [manager(), manager()];
    try {
      const [a, b] = await Promise.all([m1.getWorkspace("u", "a", undefined, w), m2.getWorkspace("u", "a", undefined, w)]);
      expect((a.getBackend() as DockerSandbox).containerId).toBe((b.getBackend() as DockerSandbox).containerId);
      expect(await containersFor(w)).toHaveLength(1);
      await a.getBackend().writeFile("from-a.txt", "a");
      expect((await b.getBackend().readFile("from-a.txt")).toString()).toBe("a");
    } finally {
      await Promise.all([m1.closeAll(), m2.closeAll()]);
    }
  });

  it("the idle sweep pauses; the next request resumes with every file and MCP registration", async () => {
    const events: ManagerEvent[] = [];
    const m = manager({ ttl: 0.2, sweepInterval: 3600, onEvent: (e) => events.push(e) });
    try {
      const w = uniqueId("idle");
      ids.push(w);
      const ws = await m.getWorkspace("u-idle", "a", undefined, w);
      await ws.addMcp({ name: "echo", transport: { type: "stdio", command: "node", args: [ECHO_SERVER] } });
      await ws.getBackend().exec(["sh", "-c", "mkdir -p data && head -c 20000 /dev/urandom > data/r.bin && echo hi > data/t.txt"]);
      const sums = (await ws.getBackend().exec(["sh", "-c", "sha256sum data/*"])).stdout.toString();
      await new Promise((r) => setTimeout(r, 300));
      const swept = await m.sweep();
      expect(swept.evicted).toBe(1);
      expect((await ws.driver.find(w))?.state).toBe("paused");
      expect(events.some((e) => e.type === "evict" && e.workspaceId === w && e.paused)).toBe(true);
      const back = await m.getWorkspace("u-idle", "a", undefined, w);
      expect(back).not.toBe(ws);
      expect(events.some((e) => e.type === "resume" && e.workspaceId === w)).toBe(true);
      expect((await back.getBackend().exec(["sh", "-c", "sha256sum data/*"])).stdout.toString()).toBe(sums);
      const [h] = await back.listMcps();
      expect((await h!.callTool("echo", { text: "after resume" })).output).toBe("after resume");
    } finally {
      await m.closeAll();
    }
  });

  it("an idle sweep racing a new request ends with one live, usable workspace and one container, round after round", async () => {
    const events: ManagerEvent[] = [];
    const m = manager({ ttl: 0.05, sweepInterval: 3600, onEvent: (e) => events.push(e) });
    try {
      const w = uniqueId("evrace");
      ids.push(w);
      const first = await m.getWorkspace("u-race", "a", undefined, w);
      await first.getBackend().writeFile("kept.txt", "kept");
      for (let round = 0; round < 6; round++) {
        await new Promise((r) => setTimeout(r, 80));
        // The sweep pauses the container while the request wants it running: whichever wins, the
        // caller gets a workspace whose container takes exec (no stale "paused" from the engine).
        const [, ws] = await Promise.all([m.sweep(), m.getWorkspace("u-race", "a", undefined, w)]);
        expect(ws.isAlive).toBe(true);
        expect(m.cachedIds()).toEqual([w]);
        expect((await ws.getBackend().exec(["cat", "kept.txt"])).stdout.toString()).toBe("kept");
      }
      expect(await containersFor(w)).toHaveLength(1);
      // The race really happened: rounds paused on eviction and resumed for the request.
      expect(events.filter((e) => e.type === "pause").length).toBeGreaterThan(0);
      expect(events.filter((e) => e.type === "resume").length).toBeGreaterThan(0);
    } finally {
      await m.closeAll();
    }
  });

  it("a restarted service (new process, same basedir) reattaches to the same container and files", async () => {
    const w = uniqueId("mrestart");
    ids.push(w);
    const script = path.join(basedir, `mgr-${w}.mts`);
    await fs.writeFile(
      script,
      `import { DockerWorkspaceManager } from ${JSON.stringify(path.join(ROOT, "sdk/backends/docker/index.ts"))};
const m = new DockerWorkspaceManager({ basedir: ${JSON.stringify(basedir)}, baseImage: ${JSON.stringify(BASE_IMAGE)} });
const ws = await m.getWorkspace("u-restart", "a", undefined, ${JSON.stringify(w)});
const seen = (await ws.getBackend().stat("proc-count.txt")) ? Number((await ws.getBackend().readFile("proc-count.txt")).toString()) : 0;
await ws.getBackend().writeFile("proc-count.txt", String(seen + 1));
process.stdout.write(JSON.stringify({ outcome: ws.ensureOutcome, container: ws.getBackend().containerId, seen }));
await m.closeAll();
`,
    );
    const go = async () =>
      JSON.parse((await run(process.execPath, ["--import", "tsx", script], { cwd: ROOT, env: process.env })).stdout) as {
        outcome: string;
        container: string;
        seen: number;
      };
    const first = await go();
    const second = await go();
    expect(first).toMatchObject({ outcome: "created", seen: 0 });
    expect(second).toEqual({ outcome: "resumed", container: first.container, seen: 1 });
    expect(await containersFor(w)).toHaveLength(1);
  });

  it("refuses another user's workspace id and bad options", async () => {
    await using m = manager();
    const w = uniqueId("owned");
    ids.push(w);
    await m.getWorkspace("owner", "a", undefined, w);
    await using other = manager();
    await expectCode(other.getWorkspace("intruder", "a", undefined, w), "conflict", /another user/);
    expect(() => manager({ network: "wifi" as never })).toThrow(/network/);
    expect(() => manager({ teardown: "shred" as never })).toThrow(/teardown/);
    expect(() => manager({ ttl: -1 })).toThrow(/ttl/);
  });
});
