import { execFileSync, spawn, spawnSync } from "node:child_process";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapSandbox } from "../../../sdk/backends/bubblewrap/sandbox.js";
import { LocalSandbox } from "../../../sdk/kit/host-sandbox.js";
import { cwdError, RUNNER_SOURCE, RunnerClient, RunnerFiles, runnerArgv } from "../../../sdk/kit/runner/index.js";
import { hostRunner } from "../../support/host-runner.js";
import { isWorkspaceError } from "../../../sdk/errors.js";

/** Processes whose command line contains `marker` (NUL-separated argv), host-wide. */
async function processesWith(marker: string): Promise<string[]> {
  const ps = (await fs.readdir("/proc")).filter((p) => /^\d+$/.test(p));
  const lines = await Promise.all(ps.map((p) => fs.readFile(`/proc/${p}/cmdline`, "utf8").catch(() => "")));
  return lines.filter((c) => c.includes(marker));
}
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const uniqueSecs = () => `${50 + Math.floor(Math.random() * 100000) / 100000}`;
async function errorOf(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (e) {
    if (isWorkspaceError(e)) return { code: e.code, message: e.message };
    return { code: `raw:${(e as NodeJS.ErrnoException).code ?? "?"}`, message: String(e) };
  }
  return { code: "ok", message: "" };
}

/** Frames a raw request, as the client does (for tests that must stop half-way through one). */
function frame(fields: string[], payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.from(fields.join("\0"));
  const p = Buffer.alloc(8);
  p.writeUInt32BE(h.length, 0);
  p.writeUInt32BE(payload.length, 4);
  return Buffer.concat([p, h, payload]);
}

