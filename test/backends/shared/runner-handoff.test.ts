/**
 * The host's side of the runner's descriptor hand-off (sdk/kit/runner/handoff.ts), against
 * real processes holding real descriptors: only the very inode the runner reported is read or written,
 * never a special file, and a pid that is not the runner's is not taken for it.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { closeSync, openSync, promises as fs, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { matchRunnerPid, openRunnerPipes, readHandedOff, writeHandedOff } from "../../../sdk/kit/runner/handoff.js";
import { RUNNER_SOURCE, RunnerClient, runnerArgv, spawnThroughRunner, type RunnerTransport } from "../../../sdk/kit/runner/index.js";

/** The runner as a plain host process over `root`, offering the hand-off with the pid `hostPid` picks. */
function handingRunner(root: string, hostPid: (child: number, nsPid: number) => Promise<number | undefined>, relayed = false): RunnerTransport {
  const [cmd, ...args] = runnerArgv("python3", root, RUNNER_SOURCE);
  const child = spawn(cmd!, args, { stdio: ["pipe", "pipe", "pipe"], detached: true });
  return {
    stdin: child.stdin!,
    stdout: child.stdout!,
    pid: child.pid,
    exited: new Promise((resolve) => child.once("close", () => resolve({ why: "" }))),
    kill: () => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // Already gone (ESRCH): nothing left to kill.
      }
    },
    runnerHostPid: (ns) => hostPid(child.pid!, ns),
    hostDevice: statSync(root, { bigint: true }).dev,
    relayed,
  };
}

const MAX = 1 << 30;

