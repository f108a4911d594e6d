import { execFile } from "node:child_process";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dockerClient } from "../../../sdk/backends/docker/client.js";
import { DockerDriver, containerName } from "../../../sdk/backends/docker/driver.js";
import { ensureImage, imageExists, renderBuildContext } from "../../../sdk/backends/docker/image.js";
import type { DockerSandbox } from "../../../sdk/backends/docker/sandbox.js";
import { DockerWorkspace } from "../../../sdk/backends/docker/index.js";
import { LABELS } from "../../../sdk/contract/driver.js";
import { loadDriver } from "../../../sdk/backends/load.js";
import { uniqueId } from "../../contract/fixture.js";
import { expectCode } from "../../contract/helpers.js";
import { BASE_IMAGE, containersFor, dockerEngine } from "../../support/docker-engine.js";
import { dockerFixture, runContractSuites } from "../../support/sandbox-fixtures.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const ECHO = path.join(ROOT, "test/fixtures/mcp/echo-server.mjs");
const engine = await dockerEngine();
const run = promisify(execFile);

describe.skipIf(!engine)("Docker backend", () => {
  let basedir: string;
  const made: string[] = [];
  const driver = () => new DockerDriver({ basedir, baseImage: BASE_IMAGE, readOnlyPaths: [ROOT] });
  const id = (p = "dk") => {
    const v = uniqueId(p);
    made.push(v);
    return v;
  };

  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-docker-test-"));
  });
  afterAll(async () => {
    const d = driver();
    await Promise.all(made.map((w) => d.destroy(w).catch(() => undefined)));
    await fs.rm(basedir, { recursive: true, force: true });
  });

  describe("contract", () => {
    runContractSuites(dockerFixture(() => ({ basedir, track: (w) => made.push(w) })));
  });

  describe("image", () => {
    it("is tagged by the hash of its inputs and changes only when they do", async () => {
      const a = await renderBuildContext({ baseImage: BASE_IMAGE });
      const b = await renderBuildContext({ baseImage: BASE_IMAGE });
      expect(a.tag).toBe(b.tag);
      expect(a.tag).toMatch(/^agentws-workspace:[0-9a-f]{12}$/);
      const tags = await Promise.all([
        renderBuildContext({ baseImage: "other:1" }),
        renderBuildContext({ baseImage: BASE_IMAGE, nodeVersion: "18" }),
        renderBuildContext({ baseImage: BASE_IMAGE, pythonPackages: ["six"] }),
        renderBuildContext({ baseImage: BASE_IMAGE, npmPackages: ["left-pad"] }),
      ]);
      expect(new Set([a.tag, ...tags.map((t) => t.tag)]).size).toBe(5);
      expect(tags[2]!.files["requirements.txt"]?.toString()).toBe("six\n");
    });

    it("is built once with progress, then reused without a build", async () => {
      const docker = dockerClient();
      const inputs = { baseImage: BASE_IMAGE, nodeVersion: "18" };
      const events: string[] = [];
      const tag = await ensureImage(docker, inputs, { onProgress: (e) => events.push(e.message) });
      expect(tag).toBe((await renderBuildContext(inputs)).tag);
      const again: string[] = [];
      expect(await ensureImage(docker, inputs, { onProgress: (e) => again.push(e.message) })).toBe(tag);
      expect(again).toEqual([]);
      const labels = (await docker.getImage(tag).inspect()).Config.Labels ?? {};
      expect(JSON.parse(labels["agent-workspaces.image-inputs"]!)).toMatchObject({ nodeVersion: "18" });
    });

    it("bakes extra Python packages into the image, trusting a given CA bundle (registries behind a TLS proxy)", async () => {
      const bundle = "/etc/ssl/certs/ca-certificates.crt";
      const hasBundle = !!(await fs.stat(bundle).catch(() => null));
      const inputs = { baseImage: BASE_IMAGE, pythonPackages: ["six==1.16.0"], ...(hasBundle ? { caCertificates: bundle } : {}) };
      const ctx = await renderBuildContext(inputs);
      if (hasBundle) expect(ctx.files["extra-ca.crt"]?.equals(await fs.readFile(bundle))).toBe(true);
      const tag = await ensureImage(dockerClient(), inputs);
      const c = await dockerClient().createContainer({ Image: tag, Cmd: ["python3", "-c", "import six; print(six.__version__)"] });
      try {
        await c.start();
        expect((await c.wait()).StatusCode).toBe(0);
        expect((await c.logs({ stdout: true })).toString()).toContain("1.16.0");
      } finally {
        await c.remove({ force: true });
      }
    });

    it("prunes workspace images no container uses, by base image, with a dry run first (API and CLI)", async () => {
      const docker = dockerClient();
      // A base tag of its own, so this test never removes an image another test is about to use.
      const repo = "agentws-prune-test";
      const label = uniqueId("b");
      const base = `${repo}:${label}`;
      await docker.getImage(BASE_IMAGE).tag({ repo, tag: label });
      try {
        const used = await ensureImage(docker, { baseImage: base });
        const stale = await ensureImage(docker, { baseImage: base, nodeVersion: "18" });
        const holder = await docker.createContainer({ Image: used, Cmd: ["true"] });
        try {
          const d = driver();
          const dry = await d.pruneImages({ baseImage: base, dryRun: true });
          expect(dry.removed.map((r) => r.tag)).toEqual([stale]);
          expect(dry.kept).toEqual([expect.objectContaining({ tag: used, containers: 1 })]);
          expect(await imageExists(docker, stale)).toBe(true);
          const real = await d.pruneImages({ baseImage: base });
          expect(real.removed.map((r) => r.tag)).toEqual([stale]);
          expect(await imageExists(docker, stale)).toBe(false);
          expect(await imageExists(docker, used)).toBe(true);
          expect(await imageExists(docker, BASE_IMAGE)).toBe(true);
        } finally {
          await holder.remove({ force: true });
        }
        const cli = (...args: string[]) =>
          run(process.execPath, [path.join(ROOT, "bin/agentws.js"), "prune-images", "--base", base, ...args], { env: process.env });
        const listed = JSON.parse((await cli("--dry-run")).stdout) as { removed: Array<{ tag: string }> };
        expect(listed.removed.map((r) => r.tag)).toEqual([used]);
        const done = await cli();
        expect(done.stderr).toContain(`removed ${used}`);
        expect(await imageExists(docker, used)).toBe(false);
      } finally {
        await docker
          .getImage(base)
          .remove()
          .catch(() => undefined);
      }
    });

    it("a create whose image another workspace's update removed after the check builds it again and succeeds", async () => {
      const docker = dockerClient();
      const repo = "agentws-race-test";
      const label = uniqueId("b");
      const base = `${repo}:${label}`;
      await docker.getImage(BASE_IMAGE).tag({ repo, tag: label });
      const d = new DockerDriver({ basedir, baseImage: base });
      const w = id("imgrace");
      try {
        const tag = await ensureImage(docker, { baseImage: base });
        // The engine really removes the image between the driver's check and its container create, as a
        // re-create or destroy elsewhere on the engine does when nothing uses it at that moment.
        const real = d.docker.createContainer.bind(d.docker);
        let raced = 0;
        d.docker.createContainer = (async (opts: Parameters<typeof real>[0]) => {
          if (raced++ === 0) await docker.getImage(tag).remove();
          return real(opts);
        }) as typeof real;
        const made = await d.create({ workspaceId: w, managedBy: "runtime" });
        expect(raced).toBe(2);
        expect(made.state).toBe("running");
        expect(await imageExists(docker, tag)).toBe(true);
      } finally {
        await d.destroy(w, { deleteData: true }).catch(() => undefined);
        for (const img of await docker.listImages({ filters: { label: ["agent-workspaces.image-inputs"] } }))
          if ((img.Labels?.["agent-workspaces.image-inputs"] ?? "").includes(base))
            await docker
              .getImage(img.Id)
              .remove()
              .catch(() => undefined);
        await docker
          .getImage(base)
          .remove()
          .catch(() => undefined);
      }
    });

    it("fails a build whose Node version does not match, saying which", async () => {
      const err = await expectCode(ensureImage(dockerClient(), { baseImage: BASE_IMAGE, nodeVersion: "99" }), "provision_failed");
      expect(err.message).toMatch(/has Node 18, nodeVersion asks for 99/);
    });

    it("a failed build leaves no image of its own behind (the steps it committed go; the base and other builds' cache stay)", async () => {
      const docker = dockerClient();
      // A base with an id of its own, so every step image this build commits is a child of it and of nothing else.
      const holder = await docker.createContainer({ Image: BASE_IMAGE, Cmd: ["true"] });
      const repo = "agentws-failed-build-test";
      const tag = uniqueId("b");
      try {
        await holder.commit({ repo, tag, changes: [`LABEL agentws.test=${tag}`] });
      } finally {
        await holder.remove({ force: true });
      }
      const base = `${repo}:${tag}`;
      const baseId = (await docker.getImage(base).inspect()).Id;
      const children = async () => (await docker.listImages({ all: true })).filter((i) => i.ParentId === baseId).map((i) => i.Id);
      try {
        // The tools check passes (a step image is committed), then the Node version check fails.
        await expectCode(ensureImage(docker, { baseImage: base, nodeVersion: "99" }), "provision_failed", /nodeVersion asks for 99/);
        expect(await children()).toEqual([]);
        expect(await imageExists(docker, base)).toBe(true);
      } finally {
        for (const id of await children())
          await docker
            .getImage(id)
            .remove()
            .catch(() => undefined);
        await docker
          .getImage(base)
          .remove()
          .catch(() => undefined);
      }
    });

    it("names a missing base image and how to get it", async () => {
      await expectCode(ensureImage(dockerClient(), { baseImage: "agentws-missing:nope" }), "unavailable", /scripts\/base-image\.sh/);
    });
  });

  describe("driver", () => {
    it("creates a named, labelled container over <basedir>/<id> (0700) and adopts it on a second create", async () => {
      const d = driver();
      const w = id();
      expect(await d.find(w)).toBeNull();
      const desc = await d.create({ workspaceId: w, userId: "u1", agentId: "a1", managedBy: "pulumi", tags: { team: "blue" } });
      expect(desc).toMatchObject({
        workspaceId: w,
        kind: "docker",
        state: "running",
        userId: "u1",
        agentId: "a1",
        managedBy: "pulumi",
        tags: { team: "blue" },
      });
      expect(desc.location.containerName).toBe(containerName(w));
      const host = path.join(await fs.realpath(basedir), w);
      expect(desc.location.hostPath).toBe(host);
      expect((await fs.stat(host)).mode & 0o777).toBe(0o700);
      const info = await dockerClient().getContainer(containerName(w)).inspect();
      expect(info.Config.Labels).toMatchObject({ [LABELS.workspaceId]: w, [LABELS.userId]: "u1", [LABELS.agentId]: "a1", [LABELS.managedBy]: "pulumi" });
      const again = await d.create({ workspaceId: w, managedBy: "runtime" });
      expect(again.location.containerId).toBe(desc.location.containerId);
      expect(await containersFor(w)).toHaveLength(1);
    });

    it("is the driver loadDriver gives for a docker spec", async () => {
      const d = await loadDriver({ kind: "docker", basedir, baseImage: BASE_IMAGE, network: "none" });
      expect(d).toBeInstanceOf(DockerDriver);
      const w = id("loaded");
      await d.create({ workspaceId: w, managedBy: "pulumi" });
      expect(await driver().find(w)).toMatchObject({ managedBy: "pulumi", state: "running" });
    });

    it("two drivers racing to create one id end with one container", async () => {
      const w = id("race");
      const results = await Promise.all([0, 1, 2].map(() => driver().create({ workspaceId: w, managedBy: "runtime" })));
      expect(new Set(results.map((r) => r.location.containerId)).size).toBe(1);
      expect(await containersFor(w)).toHaveLength(1);
    });

    it("pauses, resumes, and destroys (missing is a no-op); files stay unless deleteData", async () => {
      const d = driver();
      const w = id();
      await d.create({ workspaceId: w, managedBy: "runtime" });
      await d.pause(w);
      expect((await d.find(w))?.state).toBe("paused");
      await d.pause(w);
      await expectCode(d.connect(w), "unavailable", /paused/);
      await d.resume(w);
      expect((await d.find(w))?.state).toBe("running");
      const sb = await d.connect(w);
      await sb.writeFile("keep.txt", "kept");
      await d.destroy(w);
      expect(await d.find(w)).toBeNull();
      await d.destroy(w);
      expect(await fs.readFile(path.join(basedir, w, "keep.txt"), "utf8")).toBe("kept");
      await d.create({ workspaceId: w, managedBy: "runtime" });
      expect((await (await d.connect(w)).readFile("keep.txt")).toString()).toBe("kept");
      await d.destroy(w, { deleteData: true });
      expect(await fs.stat(path.join(basedir, w)).catch(() => null)).toBeNull();
    });

    it("re-labels a persistent workspace by recreating its container, keeping files and pause state", async () => {
      const d = driver();
      const w = id("tags");
      await d.create({ workspaceId: w, userId: "u", managedBy: "pulumi", tags: { a: "1" } });
      await (await d.connect(w)).writeFile("f.txt", "kept");
      await d.pause(w);
      await d.updateTags(w, { a: "2", b: "x" });
      const after = await d.find(w);
      expect(after).toMatchObject({ state: "paused", userId: "u", managedBy: "pulumi", tags: { a: "2", b: "x" } });
      await d.resume(w);
      expect((await (await d.connect(w)).readFile("f.txt")).toString()).toBe("kept");
      const eph = new DockerDriver({ baseImage: BASE_IMAGE });
      const e = id("tags-eph");
      await eph.create({ workspaceId: e, managedBy: "runtime", tags: { a: "1" } });
      await expectCode(eph.updateTags(e, { a: "2" }), "invalid_argument", /ephemeral/);
      await eph.updateTags(e, { a: "1" });
      await eph.destroy(e);
    });

    it("runs container processes as the configured user, so bind-mounted files belong to it", async () => {
      const d = new DockerDriver({ basedir, baseImage: BASE_IMAGE, user: "1234:1234" });
      const w = id("user");
      await d.create({ workspaceId: w, managedBy: "runtime" });
      const sb = await d.connect(w);
      await fs.chown(path.join(basedir, w), 1234, 1234);
      expect((await sb.exec(["id", "-u"])).stdout.toString().trim()).toBe("1234");
      expect((await sb.exec(["sh", "-c", "mkdir -p made/inside && echo x > made/inside/f"])).exitCode).toBe(0);
      const st = await fs.stat(path.join(basedir, w, "made/inside/f"));
      expect([st.uid, st.gid]).toEqual([1234, 1234]);
      expect(() => new DockerDriver({ user: "root" })).toThrow(/user/);
      // Without a bind mount the image's /workspace is still usable by that user.
      const eph = new DockerDriver({ baseImage: BASE_IMAGE, user: "1234:1234" });
      const e = id("user-eph");
      await eph.create({ workspaceId: e, managedBy: "runtime" });
      const esb = await eph.connect(e);
      await esb.writeFile("mine.txt", "ok");
      expect((await esb.exec(["stat", "-c", "%u", "mine.txt"])).stdout.toString().trim()).toBe("1234");
      await eph.destroy(e);
    });

    it("back-to-back pause and resume always leave a container that takes exec (the engine's late pause event)", async () => {
      const d = driver();
      const w = id();
      await d.create({ workspaceId: w, managedBy: "runtime" });
      // No delay between the calls: this is the window in which dockerd may apply containerd's
      // "paused" event after the unpause and refuse exec for a moment.
      for (let i = 0; i < 40; i++) {
        await d.pause(w);
        await d.resume(w);
        const r = await (await d.connect(w)).exec(["sh", "-c", `echo round-${i}`]);
        expect(r.stdout.toString()).toBe(`round-${i}\n`);
      }
      await d.destroy(w, { deleteData: true });
    });

    it("a freeze the engine gave up (cgroup v1 under load: the container still runs) is tried again", async () => {
      const d = driver();
      const w = id();
      const desc = await d.create({ workspaceId: w, managedBy: "runtime" });
      // The engine's own answer when runc's freezer gives up, twice, then the real pause.
      const realGet = d.docker.getContainer.bind(d.docker);
      let refused = 0;
      d.docker.getContainer = (cid: string) => {
        const c = realGet(cid);
        const realPause = c.pause.bind(c);
        c.pause = (async () => {
          if (refused++ < 2)
            throw Object.assign(
              new Error(`(HTTP code 500) server error - Cannot pause container ${cid}: OCI runtime pause failed: unable to freeze: unknown`),
              { statusCode: 500 },
            );
          return realPause();
        }) as typeof c.pause;
        return c;
      };
      try {
        await d.pause(w);
        expect(refused).toBe(3);
        expect((await dockerClient().getContainer(desc.location.containerId!).inspect()).State.Paused).toBe(true);
        // Any other engine failure is not tried again.
        await d.resume(w);
        refused = -10;
        d.docker.getContainer = (cid: string) => {
          const c = realGet(cid);
          c.pause = (async () => {
            refused++;
            throw Object.assign(new Error("(HTTP code 500) server error - something else"), { statusCode: 500 });
          }) as typeof c.pause;
          return c;
        };
        await expect(d.pause(w)).rejects.toThrow(/something else/);
        expect(refused).toBe(-9);
      } finally {
        d.docker.getContainer = realGet;
        await d.destroy(w, { deleteData: true });
      }
    });

    it("restarts a stopped container on resume", async () => {
      const d = driver();
      const w = id();
      const desc = await d.create({ workspaceId: w, managedBy: "runtime" });
      await dockerClient().getContainer(desc.location.containerId!).stop({ t: 0 });
      expect((await d.find(w))?.state).toBe("stopped");
      await d.resume(w);
      expect((await d.find(w))?.state).toBe("running");
    });

    it("refuses bad ids, unknown ids and a foreign container holding the name", async () => {
      const d = driver();
      await expectCode(d.create({ workspaceId: "../etc", managedBy: "runtime" }), "invalid_argument", /workspaceId/);
      await expectCode(d.find("a b"), "invalid_argument", /workspaceId/);
      await expectCode(d.connect(uniqueId("nobody")), "not_found", /create it first/);
      await expectCode(d.resume(uniqueId("nobody")), "not_found");
      const w = id("foreign");
      const c = await dockerClient().createContainer({ name: containerName(w), Image: BASE_IMAGE, Cmd: ["true"] });
      try {
        await expectCode(d.create({ workspaceId: w, managedBy: "runtime" }), "conflict", /not agent-workspaces/);
        await expectCode(d.destroy(w), "conflict", /not agent-workspaces/);
        expect((await c.inspect()).Name).toBe(`/${containerName(w)}`);
      } finally {
        await c.remove({ force: true });
      }
      expect(() => new DockerDriver({ network: "host" as never })).toThrow(/network/);
    });
  });

  // An ephemeral container: no bind mount, so every file operation runs as an exec in the container.
  describe("sandbox (file operations through exec)", () => {
    let sb: DockerSandbox;
    beforeAll(async () => {
      const d = new DockerDriver({ baseImage: BASE_IMAGE });
      const w = id("sb");
      await d.create({ workspaceId: w, managedBy: "runtime" });
      sb = await d.connect(w);
      expect(sb.fileAccess).toBe("exec");
    });
    afterAll(async () => {
      await sb.close();
    });

    it("keeps stdout and stderr apart, feeds stdin, reports exit codes", async () => {
      const r = await sb.exec(["sh", "-c", "cat; echo to-err >&2; exit 7"], { stdin: "from-stdin" });
      expect(r).toMatchObject({ exitCode: 7, timedOut: false, truncated: false });
      expect(r.stdout.toString()).toBe("from-stdin");
      expect(r.stderr.toString()).toBe("to-err\n");
      expect((await sb.exec(["sh", "-c", 'printf %s "$FOO"'], { env: { FOO: "bar baz" } })).stdout.toString()).toBe("bar baz");
      expect((await sb.exec(["definitely-not-a-command"])).exitCode).toBe(127);
    });

    it("a timeout kills the whole process tree", async () => {
      const t0 = Date.now();
      const r = await sb.exec(["sh", "-c", "sleep 31 & sleep 32; echo never"], { timeoutMs: 500 });
      expect(r.timedOut).toBe(true);
      expect(r.exitCode).toBe(-1);
      expect(Date.now() - t0).toBeLessThan(5000);
      const left = await sb.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '"]);
      expect(left.stdout.toString()).not.toMatch(/sleep 3[12]/);
    });

    it("an abort signal stops a command; output is capped", async () => {
      const ac = new AbortController();
      setTimeout(() => ac.abort(), 300);
      expect((await sb.exec(["sleep", "30"], { signal: ac.signal })).timedOut).toBe(true);
      const big = await sb.exec(["sh", "-c", "head -c 100000 /dev/zero"], { maxOutputBytes: 1000 });
      expect(big.stdout.length).toBe(1000);
      expect(big.truncated).toBe(true);
    });

    it("runs in a workspace-relative cwd and refuses one that escapes", async () => {
      await sb.mkdir("sub/dir");
      expect((await sb.exec(["pwd"], { cwd: "sub/dir" })).stdout.toString().trim()).toBe("/workspace/sub/dir");
      await sb.exec(["ln", "-sfn", "/etc", "etc-link"]);
      await expectCode(sb.exec(["pwd"], { cwd: "etc-link" }), "path_escape");
      await expectCode(sb.exec(["pwd"], { cwd: "missing" }), "not_found");
      await expectCode(sb.exec(["pwd"], { cwd: "../" }), "path_escape");
    });

    it("spawn gives a clean duplex: stdin in, stdout and stderr apart, kill ends it", async () => {
      const p = sb.spawn(["sh", "-c", 'while read l; do echo "out:$l"; echo "err:$l" >&2; done']);
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      p.stdout.on("data", (c: Buffer) => out.push(c));
      p.stderr.on("data", (c: Buffer) => err.push(c));
      p.stdin.write("one\n");
      p.stdin.write("two\n");
      p.stdin.end();
      expect(await p.exited).toBe(0);
      expect(Buffer.concat(out).toString()).toBe("out:one\nout:two\n");
      expect(Buffer.concat(err).toString()).toBe("err:one\nerr:two\n");
      const q = sb.spawn(["sleep", "60"]);
      setTimeout(() => q.kill(), 200);
      expect(await q.exited).toBeNull();
    });

    it("file operations resolve symlinks in the container and refuse escapes", async () => {
      await sb.exec(["ln", "-sfn", "/etc", "out"]);
      await sb.exec(["ln", "-sfn", "/etc/passwd", "passwd-link"]);
      await expectCode(sb.readFile("out/passwd"), "path_escape");
      await expectCode(sb.readFile("passwd-link"), "path_escape");
      await expectCode(sb.writeFile("out/evil", "x"), "path_escape");
      await expectCode(sb.writeFile("passwd-link", "x"), "path_escape");
      await expectCode(sb.list("out"), "path_escape");
      await expectCode(sb.appendFile("out/x", "x"), "path_escape");
      await expectCode(sb.mkdir("out/x"), "path_escape");
      await expectCode(sb.rename("passwd-link", "out/p"), "path_escape");
      await expectCode(sb.readFile("../etc/passwd"), "path_escape");
      await expectCode(sb.readFile("/etc/passwd"), "path_escape");
      expect((await sb.stat("out"))?.type).toBe("symlink");
      // Links that stay inside are followed.
      await sb.writeFile("real/f.txt", "inside");
      await sb.exec(["ln", "-sfn", "/workspace/real", "inlink"]);
      expect((await sb.readFile("inlink/f.txt")).toString()).toBe("inside");
      await sb.remove("out");
      expect(await sb.stat("out")).toBeNull();
      expect((await sb.exec(["test", "-d", "/etc"])).exitCode).toBe(0);
    });

    it("writes atomically, exclusive writes conflict, and big files round-trip", async () => {
      const data = Buffer.alloc(3 * 1024 * 1024 + 7);
      for (let i = 0; i < data.length; i++) data[i] = (i * 31) % 251;
      await sb.writeFile("big/blob.bin", data, { mode: 0o600 });
      expect((await sb.readFile("big/blob.bin")).equals(data)).toBe(true);
      expect((await sb.list("big")).map((e) => e.name)).toEqual(["blob.bin"]);
      expect((await sb.exec(["stat", "-c", "%a", "big/blob.bin"])).stdout.toString().trim()).toBe("600");
      await sb.writeFile("once.txt", "first", { exclusive: true });
      await expectCode(sb.writeFile("once.txt", "second", { exclusive: true }), "conflict");
      expect((await sb.readFile("once.txt")).toString()).toBe("first");
      await expectCode(sb.readFile("big/blob.bin", { maxBytes: 10 }), "too_large");
      await expectCode(sb.readFile("big"), "invalid_argument", /directory/);
      await expectCode(sb.readFile("nope.txt"), "not_found");
      await expectCode(sb.list("once.txt"), "invalid_argument", /not a directory/);
      await expectCode(sb.remove(""), "path_escape");
    });

    it("appends, renames without clobbering, lists odd names", async () => {
      await Promise.all([1, 2, 3, 4].map((n) => sb.appendFile("log/a.jsonl", `line ${n}\n`)));
      expect((await sb.readFile("log/a.jsonl")).toString().split("\n").filter(Boolean).sort()).toEqual(["line 1", "line 2", "line 3", "line 4"]);
      await sb.writeFile("r/a", "a");
      await sb.writeFile("r/b", "b");
      await expectCode(sb.rename("r/a", "r/b"), "conflict");
      await sb.rename("r/a", "r2/c");
      expect((await sb.readFile("r2/c")).toString()).toBe("a");
      await expectCode(sb.rename("r/zz", "r/yy"), "not_found");
      await sb.writeFile("odd/with space\tand tab", "x");
      expect((await sb.list("odd")).map((e) => e.name)).toEqual(["with space\tand tab"]);
    });

    it("copyIn streams a host tree in, skipping symlinks, and refuses an existing target", async () => {
      const src = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-copyin-"));
      try {
        await fs.mkdir(path.join(src, "d/e"), { recursive: true });
        await fs.writeFile(path.join(src, "d/e/f.txt"), "deep");
        await fs.writeFile(path.join(src, "top.txt"), "top");
        await fs.symlink("/etc/passwd", path.join(src, "leak"));
        await sb.copyIn(src, "copied/tree");
        expect((await sb.readFile("copied/tree/d/e/f.txt")).toString()).toBe("deep");
        expect((await sb.list("copied/tree")).map((e) => e.name).sort()).toEqual(["d", "top.txt"]);
        await expectCode(sb.copyIn(src, "copied/tree"), "conflict");
        await sb.copyIn(path.join(src, "top.txt"), "single.txt");
        expect((await sb.readFile("single.txt")).toString()).toBe("top");
        expect((await sb.list("copied")).map((e) => e.name)).toEqual(["tree"]);
      } finally {
        await fs.rm(src, { recursive: true, force: true });
      }
    });
  });

  describe("sandbox (file operations through the bind mount)", () => {
    it("uses the host folder when the engine shares it, still confined", async () => {
      const d = driver();
      const w = id("host");
      await d.create({ workspaceId: w, managedBy: "runtime" });
      const sb = await d.connect(w);
      expect(sb.fileAccess).toBe("host");
      await sb.writeFile("sub/f.txt", "via host");
      expect((await sb.exec(["cat", "sub/f.txt"])).stdout.toString()).toBe("via host");
      await sb.exec(["sh", "-c", "echo from-container > sub/g.txt; ln -s /etc/passwd sub/leak; ln -s /workspace/sub/g.txt sub/abs"]);
      expect((await sb.readFile("sub/g.txt")).toString()).toBe("from-container\n");
      await expectCode(sb.readFile("sub/leak"), "path_escape");
      await expectCode(sb.writeFile("sub/leak", "x"), "path_escape");
      // An absolute link means a container path: the runner resolves it inside the container, as in exec mode.
      expect((await sb.readFile("sub/abs")).toString()).toBe("from-container\n");
      expect((await sb.exec(["pwd"], { cwd: "sub" })).stdout.toString().trim()).toBe("/workspace/sub");
      await expectCode(sb.exec(["pwd"], { cwd: "sub/leak" }), "path_escape");
      expect((await fs.readdir(path.join(basedir, w))).filter((n) => n.startsWith(".agentws-probe"))).toEqual([]);
      // The host-folder fast paths are offered, and confined like the rest.
      await sb.createFile!("sub/claimed.txt", "once");
      await expectCode(sb.createFile!("sub/claimed.txt", "twice"), "conflict");
      await expectCode(sb.createFile!("sub/leak/x.txt", "x"), "path_escape");
      expect((await sb.exec(["cat", "sub/claimed.txt"])).stdout.toString()).toBe("once");
      expect((await sb.readDirTyped!("sub")).map((e) => e.name).sort()).toEqual(["abs", "claimed.txt", "f.txt", "g.txt", "leak"]);
    });
  });

  describe("workspace", () => {
    const mcp = { name: "echo", transport: { type: "stdio" as const, command: "node", args: [ECHO] } };
    const open = (workspaceId: string, extra: Partial<ConstructorParameters<typeof DockerWorkspace>[0]> = {}) =>
      new DockerWorkspace({ workspaceId, basedir, baseImage: BASE_IMAGE, readOnlyPaths: [ROOT], ...extra });

    async function checksums(ws: DockerWorkspace): Promise<string> {
      const r = await ws.getBackend().exec(["sh", "-c", "find . -type f ! -path './.agentws*' -print0 | sort -z | xargs -0 sha256sum"]);
      expect(r.exitCode).toBe(0);
      return r.stdout.toString();
    }

    it("pause then resume keeps every file and the MCP registrations", async () => {
      const w = id("pause");
      const ws = open(w);
      await ws.initialize();
      expect(ws.ensureOutcome).toBe("created");
      await ws.addMcp(mcp, { agentId: "a1" });
      const [handle] = await ws.listMcps({ agentId: "a1" });
      expect((await handle!.callTool("echo", { text: "hi" })).output).toBe("hi");
      await ws.getBackend().writeFile("data/notes.md", "# notes\n");
      await ws.getBackend().exec(["sh", "-c", "head -c 50000 /dev/urandom > data/random.bin"]);
      const before = await checksums(ws);
      expect(before).toMatch(/random\.bin/);
      await ws.close();
      expect((await ws.driver.find(w))?.state).toBe("paused");

      const again = open(w);
      await again.initialize();
      try {
        expect(again.ensureOutcome).toBe("resumed");
        expect(await checksums(again)).toBe(before);
        const handles = await again.listMcps({ agentId: "a1" });
        expect(handles.map((h) => h.name)).toEqual(["echo"]);
        expect((await handles[0]!.callTool("add", { a: 2, b: 3 })).output).toBe("5");
      } finally {
        await again.close();
      }
    });

    it("a service restart (new process, same basedir) reattaches to the same container and files", async () => {
      const w = id("restart");
      const script = path.join(basedir, `restart-${w}.mts`);
      await fs.writeFile(
        script,
        `import { DockerWorkspace } from ${JSON.stringify(path.join(ROOT, "sdk/backends/docker/index.ts"))};
const ws = new DockerWorkspace({ workspaceId: ${JSON.stringify(w)}, basedir: ${JSON.stringify(basedir)}, baseImage: ${JSON.stringify(BASE_IMAGE)}, readOnlyPaths: [${JSON.stringify(ROOT)}], teardown: "keep" });
await ws.initialize();
await ws.getBackend().writeFile("from-first-process.txt", String(process.pid));
process.stdout.write(JSON.stringify({ outcome: ws.ensureOutcome, container: (ws.getBackend() as { containerId: string }).containerId }));
await ws.close();
`,
      );
      const first = JSON.parse((await run(process.execPath, ["--import", "tsx", script], { cwd: ROOT, env: process.env })).stdout) as {
        outcome: string;
        container: string;
      };
      expect(first.outcome).toBe("created");
      const second = JSON.parse((await run(process.execPath, ["--import", "tsx", script], { cwd: ROOT, env: process.env })).stdout) as {
        outcome: string;
        container: string;
      };
      expect(second).toEqual({ outcome: "reattached", container: first.container });
      const ws = open(w);
      await ws.initialize();
      try {
        expect((ws.getBackend() as DockerSandbox).containerId).toBe(first.container);
        expect(Number((await ws.getBackend().readFile("from-first-process.txt")).toString())).toBeGreaterThan(0);
      } finally {
        await ws.close();
      }
      expect(await containersFor(w)).toHaveLength(1);
    });

    it("an image change recreates a persistent container and keeps its files", async () => {
      const w = id("img");
      const ws = open(w);
      await ws.initialize();
      await ws.getBackend().writeFile("kept.txt", "yes");
      const firstImage = (await ws.driver.find(w))!.location.image;
      await ws.close();
      const changed = open(w, { nodeVersion: "18" });
      await changed.initialize();
      try {
        expect(changed.ensureOutcome).toBe("recreated");
        expect((await changed.driver.find(w))!.location.image).not.toBe(firstImage);
        expect((await changed.getBackend().readFile("kept.txt")).toString()).toBe("yes");
      } finally {
        await changed.close();
      }
    });

    it("an ephemeral container keeps files across pause and is gone after destroy", async () => {
      const w = id("eph");
      const ws = new DockerWorkspace({ workspaceId: w, baseImage: BASE_IMAGE });
      await ws.initialize();
      expect(ws.getBackend().persistent).toBe(false);
      await ws.getBackend().writeFile("scratch.txt", "tmp");
      await ws.close();
      const again = new DockerWorkspace({ workspaceId: w, baseImage: BASE_IMAGE, teardown: "destroy" });
      await again.initialize();
      expect((await again.getBackend().readFile("scratch.txt")).toString()).toBe("tmp");
      await again.close();
      expect(await again.driver.find(w)).toBeNull();
    });

    it("a paused workspace's stale handle says how to recover", async () => {
      const w = id();
      const ws = open(w);
      await ws.initialize();
      const sb = ws.getBackend();
      await ws.close();
      // Refused by the handle itself (a closed workspace takes no operation), never sent to the paused container.
      await expectCode(sb.exec(["true"]), "closed", /paused.*initialize/);
    });

    it("rejects bad options naming the field", () => {
      expect(() => new DockerWorkspace({ basedir: "", baseImage: BASE_IMAGE })).toThrow(/basedir/);
      expect(() => new DockerWorkspace({ network: "wifi" as never })).toThrow(/network/);
      expect(() => new DockerWorkspace({ teardown: "explode" as never })).toThrow(/teardown/);
      expect(() => new DockerWorkspace({ env: { "BAD-NAME": "x" } })).toThrow(/env/);
    });
  });
});