describe("runner protocol (host process over a folder)", () => {
  let root: string;
  let client: RunnerClient;
  let files: RunnerFiles;
  beforeAll(async () => {
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "agentws-runner-")));
    client = new RunnerClient(hostRunner(root));
    await client.ready;
    files = new RunnerFiles(async () => ({ client }));
  });
  afterAll(async () => {
    await client.stop();
    await fs.rm(root, { recursive: true, force: true });
  });

  it("multiplexes concurrent execs and file operations by id", async () => {
    const execs = Array.from({ length: 16 }, (_, i) =>
      client.exec({ argv: ["sh", "-c", `sleep 0.0${(16 - i) % 10}; printf out${i}; printf err${i} >&2`], cwd: "", env: {}, maxOutputBytes: 1 << 20 }),
    );
    const writes = Array.from({ length: 16 }, (_, i) => files.writeFile(`c/f${i}.txt`, `body ${i}`.repeat(1000 * (i + 1))));
    const [results] = await Promise.all([Promise.all(execs), Promise.all(writes)]);
    for (const [i, r] of results.entries()) expect([r.exitCode, r.stdout.toString(), r.stderr.toString()]).toEqual([0, `out${i}`, `err${i}`]);
    const reads = await Promise.all(Array.from({ length: 16 }, (_, i) => files.readFile(`c/f${i}.txt`)));
    for (const [i, r] of reads.entries()) expect(r.toString()).toBe(`body ${i}`.repeat(1000 * (i + 1)));
    expect((await files.list("c")).length).toBe(16);
  });

  /** The processes matching `pattern` once they are gone, or after 5 s (the sleeps last 50 s and more): a kill lands, but not instantly under load. */
  async function goneSoon(pattern: string): Promise<string[]> {
    for (let i = 0; i < 50; i++) {
      const left = await processesWith(pattern);
      if (left.length === 0) return left;
      await pause(100);
    }
    return processesWith(pattern);
  }

  it("commands get their own session, their stdio and no other descriptor, the PATH of their own environment, and leave the runner's cwd alone", async () => {
    // A runner started with one more inheritable descriptor (fd 3) than its stdio.
    const [cmd, ...args] = runnerArgv("python3", root, RUNNER_SOURCE);
    const child = spawn(cmd!, args, { stdio: ["pipe", "pipe", "pipe", "pipe"], detached: true });
    const extra = new RunnerClient({
      stdin: child.stdin!,
      stdout: child.stdout!,
      pid: child.pid,
      exited: new Promise((r) => child.once("close", () => r({ why: "" }))),
      kill: () => child.kill("SIGKILL"),
    });
    try {
      await extra.ready;
      const run = (argv: string[], env: Record<string, string> = {}, cwd = "") => extra.exec({ argv, cwd, env, maxOutputBytes: 1 << 16 });
      expect((await fs.readdir(`/proc/${child.pid}/fd`)).includes("3")).toBe(true);
      const fds = await run(["sh", "-c", "ls /proc/$$/fd"]);
      expect(fds.stdout.toString().split("\n").filter(Boolean).sort()).toEqual(["0", "1", "2"]);
      const sid = await run(["sh", "-c", "read -r pid comm state ppid pgrp sid rest < /proc/$$/stat; echo $pid $pgrp $sid"]);
      const [pid, pgrp, session] = sid.stdout.toString().trim().split(" ");
      expect([pgrp, session]).toEqual([pid, pid]);
      await fs.mkdir(path.join(root, "bin", "sub"), { recursive: true });
      await fs.writeFile(path.join(root, "bin", "hello"), "#!/bin/sh\necho hello from $0 in $(pwd -P)\n", { mode: 0o755 });
      await fs.writeFile(path.join(root, "bin", "noexec"), "#!/bin/sh\necho never\n", { mode: 0o644 });
      const found = await run(["hello"], { PATH: `/nonexistent:${root}/bin` }, "bin/sub");
      expect([found.exitCode, found.stdout.toString()]).toEqual([0, `hello from ${root}/bin/hello in ${root}/bin/sub\n`]);
      const missing = await run(["hello"]);
      expect([missing.exitCode, missing.stderr.toString()]).toEqual([127, "hello: No such file or directory\n"]);
      const denied = await run(["noexec"], { PATH: `${root}/bin` });
      expect([denied.exitCode, denied.stderr.toString()]).toEqual([126, "noexec: Permission denied\n"]);
      expect(await fs.readlink(`/proc/${child.pid}/cwd`)).toBe("/");
    } finally {
      await extra.stop();
      await fs.rm(path.join(root, "bin"), { recursive: true, force: true });
    }
  });

  it("kills the whole tree on timeout and at the command's end, setsid escapees included", async () => {
    const secs = uniqueSecs();
    const r = await client.exec({
      argv: ["sh", "-c", `setsid sleep ${secs} >/dev/null 2>&1 & sleep ${secs}`],
      cwd: "",
      env: {},
      maxOutputBytes: 1024,
      timeoutMs: 300,
    });
    expect(r).toMatchObject({ exitCode: -1, timedOut: true });
    expect(await goneSoon(`sleep\0${secs}`)).toEqual([]);
    const later = uniqueSecs();
    const done = await client.exec({
      argv: ["sh", "-c", `setsid sh -c 'sleep ${later}' >/dev/null 2>&1 < /dev/null & echo started`],
      cwd: "",
      env: {},
      maxOutputBytes: 1024,
    });
    expect(done.stdout.toString()).toBe("started\n");
    expect(await goneSoon(`sleep\0${later}`)).toEqual([]);
    expect(await goneSoon(`sleep ${later}`)).toEqual([]);
  });

  it("kills escapees that keep forking and exec'ing while the sweep runs", async () => {
    // A loop that forks a new setsid'd sleeper as fast as it can: children born after one listing of /proc, or
    // caught half-way through execve (an empty environ), must still die.
    const secs = uniqueSecs();
    try {
      const r = await client.exec({
        argv: ["sh", "-c", `setsid sh -c 'while :; do (setsid sh -c "exec sleep ${secs}" &); done' >/dev/null 2>&1 </dev/null & sleep 0.3; echo started`],
        cwd: "",
        env: {},
        maxOutputBytes: 1024,
      });
      expect(r.stdout.toString()).toBe("started\n");
      await pause(300);
      expect(await processesWith(`sleep\0${secs}`)).toEqual([]);
    } finally {
      spawnSync("pkill", ["-9", "-f", `sleep ${secs}`]); // only when the sweep failed: exits 1 on no match
    }
  });

  it("kills an escapee that cleared its environment (no marker) once its command is done", async () => {
    const secs = uniqueSecs();
    try {
      const r = await client.exec({
        argv: ["sh", "-c", `setsid env -i /bin/sleep ${secs} >/dev/null 2>&1 </dev/null & sleep 0.2; echo started`],
        cwd: "",
        env: {},
        maxOutputBytes: 1024,
      });
      expect(r.stdout.toString()).toBe("started\n");
      await pause(300);
      expect(await processesWith(`sleep\0${secs}`)).toEqual([]);
      // Commands that leave nothing cost no sweep, and still run as before.
      expect((await client.exec({ argv: ["true"], cwd: "", env: {}, maxOutputBytes: 10 })).exitCode).toBe(0);
    } finally {
      spawnSync("pkill", ["-9", "-f", `sleep ${secs}`]);
    }
  });

  it("round-trips big files in chunks and caps reads by bytes", async () => {
    const big = Buffer.alloc(40 * 1024 * 1024 + 3);
    for (let i = 0; i < big.length; i += 4096) big[i] = (i / 4096) % 251;
    await files.writeFile("big/blob.bin", big, { mode: 0o640 });
    expect((await files.readFile("big/blob.bin")).equals(big)).toBe(true);
    expect((await fs.stat(path.join(root, "big/blob.bin"))).mode & 0o777).toBe(0o640);
    const e = await errorOf(files.readFile("big/blob.bin", { maxBytes: 1024 }));
    expect(e.code).toBe("too_large");
    await files.appendFile("big/blob.bin", "tail");
    expect((await files.stat("big/blob.bin"))?.size).toBe(big.length + 4);
    // A kept mode survives a replacing write.
    await files.writeFile("big/blob.bin", "small");
    expect((await fs.stat(path.join(root, "big/blob.bin"))).mode & 0o777).toBe(0o640);
  });

  it("never blocks on special files: FIFOs (with or without a writer) and sockets are refused", async () => {
    execFileSync("mkfifo", [path.join(root, "pipe")]);
    const writer = spawn("sh", ["-c", `exec 3>${path.join(root, "pipe")}; while :; do echo x >&3; done`], { stdio: "ignore" });
    try {
      for (const call of [files.readFile("pipe"), files.appendFile("pipe", "x"), files.readFile("pipe", { maxBytes: 10 })]) {
        const e = await errorOf(call);
        expect(e.code).toBe("invalid_argument");
        expect(e.message).toMatch(/not a regular file/);
      }
    } finally {
      writer.kill("SIGKILL");
    }
    execFileSync("python3", ["-c", `import socket; s=socket.socket(socket.AF_UNIX); s.bind(${JSON.stringify(path.join(root, "sock"))})`]);
    expect((await errorOf(files.readFile("sock"))).message).toMatch(/not a regular file/);
    expect((await files.stat("pipe"))?.type).toBe("other");
    // The runner still serves.
    expect((await client.exec({ argv: ["echo", "ok"], cwd: "", env: {}, maxOutputBytes: 64 })).stdout.toString()).toBe("ok\n");
  });

  it("follows links that stay inside by walking their target under the root, refuses the rest", async () => {
    await files.writeFile("real/f.txt", "inside");
    await fs.symlink("real", path.join(root, "rel-link"));
    await fs.symlink(path.join(root, "real"), path.join(root, "abs-link"));
    await fs.symlink("../real/f.txt", path.join(root, "real/up-link"));
    await fs.symlink("loop-b", path.join(root, "loop-a"));
    await fs.symlink("loop-a", path.join(root, "loop-b"));
    await fs.symlink("/etc", path.join(root, "out"));
    await fs.symlink("real/../../", path.join(root, "dotdot"));
    expect((await files.readFile("rel-link/f.txt")).toString()).toBe("inside");
    expect((await files.readFile("abs-link/f.txt")).toString()).toBe("inside");
    expect((await files.readFile("real/up-link")).toString()).toBe("inside");
    await files.writeFile("rel-link/g.txt", "through");
    expect(await fs.readFile(path.join(root, "real/g.txt"), "utf8")).toBe("through");
    for (const p of ["loop-a/x", "out/passwd", "dotdot/etc/passwd"]) expect((await errorOf(files.readFile(p))).code, p).toBe("path_escape");
    expect((await errorOf(files.writeFile("out", "x"))).code).toBe("path_escape");
    expect((await client.exec({ argv: ["pwd"], cwd: "abs-link", env: {}, maxOutputBytes: 64 })).stdout.toString()).toBe(`${root}/real\n`);
    const refused = await client.exec({ argv: ["pwd"], cwd: "out", env: {}, maxOutputBytes: 64 }).catch((e: unknown) => cwdError(e, "out"));
    expect(isWorkspaceError(refused, "path_escape")).toBe(true);
  });

  it("gives the same errors as LocalSandbox over the same folder", async () => {
    const local = new LocalSandbox(root);
    await fs.mkdir(path.join(root, "par"), { recursive: true });
    await fs.writeFile(path.join(root, "par/file"), "x");
    await fs.symlink("/etc/hostname", path.join(root, "par/leaf"));
    await fs.symlink("missing-target", path.join(root, "par/dangling"));
    const cases: [string, (s: LocalSandbox | RunnerFiles) => Promise<unknown>][] = [
      ["read missing", (s) => s.readFile("par/nope")],
      ["read dir", (s) => s.readFile("par")],
      ["read under a file", (s) => s.readFile("par/file/x")],
      ["read leaf out", (s) => s.readFile("par/leaf")],
      ["read dangling", (s) => s.readFile("par/dangling")],
      ["write over a link", (s) => s.writeFile("par/leaf", "x")],
      ["append to a link", (s) => s.appendFile("par/leaf", "x")],
      ["exclusive on existing", (s) => s.writeFile("par/file", "y", { exclusive: true })],
      ["create on existing", (s) => s.createFile!("par/file", "y")],
      ["list missing", (s) => s.list("par/nope")],
      ["list a file", (s) => s.list("par/file")],
      ["list through a link out", (s) => s.list("par/leaf")],
      ["rename missing", (s) => s.rename("par/nope", "par/nope2")],
      ["rename onto existing", (s) => s.rename("par/file", "par/leaf")],
      ["remove root", (s) => s.remove("")],
      ["mkdir through a link out", (s) => s.mkdir("par/leaf/x")],
      ["copyTree onto existing", (s) => s.copyTree!("par", "par/file")],
    ];
    for (const [name, call] of cases) {
      const [a, b] = [await errorOf(call(local)), await errorOf(call(files))];
      expect(b.code, name).toBe(a.code);
      expect(b.message, name).toBe(a.message);
    }
    expect(await files.stat("par/nope")).toBeNull();
    expect(await files.stat("par/leaf")).toMatchObject({ name: "leaf", type: "symlink" });
    const strip = (xs: { name: string; type: string }[]) => xs.map((x) => `${x.name}:${x.type}`).sort();
    expect(strip(await files.list("par"))).toEqual(strip(await local.list("par")));
    expect(strip(await files.readDirTyped("par"))).toEqual(strip(await local.readDirTyped("par")));
  });

  it("a runner killed in the middle of a write leaves the old file intact", async () => {
    const t = hostRunner(root);
    const c = new RunnerClient(t);
    await c.ready;
    await fs.writeFile(path.join(root, "precious.txt"), "old contents");
    // Half of a write: the start frame with some bytes, never the commit.
    t.stdin.write(frame(["w", "77", "precious.txt", "w", "-"], Buffer.alloc(1 << 20, 0x6e)));
    for (let i = 0; i < 100 && !(await fs.readdir(root)).some((n) => n.includes("precious.txt.agentws-tmp")); i++) await pause(10);
    expect((await fs.readdir(root)).some((n) => n.includes("precious.txt.agentws-tmp"))).toBe(true);
    t.kill();
    await c.exited;
    expect(await fs.readFile(path.join(root, "precious.txt"), "utf8")).toBe("old contents");
    await expect(new RunnerFiles(async () => ({ client: c })).readFile("precious.txt")).rejects.toThrow(/runner stopped/);
  });
});