describe("runner descriptor hand-off", () => {
  let dir: string;
  const kids: ChildProcess[] = [];
  /** A process holding `file` (or a pipe) as its fd 0. */
  const holder = (file?: string, flags = "r"): ChildProcess => {
    const c = spawn("sleep", ["60"], { stdio: [file ? openSync(file, flags) : "pipe", "ignore", "ignore"] });
    kids.push(c);
    return c;
  };
  const idOf = (p: string) => {
    const st = statSync(p, { bigint: true });
    return { dev: st.dev, ino: st.ino };
  };
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-handoff-"));
    await fs.writeFile(path.join(dir, "a"), "the runner's file");
    await fs.writeFile(path.join(dir, "b"), "another file");
  });
  afterAll(async () => {
    for (const c of kids) c.kill("SIGKILL");
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("reads the reported inode, and refuses a descriptor that is another file", async () => {
    const a = path.join(dir, "a");
    const c = holder(a);
    expect((await readHandedOff(c.pid!, { fd: 0, ...idOf(a) }, 17, MAX, idOf(a).dev)).toString()).toBe("the runner's file");
    await expect(readHandedOff(c.pid!, { fd: 0, ...idOf(path.join(dir, "b")) }, 12, MAX, idOf(a).dev)).rejects.toThrow(/not the runner's file/);
  });

  it("bounds a read by maxBytes even when the file grew past the size reported", async () => {
    const a = path.join(dir, "grown");
    await fs.writeFile(a, Buffer.alloc(200_000, 1));
    const c = holder(a);
    await expect(readHandedOff(c.pid!, { fd: 0, ...idOf(a) }, 10, 100_000, idOf(a).dev)).rejects.toMatchObject({ code: "TOOBIG" });
  });

  it("never writes to an inode other than the reported one", async () => {
    const a = path.join(dir, "w");
    await fs.writeFile(a, "old");
    const c = holder(a, "r+");
    await expect(writeHandedOff(c.pid!, { fd: 0, ...idOf(path.join(dir, "b")) }, Buffer.from("new"), idOf(a).dev)).rejects.toThrow(/not the runner's file/);
    expect(await fs.readFile(a, "utf8")).toBe("old");
    expect(await fs.readFile(path.join(dir, "b"), "utf8")).toBe("another file");
    await writeHandedOff(c.pid!, { fd: 0, ...idOf(a) }, Buffer.from("new"), idOf(a).dev);
    expect(await fs.readFile(a, "utf8")).toBe("new");
  });

  it("refuses a pipe without blocking, whatever inode numbers it claims", async () => {
    const c = holder();
    const st = await fs.stat(`/proc/${c.pid}/fd/0`, { bigint: true });
    // Refused at open (ENXIO) or after fstat: either way an error, not a read that waits for a writer.
    await expect(readHandedOff(c.pid!, { fd: 0, dev: st.dev, ino: st.ino }, 10, MAX, st.dev)).rejects.toThrow(/ENXIO|not the runner's file/);
  });

  it("never reads what the runner could not: another device (/proc/kallsyms), an O_PATH descriptor, a write-only one", async () => {
    const a = path.join(dir, "a");
    const dev = idOf(a).dev;
    // The runner's own numbers for kallsyms, and the workspace's device as the runner would claim it: refused by the host's.
    const k = holder("/proc/kallsyms");
    const ks = statSync("/proc/kallsyms", { bigint: true });
    await expect(readHandedOff(k.pid!, { fd: 0, dev: ks.dev, ino: ks.ino }, 10, MAX, dev)).rejects.toThrow(/not the runner's file/);
    // A descriptor that grants no read (O_PATH, or opened write-only) on a workspace file the host could read.
    const secret = path.join(dir, "secret");
    await fs.writeFile(secret, "root only", { mode: 0o600 });
    const o = spawn("python3", ["-c", "import os,sys,time; os.dup2(os.open(sys.argv[1], os.O_PATH), 0); time.sleep(60)", secret], {
      stdio: ["ignore", "ignore", "ignore"],
    });
    kids.push(o);
    for (let i = 0; i < 100 && !(await fs.readlink(`/proc/${o.pid}/fd/0`).catch(() => "")).endsWith("secret"); i++) await new Promise((r) => setTimeout(r, 20));
    await expect(readHandedOff(o.pid!, { fd: 0, ...idOf(secret) }, 9, MAX, dev)).rejects.toThrow(/not the runner's file/);
    const w = holder(secret, "a");
    await expect(readHandedOff(w.pid!, { fd: 0, ...idOf(secret) }, 9, MAX, dev)).rejects.toThrow(/not the runner's file/);
    // A read-only descriptor is not written through, and a size over the cap is refused before any allocation.
    const r = holder(secret);
    await expect(writeHandedOff(r.pid!, { fd: 0, ...idOf(secret) }, Buffer.from("x"), dev)).rejects.toThrow(/not the runner's file/);
    await expect(readHandedOff(r.pid!, { fd: 0, ...idOf(secret) }, 2 ** 40, MAX, dev)).rejects.toMatchObject({ code: "TOOBIG" });
    expect((await readHandedOff(r.pid!, { fd: 0, ...idOf(secret) }, 9, MAX, dev)).toString()).toBe("root only");
    expect(await fs.readFile(secret, "utf8")).toBe("root only");
  });

  it("takes a pid for the runner only when its own view of its pid is the one reported", async () => {
    const c = holder();
    const own = (await fs.readFile(`/proc/${c.pid}/status`, "utf8"))
      .match(/^NSpid:\s*(.*)$/m)![1]!
      .trim()
      .split(/\s+/)
      .map(Number);
    expect(await matchRunnerPid([c.pid!], own[own.length - 1]!)).toBe(c.pid);
    expect(await matchRunnerPid([c.pid!], own[own.length - 1]! + 1)).toBeUndefined();
    expect(await matchRunnerPid([2 ** 22 + 12345], 1)).toBeUndefined();
  });

  it("big files cross by hand-off with the runner's pid, and over the pipe when the pid is not the runner's", async () => {
    const big = Buffer.alloc(3 << 20);
    for (let i = 0; i < big.length; i += 4096) big.writeUInt32BE(i, i);
    const cases: [string, (child: number, ns: number) => Promise<number | undefined>][] = [
      ["runner", async (child, ns) => matchRunnerPid([child], ns)],
      // A pid whose descriptors are not the runner's: the inode check refuses it and the pipe carries the bytes.
      ["stranger", async () => process.pid],
    ];
    for (const [name, pick] of cases) {
      const root = await fs.mkdtemp(path.join(dir, `${name}-`));
      const client = new RunnerClient(handingRunner(root, pick));
      try {
        await client.ready;
        for (let round = 0; round < 3; round++) {
          // Round 0 takes the two-step hand-off, later rounds the spare made ahead.
          await client.write("f.bin", "w", big, round === 0 ? 0o750 : undefined);
          expect((await fs.readFile(path.join(root, "f.bin"))).equals(big)).toBe(true);
          expect((await client.read("f.bin", undefined)).equals(big)).toBe(true);
        }
        expect((await fs.stat(path.join(root, "f.bin"))).mode & 0o777).toBe(0o750);
        await expect(client.write("f.bin", "x", big, undefined)).rejects.toMatchObject({ code: "EEXIST" });
        await expect(client.read("f.bin", 1 << 20)).rejects.toMatchObject({ code: "TOOBIG" });
        // No temp file is left beside the target, and the old content survived the refused exclusive write.
        expect(await fs.readdir(root)).toEqual(["f.bin"]);
        expect((await fs.readFile(path.join(root, "f.bin"))).equals(big)).toBe(true);
      } finally {
        await client.stop();
      }
    }
  });

  it("opens a private pipe only when the descriptor is a FIFO with the reported inode", async () => {
    const file = path.join(dir, "a");
    const f = holder(file);
    const ino = String(statSync(file).ino);
    expect(() => openRunnerPipes(f.pid!, ["0", ino, "0", ino])).toThrow(/not its pipe/);
    const fifo = path.join(dir, "fifo");
    execFileSync("mkfifo", [fifo]);
    const p = holder(fifo, "r+");
    const pino = String(statSync(fifo).ino);
    expect(() => openRunnerPipes(p.pid!, ["0", String(BigInt(pino) + 1n), "0", pino])).toThrow(/not its pipe/);
    expect(() => openRunnerPipes(p.pid!, ["0", "x", "0", pino])).toThrow(/bad pipe pair/);
    const both = openRunnerPipes(p.pid!, ["0", pino, "0", pino]);
    closeSync(both.w);
    closeSync(both.r);
  });

  it("a relayed transport moves to the runner's private pipe pair with the runner's pid, and stays put with another", async () => {
    const big = Buffer.alloc(2 << 20, 9);
    const cases: [string, (child: number, ns: number) => Promise<number | undefined>, string][] = [
      ["runner", async (child, ns) => matchRunnerPid([child], ns), "private"],
      ["stranger", async () => process.pid, "transport"],
    ];
    for (const [name, pick, channel] of cases) {
      const root = await fs.mkdtemp(path.join(dir, `relayed-${name}-`));
      const client = new RunnerClient(handingRunner(root, pick, true));
      try {
        // Calls made before the move finish where they started; the rest take the pair.
        const early = client.exec({ argv: ["sh", "-c", "sleep 0.3; echo early"], cwd: "", env: {}, maxOutputBytes: 64 });
        await client.ready;
        for (let i = 0; i < 100 && client.channel !== channel; i++) await new Promise((r) => setTimeout(r, 10));
        expect(client.channel, name).toBe(channel);
        const p = spawnThroughRunner(Promise.resolve({ client }), { argv: ["cat"], cwd: "", env: {} });
        const echoed: Buffer[] = [];
        p.stdout.on("data", (c: Buffer) => echoed.push(c));
        p.stdin.end(big);
        const results = await Promise.all([
          early,
          ...Array.from({ length: 8 }, (_, i) => client.exec({ argv: ["echo", `n${i}`], cwd: "", env: {}, maxOutputBytes: 64 })),
          ...Array.from({ length: 4 }, (_, i) => client.write(`f${i}.bin`, "w", big, undefined).then(() => client.read(`f${i}.bin`, undefined))),
        ]);
        expect(results.slice(0, 9).map((r) => (r as { stdout: Buffer }).stdout.toString())).toEqual([
          "early\n",
          ...Array.from({ length: 8 }, (_, i) => `n${i}\n`),
        ]);
        for (const r of results.slice(9)) expect((r as Buffer).equals(big)).toBe(true);
        expect(await p.exited).toBe(0);
        expect(Buffer.concat(echoed).equals(big)).toBe(true);
      } finally {
        await client.stop();
      }
    }
  });
});
