import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { SandboxManager } from "@alibaba-group/opensandbox";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { LABELS } from "../../../sdk/contract/driver.js";
import { OpenSandboxDriver, SCOPE_KEY } from "../../../sdk/backends/opensandbox/driver.js";
import { OpenSandboxWorkspace } from "../../../sdk/backends/opensandbox/index.js";
import { uniqueId } from "../../contract/fixture.js";
import { ECHO_SERVER_IN_WORKSPACE, echoServerBundle } from "../../fixtures/mcp/bundle.js";
import { OPENSANDBOX_TEST_IMAGE, openSandboxServer } from "../../support/opensandbox-server.js";

vi.setConfig({ testTimeout: 240_000, hookTimeout: 240_000 });
const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const server = await openSandboxServer();

/** What only the real server shows: reattach from a new process, pause/resume, races, a restart mid-create. */
describe.skipIf(!server).sequential("OpenSandbox backend through the real server", () => {
  let basedir: string;
  const made: string[] = [];
  const spec = () => ({ basedir, image: OPENSANDBOX_TEST_IMAGE });
  const id = (p = "ot") => {
    const v = uniqueId(p);
    made.push(v);
    return v;
  };
  /** Every live sandbox the server holds for a workspace id in this test's scope (duplicates included). */
  const sandboxesOf = async (workspaceId: string): Promise<string[]> => {
    const m = SandboxManager.create({ connectionConfig: { domain: server!.domain, disableMetrics: true } });
    try {
      const scope = new OpenSandboxDriver(spec()).scope;
      const r = await m.listSandboxInfos({ metadata: { [LABELS.workspaceId]: workspaceId, [SCOPE_KEY]: scope }, pageSize: 100 });
      return r.items.filter((i) => !["Deleting", "Deleted", "Error"].includes(i.status.state)).map((i) => i.id);
    } finally {
      await m.close();
    }
  };

  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-osb-"));
  });
  afterAll(async () => {
    const d = new OpenSandboxDriver(spec());
    for (const w of made) await d.destroy(w).catch(() => undefined);
    await d.close();
    await fs.rm(basedir, { recursive: true, force: true });
  });

  it("reattaches from a new process by metadata, with the files it left", async () => {
    const w = id("re");
    const child = `
      import { OpenSandboxWorkspace } from "./sdk/backends/opensandbox/index.ts";
      const ws = new OpenSandboxWorkspace({ workspaceId: ${JSON.stringify(w)}, basedir: ${JSON.stringify(basedir)}, image: ${JSON.stringify(OPENSANDBOX_TEST_IMAGE)}, userId: "u-re", agentId: "a-re", teardown: "keep" });
      await ws.initialize();
      await ws.getBackend().writeFile("data/left.txt", "from the first process\\n");
      await ws.close();
      process.stdout.write(ws.ensureOutcome);`;
    const { stdout } = await run(process.execPath, ["--import", "tsx", "--input-type=module", "-e", child], { cwd: ROOT, env: process.env, timeout: 180_000 });
    expect(stdout).toBe("created");
    const ws = new OpenSandboxWorkspace({ workspaceId: w, ...spec(), userId: "u-re", agentId: "a-re" });
    await ws.initialize();
    try {
      expect(ws.ensureOutcome).toBe("reattached");
      expect((await ws.getBackend().readFile("data/left.txt")).toString()).toBe("from the first process\n");
      const found = await ws.driver.find(w);
      expect(found).toMatchObject({ userId: "u-re", agentId: "a-re", managedBy: "runtime", state: "running" });
      expect(await sandboxesOf(w)).toHaveLength(1);
    } finally {
      await ws.close();
    }
    // Another user is refused the id.
    const other = new OpenSandboxWorkspace({ workspaceId: w, ...spec(), userId: "someone-else" });
    await expect(other.initialize()).rejects.toMatchObject({ code: "conflict" });
  });

  it("pause then resume keeps every file's checksum and the MCP registrations; exec and file bytes are exact", async () => {
    const w = id("pr");
    const ws = new OpenSandboxWorkspace({ workspaceId: w, ...spec() });
    await ws.initialize();
    const files: Record<string, Buffer> = {
      "data/a.bin": randomBytes(200_000),
      "data/nested/deep/b.bin": Buffer.from([0, 10, 13, 10, 10, 255, 0]),
      "data/no-final-newline.txt": Buffer.from("line one\n\nline three"),
      "data/empty": Buffer.alloc(0),
    };
    const sum = (b: Buffer) => createHash("sha256").update(b).digest("hex");
    const sb = ws.getBackend();
    for (const [p, b] of Object.entries(files)) await sb.writeFile(p, b);
    await sb.writeFile(ECHO_SERVER_IN_WORKSPACE, await echoServerBundle());
    await ws.addMcp({ name: "echo", transport: { type: "stdio", command: "node", args: [ECHO_SERVER_IN_WORKSPACE] } }, { agentId: "a1" });
    const mcpTools = async (w: OpenSandboxWorkspace) => {
      const handles = await w.listMcps({ agentId: "a1" });
      return {
        names: handles.map((h) => h.name),
        tools: (await Promise.all(handles.map((h) => h.listTools())))
          .flat()
          .map((t) => t.name)
          .sort(),
      };
    };
    const before = await mcpTools(ws);
    expect(before.names).toEqual(["echo"]);
    expect(before.tools.length).toBeGreaterThan(0);
    // exec output is exact too (through files, not execd's line stream): no final newline is added, "\r" and NULs kept.
    expect((await sb.exec(["cat", "data/no-final-newline.txt"])).stdout.toString()).toBe("line one\n\nline three");
    expect((await sb.exec(["cat", "data/nested/deep/b.bin"])).stdout.equals(files["data/nested/deep/b.bin"]!)).toBe(true);
    const capped = await sb.exec(["head", "-c", "5000", "data/a.bin"], { maxOutputBytes: 1000 });
    expect(capped).toMatchObject({ truncated: true, exitCode: 0 });
    expect(capped.stdout.equals(files["data/a.bin"]!.subarray(0, 1000))).toBe(true);
    await ws.close(); // teardown "pause"
    expect((await ws.driver.find(w))!.state).toBe("paused");

    const again = new OpenSandboxWorkspace({ workspaceId: w, ...spec() });
    await again.initialize();
    try {
      expect(again.ensureOutcome).toBe("resumed");
      for (const [p, b] of Object.entries(files)) expect(sum(await again.getBackend().readFile(p)), p).toBe(sum(b));
      expect(await mcpTools(again)).toEqual(before);
      expect(await sandboxesOf(w)).toHaveLength(1);
    } finally {
      await again.close();
    }
  });

  it("two replicas creating one id at once converge on one sandbox", async () => {
    const w = id("race");
    const [a, b] = [new OpenSandboxDriver(spec()), new OpenSandboxDriver(spec())];
    try {
      const [da, db] = await Promise.all([a.create({ workspaceId: w, managedBy: "runtime" }), b.create({ workspaceId: w, managedBy: "runtime" })]);
      expect(da.location.sandboxId).toBe(db.location.sandboxId);
      expect(await sandboxesOf(w)).toEqual([da.location.sandboxId]);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("a server restarted in the middle of a create leaves one sandbox or none, and the next create ends with one", async () => {
    // A server instance of its own (own state, port and host ports): restarting it leaves other test files' server alone.
    // Its ports sit below Linux's ephemeral range (32768-60999): under load a client socket of another test
    // once held 38090 as its local port, and the restart could not bind.
    const env = {
      ...process.env,
      AGENTWS_OPENSANDBOX_STATE: path.join(os.homedir(), ".cache/agent-workspaces/opensandbox-restart-test"),
      AGENTWS_OPENSANDBOX_PORT: "28090",
      AGENTWS_OPENSANDBOX_PORTS: "28100-28999",
    };
    const script = path.join(ROOT, "scripts/opensandbox-server.sh");
    await run(script, ["start"], { env, timeout: 600_000 });
    const w = id("restart");
    const d = new OpenSandboxDriver({ ...spec(), domain: "127.0.0.1:28090" });
    try {
      const creating = d.create({ workspaceId: w, managedBy: "runtime" }).then(
        () => "created",
        (e: unknown) => `failed: ${(e as Error).message}`,
      );
      await new Promise((r) => setTimeout(r, 400));
      await run(script, ["stop"], { env, timeout: 60_000 });
      await run(script, ["start"], { env, timeout: 600_000 });
      expect(await creating).toMatch(/^(created|failed)/);
      expect((await sandboxesOf(w)).length).toBeLessThanOrEqual(1);
      await d.create({ workspaceId: w, managedBy: "runtime" });
      expect(await sandboxesOf(w)).toHaveLength(1);
      await d.destroy(w);
      expect(await sandboxesOf(w)).toEqual([]);
    } finally {
      await d.close();
      await run(script, ["stop"], { env, timeout: 60_000 }).catch(() => undefined);
    }
  }, 900_000);

  it("finds a sandbox the Python reference tagged, so a service moving from it keeps its sandboxes", async () => {
    const w = uniqueId("ref");
    const { Sandbox } = await import("@alibaba-group/opensandbox");
    const theirs = await Sandbox.create({
      connectionConfig: { domain: server!.domain, disableMetrics: true },
      image: OPENSANDBOX_TEST_IMAGE,
      metadata: { "agentscope.workspace.id": w },
      timeoutSeconds: 600,
    });
    const d = new OpenSandboxDriver({ image: OPENSANDBOX_TEST_IMAGE });
    try {
      const found = await d.find(w);
      expect(found).toMatchObject({ workspaceId: w, state: "running", location: { sandboxId: theirs.id, origin: "agentscope" } });
      const sb = await d.connect(w);
      await sb.writeFile("moved.txt", "kept");
      expect((await sb.readFile("moved.txt")).toString()).toBe("kept");
      await sb.close();
    } finally {
      await theirs.kill().catch(() => undefined);
      await theirs.close();
      await d.close();
    }
  });

  it("renews the keep-alive, and keeps the API key out of descriptions, specs and errors", async () => {
    const w = id("keep");
    const key = `osb-key-${randomBytes(8).toString("hex")}`;
    const d = new OpenSandboxDriver({ ...spec(), timeoutSeconds: 600, apiKey: key });
    try {
      const created = await d.create({ workspaceId: w, managedBy: "runtime" });
      const before = Date.parse(created.location.expiresAt!);
      await new Promise((r) => setTimeout(r, 1100));
      await d.renew(created.location.sandboxId!);
      const after = Date.parse((await d.find(w))!.location.expiresAt!);
      expect(after).toBeGreaterThan(before);
      expect(JSON.stringify([created, d.spec])).not.toContain(key);
      const bad = new OpenSandboxDriver({ ...spec(), image: "no-such-image:never", apiKey: key });
      const err = await bad.create({ workspaceId: id("bad"), managedBy: "runtime" }).then(
        () => null,
        (e: unknown) => e as Error,
      );
      expect(err).toBeInstanceOf(Error);
      expect(`${err!.message} ${JSON.stringify(err)}`).not.toContain(key);
      await bad.close();
    } finally {
      await d.close();
    }
  });
});