describe("runner in Bubblewrap: restart after a kill mid-call", () => {
  let root: string;
  let sb: BubblewrapSandbox;
  beforeAll(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-runner-bw-"));
    await fs.mkdir(path.join(root, "ws"));
    await fs.mkdir(path.join(root, "tmp"));
    sb = await BubblewrapSandbox.open({ hostRoot: path.join(root, "ws"), hostTmp: path.join(root, "tmp"), network: "none", persistent: true });
  });
  afterAll(async () => {
    await sb.close();
    await fs.rm(root, { recursive: true, force: true });
  });

  it("calls in flight fail, the next call gets a fresh runner, and files are never touched on the host side", async () => {
    await sb.writeFile("a.txt", "one");
    const first = sb.runnerPid!;
    expect(first).toBeGreaterThan(0);
    const running = sb.exec(["sleep", "30"]);
    const big = sb.writeFile("big.bin", Buffer.alloc(64 << 20));
    await pause(50);
    process.kill(-first, "SIGKILL");
    expect((await running).stderr.toString()).toMatch(/runner stopped/);
    const e = await errorOf(big);
    expect(["unavailable", "ok"]).toContain(e.code);
    expect((await sb.readFile("a.txt")).toString()).toBe("one");
    expect(sb.runnerPid).not.toBe(first);
    expect((await sb.exec(["cat", "a.txt"])).stdout.toString()).toBe("one");
    await sb.close();
    // After close no runner outlives the handle: a late call runs on one of its own, stopped after it.
    expect((await sb.readFile("a.txt")).toString()).toBe("one");
    expect(sb.runnerPid).toBeUndefined();
  });
});
