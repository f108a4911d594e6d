import { execFile } from "node:child_process";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapWorkspaceManager } from "../../../sdk/backends/bubblewrap/index.js";
import { hashedName } from "../../../sdk/backends/bubblewrap/paths.js";
import type { BubblewrapSandbox } from "../../../sdk/backends/bubblewrap/sandbox.js";
import { assignWorkspaceId } from "../../../sdk/manager/ids.js";
import { uniqueId } from "../../contract/fixture.js";
import { expectCode } from "../../contract/helpers.js";
import { ECHO_SERVER, ROOT } from "../../support/sandbox-fixtures.js";

const run = promisify(execFile);

describe("BubblewrapWorkspaceManager", () => {
  let basedir: string;
  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-bwmgr-test-"));
  });
  afterAll(async () => {
    await fs.rm(basedir, { recursive: true, force: true });
  });
  const manager = (extra: Partial<ConstructorParameters<typeof BubblewrapWorkspaceManager>[0]> = {}) =>
    new BubblewrapWorkspaceManager({ basedir, readOnlyPaths: [ROOT], ...extra });

  it("serves <basedir>/<h(user)>/<h(workspaceId)> per id, stamped with the identity", async () => {
    await using m = manager();
    const user = uniqueId("user");
    const ws = await m.getWorkspace(user, "agent-1");
    expect(ws.workspaceId).toBe(assignWorkspaceId({ userId: user, agentId: "agent-1" }));
    const host = (ws.getBackend() as BubblewrapSandbox).hostRoot;
    expect(host).toBe(path.join(await fs.realpath(basedir), hashedName(user), hashedName(ws.workspaceId)));
    expect(await ws.driver.find(ws.workspaceId)).toMatchObject({ userId: user, agentId: "agent-1", managedBy: "runtime" });
    expect((await ws.getBackend().exec(["pwd"])).stdout.toString()).toBe("/workspace\n");
  });

  it("an idle sweep closes (stopping MCP servers); the next request reattaches with files and registrations", async () => {
    const m = manager({ ttl: 0.1, sweepInterval: 3600 });
    try {
      const w = uniqueId("idle");
      const ws = await m.getWorkspace("u", "a", undefined, w);
      await ws.addMcp({ name: "echo", transport: { type: "stdio", command: "node", args: [ECHO_SERVER] } });
      const [h] = await ws.listMcps();
      expect(JSON.parse((await h!.callTool("env", { name: "HOME" })).output).value).toBe("/workspace");
      await ws.getBackend().writeFile("data/x.txt", "x");
      await new Promise((r) => setTimeout(r, 200));
      expect((await m.sweep()).evicted).toBe(1);
      expect(ws.isAlive).toBe(false);
      expect(h!.closed).toBe(true);
      const back = await m.getWorkspace("u", "a", undefined, w);
      expect(back.ensureOutcome).toBe("reattached");
      expect((await back.getBackend().readFile("data/x.txt")).toString()).toBe("x");
      const [h2] = await back.listMcps();
      expect(h2!.closed).toBe(false);
      expect((await h2!.callTool("echo", { text: "back" })).output).toBe("back");
    } finally {
      await m.closeAll();
    }
  });

  it("a restarted service (new process, same basedir) finds the same folder; racing managers share one", async () => {
    const w = uniqueId("restart");
    const script = path.join(basedir, `bw-${w}.mts`);
    await fs.writeFile(
      script,
      `import { BubblewrapWorkspaceManager } from ${JSON.stringify(path.join(ROOT, "sdk/backends/bubblewrap/index.ts"))};
const m = new BubblewrapWorkspaceManager({ basedir: ${JSON.stringify(basedir)} });
const ws = await m.getWorkspace("u-r", "a", undefined, ${JSON.stringify(w)});
await ws.getBackend().appendFile("runs.txt", "run\\n");
process.stdout.write(JSON.stringify({ outcome: ws.ensureOutcome, host: ws.getBackend().hostRoot }));
await m.closeAll();
`,
    );
    const go = async () => JSON.parse((await run(process.execPath, ["--import", "tsx", script], { cwd: ROOT })).stdout) as { outcome: string; host: string };
    const first = await go();
    const second = await go();
    expect(first.outcome).toBe("created");
    expect(second).toEqual({ outcome: "reattached", host: first.host });
    expect(await fs.readFile(path.join(first.host, "runs.txt"), "utf8")).toBe("run\nrun\n");

    const r = uniqueId("race");
    const [m1, m2] = [manager(), manager()];
    try {
      const [a, b] = await Promise.all([m1.getWorkspace("u-race", "a", undefined, r), m2.getWorkspace("u-race", "a", undefined, r)]);
      expect((a.getBackend() as BubblewrapSandbox).hostRoot).toBe((b.getBackend() as BubblewrapSandbox).hostRoot);
    } finally {
      await Promise.all([m1.closeAll(), m2.closeAll()]);
    }
  });

  it("refuses another user's id and bad options, naming the field", async () => {
    await using m = manager();
    const w = uniqueId("owned");
    await m.getWorkspace("owner", "a", undefined, w);
    await using other = manager();
    await expectCode(other.getWorkspace("intruder", "a", undefined, w), "conflict", /another user/);
    expect(() => new BubblewrapWorkspaceManager({ basedir: "" })).toThrow(/basedir/);
    expect(() => new BubblewrapWorkspaceManager({} as never)).toThrow(/basedir/);
    expect(() => manager({ network: "bridge" as never })).toThrow(/network/);
  });
});
