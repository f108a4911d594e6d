import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapDriver } from "../../../sdk/backends/bubblewrap/driver.js";
import { loadDriver } from "../../../sdk/backends/load.js";
import { hashedName } from "../../../sdk/backends/bubblewrap/paths.js";
import type { BubblewrapSandbox } from "../../../sdk/backends/bubblewrap/sandbox.js";
import { BubblewrapWorkspace } from "../../../sdk/backends/bubblewrap/index.js";
import { uniqueId } from "../../contract/fixture.js";
import { expectCode } from "../../contract/helpers.js";
import { ECHO_SERVER, ROOT, bubblewrapFixture, runContractSuites } from "../../support/sandbox-fixtures.js";

describe("Bubblewrap backend", () => {
  let basedir: string;
  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-bwrap-test-"));
  });
  afterAll(async () => {
    await fs.rm(basedir, { recursive: true, force: true });
  });
  const driver = (extra: Partial<ConstructorParameters<typeof BubblewrapDriver>[0]> = {}) => new BubblewrapDriver({ basedir, readOnlyPaths: [ROOT], ...extra });

  describe("contract", () => {
    runContractSuites(bubblewrapFixture(() => ({ basedir })));
  });

  describe("driver", () => {
    it("names folders from hashed ids (BLAKE2b-16 of user and workspace), 0700 at each level", async () => {
      expect(hashedName("u")).toBe("13d650693b19482ad7061da30b45bfbc");
      const d = driver();
      const w = uniqueId("bw");
      expect(await d.find(w)).toBeNull();
      const desc = await d.create({ workspaceId: w, userId: "u", agentId: "a", managedBy: "pulumi", tags: { team: "red" } });
      const host = path.join(basedir, hashedName("u"), hashedName(w));
      expect(desc).toMatchObject({
        workspaceId: w,
        kind: "bubblewrap",
        state: "running",
        userId: "u",
        agentId: "a",
        managedBy: "pulumi",
        tags: { team: "red" },
      });
      expect(desc.location.hostPath).toBe(host);
      expect((await fs.stat(host)).mode & 0o777).toBe(0o700);
      expect((await fs.stat(path.dirname(host))).mode & 0o777).toBe(0o700);
      // A second create (another replica, a restart) adopts the same folder.
      const again = await driver().create({ workspaceId: w, userId: "u", managedBy: "runtime" });
      expect(again.location.hostPath).toBe(host);
      expect(again.managedBy).toBe("pulumi");
      await d.updateTags(w, { team: "green" });
      expect((await d.find(w))?.tags).toEqual({ team: "green" });
    });

    it("is the driver loadDriver gives for a bubblewrap spec", async () => {
      const d = await loadDriver({ kind: "bubblewrap", basedir, network: "none" });
      expect(d).toBeInstanceOf(BubblewrapDriver);
      const w = uniqueId("loaded");
      await d.create({ workspaceId: w, managedBy: "pulumi" });
      expect((await driver().find(w))?.managedBy).toBe("pulumi");
    });

    it("racing creators end with one folder and one record", async () => {
      const w = uniqueId("race");
      const results = await Promise.all([0, 1, 2, 3].map(() => driver().create({ workspaceId: w, userId: "racer", managedBy: "runtime" })));
      expect(new Set(results.map((r) => r.location.hostPath)).size).toBe(1);
      expect(await fs.readdir(path.join(basedir, hashedName("racer")))).toEqual([hashedName(w)]);
    });

    it("destroy keeps the files unless deleteData; a later create adopts them", async () => {
      const d = driver();
      const w = uniqueId("bw");
      await d.create({ workspaceId: w, managedBy: "runtime" });
      const sb = await d.connect(w);
      await sb.writeFile("keep.txt", "kept");
      await sb.close();
      await d.destroy(w);
      expect(await d.find(w)).toBeNull();
      await d.destroy(w);
      await d.create({ workspaceId: w, managedBy: "runtime" });
      const back = await d.connect(w);
      expect((await back.readFile("keep.txt")).toString()).toBe("kept");
      await back.close();
      await d.destroy(w, { deleteData: true });
      expect(await fs.stat(path.join(basedir, hashedName(""), hashedName(w))).catch(() => null)).toBeNull();
    });

    it("refuses a folder that escapes basedir through a symlink", async () => {
      const outside = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-outside-"));
      try {
        await fs.symlink(outside, path.join(basedir, hashedName("mallory")));
        await expectCode(driver().create({ workspaceId: uniqueId(), userId: "mallory", managedBy: "runtime" }), "path_escape", /outside basedir/);
        expect(await fs.readdir(outside)).toEqual([]);
      } finally {
        await fs.rm(outside, { recursive: true, force: true });
      }
    });

    it("refuses bad ids, unknown ids, corrupt records and bad options, naming the field", async () => {
      const d = driver();
      await expectCode(d.create({ workspaceId: "../x", managedBy: "runtime" }), "invalid_argument", /workspaceId/);
      await expectCode(d.connect(uniqueId("nobody")), "not_found", /create it first/);
      const w = uniqueId("corrupt");
      await d.create({ workspaceId: w, managedBy: "runtime" });
      await fs.writeFile(path.join(basedir, ".agentws/index", `${hashedName(w)}.json`), "{not json");
      await expectCode(d.find(w), "internal", /corrupt/);
      expect(() => new BubblewrapDriver({ network: "bridge" as never })).toThrow(/network/);
      expect(() => new BubblewrapDriver({ readOnlyPaths: ["relative/path"] })).toThrow(/readOnlyPaths/);
      const missing = uniqueId("ro");
      const dm = new BubblewrapDriver({ basedir, readOnlyPaths: ["/definitely/not/here"] });
      await dm.create({ workspaceId: missing, managedBy: "runtime" });
      await expectCode(dm.connect(missing), "invalid_argument", /readOnlyPaths/);
    });

    it("installs extra Python packages once, outside the workspace, and again only when the list changes", async () => {
      const w = uniqueId("pkg");
      const progress: string[] = [];
      const d = driver({ pythonPackages: ["six==1.16.0"], network: "none" });
      await d.create({ workspaceId: w, managedBy: "runtime" }, { onProgress: (e) => progress.push(e.message) });
      expect(progress).toContain("extra packages installed");
      const sb = await d.connect(w, { onProgress: (e) => progress.push(`again ${e.message}`) });
      expect(progress.filter((p) => p.startsWith("again"))).toEqual([]);
      const r = await sb.exec(["python3", "-c", "import six; print(six.__version__, six.__file__)"]);
      expect(r.stdout.toString()).toMatch(/^1\.16\.0 \/opt\/agentws\/python\/six\.py/);
      expect(await sb.list("")).toEqual([]);
      expect((await sb.exec(["touch", "/opt/agentws/python/x"])).exitCode).not.toBe(0);
      await sb.close();
      const bad = driver({ pythonPackages: ["agentws-no-such-package-zz==0.0.0"] });
      await expectCode(bad.connect(w), "provision_failed", /agentws-no-such-package-zz/);
      // The failed install left the working set in place.
      const still = await d.connect(w);
      expect((await still.exec(["python3", "-c", "import six"])).exitCode).toBe(0);
      await still.close();
    });
  });

  describe("sandbox", () => {
    let sb: BubblewrapSandbox;
    beforeAll(async () => {
      const d = driver({ env: { FROM_SPEC: "spec" } });
      const w = uniqueId("sb");
      await d.create({ workspaceId: w, managedBy: "runtime" });
      sb = await d.connect(w);
    });
    afterAll(async () => {
      await sb.close();
    });

    it("runs at /workspace with a clean environment, stdout and stderr apart", async () => {
      const r = await sb.exec(["sh", "-c", 'cat; echo "$PWD $HOME $FROM_SPEC $FROM_CALL" >&2; exit 5'], { stdin: "in", env: { FROM_CALL: "call" } });
      expect(r).toMatchObject({ exitCode: 5, timedOut: false });
      expect(r.stdout.toString()).toBe("in");
      expect(r.stderr.toString()).toBe("/workspace /workspace spec call\n");
      const env = (await sb.exec(["env"])).stdout.toString();
      expect(env).not.toMatch(/DOCKER_HOST|VITEST/);
      expect((await sb.exec(["no-such-binary-here"])).exitCode).not.toBe(0);
    });

    it("a timeout kills the whole tree", async () => {
      const secs = `${30 + (Date.now() % 1000) / 1000}`;
      const marker = `sleep\0${secs}`;
      const r = await sb.exec(["sh", "-c", `sleep ${secs} & sleep ${secs}; echo never`], { timeoutMs: 300 });
      expect(r.timedOut).toBe(true);
      await new Promise((res) => setTimeout(res, 100));
      const ps = await fs.readdir("/proc");
      const cmdlines = await Promise.all(ps.filter((p) => /^\d+$/.test(p)).map((p) => fs.readFile(`/proc/${p}/cmdline`, "utf8").catch(() => "")));
      expect(cmdlines.filter((c) => c.includes(marker))).toEqual([]);
    });

    it("resolves cwd inside the workspace and refuses escapes", async () => {
      await sb.mkdir("d/e");
      expect((await sb.exec(["pwd"], { cwd: "d/e" })).stdout.toString()).toBe("/workspace/d/e\n");
      await sb.exec(["ln", "-s", "/etc", "d/etc"]);
      await expectCode(sb.exec(["pwd"], { cwd: "d/etc" }), "path_escape");
      await expectCode(sb.exec(["pwd"], { cwd: "nope" }), "not_found");
      await expectCode(sb.readFile("d/etc/passwd"), "path_escape");
      await expectCode(sb.writeFile("d/etc/x", "x"), "path_escape");
    });

    it("spawn gives a duplex with stderr apart; close() kills what is still running", async () => {
      const p = sb.spawn(["sh", "-c", 'read l; echo "got:$l"; echo oops >&2']);
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      p.stdout.on("data", (c: Buffer) => out.push(c));
      p.stderr.on("data", (c: Buffer) => err.push(c));
      p.stdin.end("hello\n");
      expect(await p.exited).toBe(0);
      expect(Buffer.concat(out).toString()).toBe("got:hello\n");
      expect(Buffer.concat(err).toString()).toBe("oops\n");
      const d = driver();
      const w = uniqueId("close");
      await d.create({ workspaceId: w, managedBy: "runtime" });
      const other = await d.connect(w);
      const long = other.spawn(["sleep", "60"]);
      await other.close();
      expect(await long.exited).toBeNull();
    });

    it("notices a workspace folder replaced behind its back", async () => {
      const d = driver();
      const w = uniqueId("swap");
      await d.create({ workspaceId: w, managedBy: "runtime" });
      const s = await d.connect(w);
      const host = s.hostRoot;
      await fs.rename(host, `${host}.old`);
      await fs.mkdir(host);
      await expectCode(s.exec(["true"]), "unavailable", /replaced/);
      expect(() => s.spawn(["true"])).toThrow(/replaced/);
      await s.close();
    });
  });

  describe("workspace", () => {
    const mcp = { name: "echo", transport: { type: "stdio" as const, command: "node", args: [ECHO_SERVER] } };

    it("close then reinitialize keeps files and MCP registrations; stdio MCP servers run inside", async () => {
      const w = uniqueId("ws");
      const ws = new BubblewrapWorkspace({ workspaceId: w, basedir, readOnlyPaths: [ROOT], userId: "u9" });
      await ws.initialize();
      expect(ws.ensureOutcome).toBe("created");
      await ws.addMcp(mcp, { agentId: "a" });
      const [h] = await ws.listMcps({ agentId: "a" });
      expect((await h!.callTool("env", { name: "HOME" })).output).toContain("/workspace");
      await ws.getBackend().writeFile("notes.txt", "n");
      await ws.close();
      const again = new BubblewrapWorkspace({ workspaceId: w, basedir, readOnlyPaths: [ROOT], userId: "u9" });
      await again.initialize();
      try {
        expect(again.ensureOutcome).toBe("reattached");
        expect((await again.getBackend().readFile("notes.txt")).toString()).toBe("n");
        expect((await again.listMcps({ agentId: "a" })).map((x) => x.name)).toEqual(["echo"]);
      } finally {
        await again.close();
      }
    });

    it("an ephemeral workspace is removed on close", async () => {
      const ws = new BubblewrapWorkspace({ readOnlyPaths: [ROOT] });
      await ws.initialize();
      expect(ws.getBackend().persistent).toBe(false);
      const host = (ws.getBackend() as BubblewrapSandbox).hostRoot;
      await ws.getBackend().writeFile("x", "y");
      await ws.close();
      expect(await fs.stat(host).catch(() => null)).toBeNull();
    });

    it("rejects bad options naming the field", () => {
      expect(() => new BubblewrapWorkspace({ basedir: "" })).toThrow(/basedir/);
      expect(() => new BubblewrapWorkspace({ env: { "1X": "y" } })).toThrow(/env/);
      expect(() => new BubblewrapWorkspace({ teardown: "nuke" as never })).toThrow(/teardown/);
    });
  });
});
