/**
 * Attack: special files planted in the workspace. A FIFO nobody writes makes a blocking open or
 * read wait forever (in libuv's thread pool: four of them stall every file call of the process);
 * a FIFO with a writer, a /dev/zero-like device or a growing file feed a read without end. Every
 * file call must refuse what is not a regular file at once, and stop reading at its cap.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LocalWorkspace } from "../../sdk/backends/local/index.js";
import type { WorkspaceTool } from "../../sdk/workspace/tools/common.js";

/** Settles `p`, or says "hung" when it does not within `ms`: a guard against a hang, not a timing assertion. */
async function settleOrHang<T>(p: Promise<T>, ms = 8000): Promise<{ value?: T; error?: unknown; hung?: true }> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<{ hung: true }>((resolve) => (timer = setTimeout(() => resolve({ hung: true }), ms)));
  try {
    return await Promise.race([
      p.then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      ),
      guard,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Opens each FIFO for writing without blocking and closes it: releases any reader stuck in open(). */
function releaseFifos(fifos: string[]): void {
  const script = "import os,sys\nfor p in sys.argv[1:]:\n  try: os.close(os.open(p, os.O_WRONLY | os.O_NONBLOCK))\n  except OSError: pass";
  execFileSync("python3", ["-c", script, ...fifos]);
}

describe("special files in a LocalWorkspace", () => {
  let base: string;
  let root: string;
  let ws: LocalWorkspace;
  let tools: Map<string, WorkspaceTool>;
  const fifos: string[] = [];
  const children: ChildProcess[] = [];
  const host = (rel: string) => path.join(root, rel);
  const mkfifo = (rel: string) => {
    execFileSync("mkfifo", [host(rel)]);
    fifos.push(host(rel));
  };

  beforeAll(async () => {
    base = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-special-"));
    root = path.join(base, "ws");
    ws = new LocalWorkspace({ workdir: root });
    await ws.initialize();
    tools = new Map(ws.listTools().map((t) => [t.name, t]));
  });

  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null) c.kill("SIGKILL");
    releaseFifos(fifos);
  });

  afterAll(async () => {
    await ws?.close();
    await fs.rm(base, { recursive: true, force: true });
  });

  it("Read, Write and Edit of a FIFO without a writer come back at once as error results", async () => {
    mkfifo("lonely.fifo");
    for (const [name, input] of [
      ["Read", { file_path: "lonely.fifo" }],
      ["Write", { file_path: "lonely.fifo", content: "x" }],
      ["Edit", { file_path: "lonely.fifo", old_string: "a", new_string: "b" }],
    ] as const) {
      const r = await settleOrHang(tools.get(name)!.execute(input));
      expect(r.hung, name).toBeUndefined();
      expect(r.value, name).toMatchObject({ ok: false, output: expect.stringMatching(/FIFO|not a regular file/) });
    }
    const sandbox = ws.getBackend();
    expect((await settleOrHang(sandbox.readFile("lonely.fifo"))).error).toMatchObject({ code: "invalid_argument" });
    expect((await settleOrHang(sandbox.appendFile("lonely.fifo", "x"))).error).toMatchObject({ code: "invalid_argument" });
  });

  it("a FIFO with a writer behind it is refused, not read without end", async () => {
    mkfifo("fed.fifo");
    // O_RDWR: the writer never blocks in open and never gets SIGPIPE; it writes as fast as it is read.
    const feeder = spawn("python3", ["-c", "import os,sys\nfd=os.open(sys.argv[1], os.O_RDWR)\nwhile True: os.write(fd, b'x'*65536)", host("fed.fifo")], {
      stdio: "ignore",
    });
    children.push(feeder);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const r = await settleOrHang(tools.get("Read")!.execute({ file_path: "fed.fifo" }));
    expect(r.hung).toBeUndefined();
    expect(r.value).toMatchObject({ ok: false, output: expect.stringMatching(/FIFO/) });
    const appended = await settleOrHang(ws.getBackend().appendFile("fed.fifo", "x"));
    expect(appended.error).toMatchObject({ code: "invalid_argument" });
  });

  it("a device (mknod /dev/zero where allowed; a link to it always) is refused", async () => {
    await fs.symlink("/dev/zero", host("zero-link"));
    const viaLink = await settleOrHang(
      tools
        .get("Read")!
        .execute({ file_path: "zero-link" })
        .catch((e: unknown) => e),
    );
    expect(viaLink.hung).toBeUndefined();
    expect(viaLink.value).toMatchObject({ code: "path_escape" });
    let made = true;
    try {
      execFileSync("mknod", [host("zero"), "c", "1", "5"], { stdio: "ignore" });
    } catch {
      made = false;
    }
    if (!made) return void console.log("mknod not permitted here; device node case skipped");
    const r = await settleOrHang(tools.get("Read")!.execute({ file_path: "zero" }));
    expect(r.hung).toBeUndefined();
    expect(r.value).toMatchObject({ ok: false, output: expect.stringMatching(/device/) });
    expect((await settleOrHang(ws.getBackend().readFile("zero", { maxBytes: 1024 }))).error).toMatchObject({ code: "invalid_argument" });
  });

  it("listSkills, skill seeding and offload skip or refuse FIFOs without blocking", async () => {
    await fs.mkdir(host("skills/default/good"), { recursive: true });
    await fs.writeFile(host("skills/default/good/SKILL.md"), "---\nname: good\ndescription: a good skill\n---\nbody\n");
    await fs.mkdir(host("skills/default/trap"), { recursive: true });
    mkfifo("skills/default/trap/SKILL.md");
    await fs.mkdir(host("skills/.seed/seeded"), { recursive: true });
    await fs.writeFile(host("skills/.seed/seeded/SKILL.md"), "---\nname: seeded\ndescription: from the seed\n---\nbody\n");
    mkfifo("skills/.seed/seeded/pipe");
    const listed = await settleOrHang(ws.listSkills());
    expect(listed.hung).toBeUndefined();
    expect((listed.value ?? []).map((s) => s.name)).toContain("good");
    const seeded = await settleOrHang(ws.listSkills({ agentId: "fresh-agent" }));
    expect(seeded.hung).toBeUndefined();
    expect((seeded.value ?? []).map((s) => s.name)).toContain("seeded");
    expect((await fs.lstat(host("skills/fresh-agent/seeded/SKILL.md"))).isFile()).toBe(true);
    await expect(fs.lstat(host("skills/fresh-agent/seeded/pipe"))).rejects.toMatchObject({ code: "ENOENT" });

    await fs.mkdir(host("sessions/s1"), { recursive: true });
    mkfifo("sessions/s1/context.jsonl");
    const offloaded = await settleOrHang(ws.offloadContext("s1", [{ name: "u", role: "user", content: "hello" }] as never));
    expect(offloaded.hung).toBeUndefined();
    expect(offloaded.error).toMatchObject({ code: "invalid_argument" });
  });

  it("a file growing while it is read stops at the cap", async () => {
    await fs.writeFile(host("growing.log"), "");
    const grower = spawn("python3", ["-c", "import sys\nf=open(sys.argv[1],'ab',0)\nwhile True: f.write(b'y'*65536)", host("growing.log")], {
      stdio: "ignore",
    });
    children.push(grower);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const cap = 256 * 1024;
    for (let i = 0; i < 20; i++) {
      const r = await settleOrHang(ws.getBackend().readFile("growing.log", { maxBytes: cap }));
      expect(r.hung).toBeUndefined();
      if (r.error) expect(r.error).toMatchObject({ code: "too_large" });
      else expect(r.value!.length).toBeLessThanOrEqual(cap);
    }
    grower.kill("SIGKILL");
  });

  it("four parallel Reads of FIFOs do not hold the thread pool: a normal large Read completes meanwhile", async () => {
    const names = [1, 2, 3, 4].map((i) => `parallel-${i}.fifo`);
    for (const n of names) mkfifo(n);
    // Above the synchronous-I/O size, so this read needs the thread pool.
    await fs.writeFile(host("big.txt"), "line\n".repeat(200_000));
    const stuck = names.map((n) => tools.get("Read")!.execute({ file_path: n }));
    const normal = await settleOrHang(tools.get("Read")!.execute({ file_path: "big.txt", limit: 3 }));
    expect(normal.hung).toBeUndefined();
    expect(normal.value).toMatchObject({ ok: true, output: expect.stringContaining("     1\tline") });
    const fifoReads = await settleOrHang(Promise.all(stuck));
    expect(fifoReads.hung).toBeUndefined();
    for (const r of fifoReads.value ?? []) expect(r).toMatchObject({ ok: false });
  });
});
