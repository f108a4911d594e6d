import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapSandbox } from "../../../sdk/backends/bubblewrap/sandbox.js";

/** Processes whose command line contains `marker` (NUL-separated argv), host-wide. */
async function processesWith(marker: string): Promise<string[]> {
  const ps = (await fs.readdir("/proc")).filter((p) => /^\d+$/.test(p));
  const lines = await Promise.all(ps.map((p) => fs.readFile(`/proc/${p}/cmdline`, "utf8").catch(() => "")));
  return lines.filter((c) => c.includes(marker));
}
const alive = (pid: number) =>
  fs.stat(`/proc/${pid}`).then(
    () => true,
    () => false,
  );
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const uniqueSecs = () => `${40 + Math.floor(Math.random() * 1000) / 1000}`;

describe("Bubblewrap exec runner (one bwrap per handle)", () => {
  let root: string;
  let sb: BubblewrapSandbox;
  beforeAll(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-bwrap-runner-"));
    await fs.mkdir(path.join(root, "ws"));
    await fs.mkdir(path.join(root, "tmp"));
    await fs.mkdir(path.join(root, "env"));
    sb = await BubblewrapSandbox.open({
      hostRoot: path.join(root, "ws"),
      hostTmp: path.join(root, "tmp"),
      hostEnvDir: path.join(root, "env"),
      network: "none",
      persistent: true,
      env: { SPEC_VAR: "s" },
    });
  });
  afterAll(async () => {
    await sb.close();
    await fs.rm(root, { recursive: true, force: true });
  });

  it("reuses one runner across execs, each with exactly the computed environment", async () => {
    await sb.exec(["true"]);
    const pid = sb.runnerPid;
    expect(pid).toBeGreaterThan(0);
    const a = await sb.exec(["env"], { env: { CALL_VAR: "c" } });
    const b = await sb.exec(["env"]);
    expect(sb.runnerPid).toBe(pid);
    const vars = (r: { stdout: Buffer }) => r.stdout.toString().trim().split("\n").sort();
    expect(vars(a)).toContain("CALL_VAR=c");
    expect(vars(a)).toContain("SPEC_VAR=s");
    expect(vars(b)).not.toContain("CALL_VAR=c");
    expect(vars(b)).toContain("PWD=/workspace");
    expect(vars(b).filter((l) => /VITEST|NODE_OPTIONS|PYTHONSAFEPATH/.test(l))).toEqual([]);
    expect((await sb.exec(["no-such-binary-here"])).exitCode).toBe(127);
    expect((await sb.exec(["/etc"])).exitCode).toBe(126);
    // Strings the kernel cannot take fail that one command, not the runner.
    expect((await sb.exec(["echo", "a\0b"])).exitCode).toBe(127);
    expect((await sb.exec(["true"], { env: { "A=B": "x" } })).exitCode).toBe(127);
    expect((await sb.exec(["true"], { env: { A: "x\0y" } })).exitCode).toBe(127);
    // A lone surrogate becomes U+FFFD, as Node's own spawn encodes it.
    expect((await sb.exec(["echo", "\ud800"])).stdout.toString()).toBe("\ufffd\n");
    expect(sb.runnerPid).toBe(pid);
  });

  it("multiplexes concurrent execs, stdout and stderr apart, with output that looks like protocol frames", async () => {
    // Raw bytes shaped like a frame header (lengths, JSON) on stdout and stderr must reach the caller verbatim.
    const script =
      "import sys,struct; h=b'{\"id\": 1, \"exit\": 0}'; sys.stdout.buffer.write(struct.pack('>II',len(h),0)+h+b'\\x00'*9); sys.stderr.write('E%s' % sys.argv[1])";
    const runs = await Promise.all(
      Array.from({ length: 12 }, (_, i) => sb.exec(["python3", "-c", `import time; time.sleep(${(12 - i) * 0.01}); ${script}`, String(i)])),
    );
    for (const [i, r] of runs.entries()) {
      expect(r.exitCode).toBe(0);
      expect(r.stderr.toString()).toBe(`E${i}`);
      expect(r.stdout.subarray(8, 8 + 20).toString()).toBe('{"id": 1, "exit": 0}');
      expect(r.stdout.length).toBe(8 + 20 + 9);
    }
  });

  it("feeds large stdin, returns large output, and caps each stream", async () => {
    const big = Buffer.alloc(3_000_000, 0x61);
    expect((await sb.exec(["wc", "-c"], { stdin: big })).stdout.toString().trim()).toBe("3000000");
    const r = await sb.exec(["head", "-c", "5000000", "/dev/zero"]);
    expect(r.stdout.length).toBe(5_000_000);
    const capped = await sb.exec(["sh", "-c", "head -c 100000 /dev/zero; head -c 7 /dev/zero >&2"], { maxOutputBytes: 10 });
    expect(capped).toMatchObject({ exitCode: 0, truncated: true });
    expect(capped.stdout.length).toBe(10);
    expect(capped.stderr.length).toBe(7);
    // A command that never reads its stdin still completes.
    expect((await sb.exec(["true"], { stdin: big })).exitCode).toBe(0);
  });

  it("ends what a command left running when it exits, as a per-command bwrap would", async () => {
    const secs = uniqueSecs();
    const r = await sb.exec(["sh", "-c", `sleep ${secs} & echo started`]);
    expect(r.stdout.toString()).toBe("started\n");
    await pause(100);
    expect(await processesWith(`sleep\0${secs}`)).toEqual([]);
  });

  it("an abort signal kills the whole tree and reports timedOut; the runner keeps serving", async () => {
    const secs = uniqueSecs();
    const ac = new AbortController();
    const running = sb.exec(["sh", "-c", `sleep ${secs} & sleep ${secs}`], { signal: ac.signal });
    await pause(200);
    ac.abort();
    const r = await running;
    expect(r).toMatchObject({ exitCode: -1, timedOut: true });
    await pause(100);
    expect(await processesWith(`sleep\0${secs}`)).toEqual([]);
    expect((await sb.exec(["echo", "ok"])).stdout.toString()).toBe("ok\n");
  });

  it("restarts a runner that died, and a runner killed mid-exec fails that exec without hanging", async () => {
    await sb.exec(["true"]);
    const first = sb.runnerPid!;
    const running = sb.exec(["sleep", "30"]);
    await pause(100);
    process.kill(-first, "SIGKILL");
    const r = await running;
    expect(r.exitCode).toBe(-1);
    expect(r.stderr.toString()).toMatch(/runner stopped/);
    const again = await sb.exec(["echo", "back"]);
    expect(again.stdout.toString()).toBe("back\n");
    expect(sb.runnerPid).not.toBe(first);
  });

  it("a swapped package folder gets a fresh runner that mounts the new one", async () => {
    await fs.writeFile(path.join(root, "env", "v"), "1");
    expect((await sb.exec(["cat", "/opt/agentws/v"])).stdout.toString()).toBe("1");
    const before = sb.runnerPid;
    await fs.mkdir(path.join(root, "env2"));
    await fs.writeFile(path.join(root, "env2", "v"), "2");
    await fs.rm(path.join(root, "env"), { recursive: true });
    await fs.rename(path.join(root, "env2"), path.join(root, "env"));
    expect((await sb.exec(["cat", "/opt/agentws/v"])).stdout.toString()).toBe("2");
    expect(sb.runnerPid).not.toBe(before);
    await pause(100);
    expect(await alive(before!)).toBe(false);
  });

  it("close() stops the runner; a later exec still works without leaving a process behind", async () => {
    const other = await BubblewrapSandbox.open({ hostRoot: path.join(root, "ws"), hostTmp: path.join(root, "tmp"), network: "none", persistent: true });
    await other.exec(["true"]);
    const pid = other.runnerPid!;
    expect(await alive(pid)).toBe(true);
    await other.close();
    expect(await alive(pid)).toBe(false);
    expect(other.runnerPid).toBeUndefined();
    expect((await other.exec(["echo", "late"])).stdout.toString()).toBe("late\n");
    expect(other.runnerPid).toBeUndefined();
  });

  it("a missing bwrap binary gives exit 127 with the reason", async () => {
    const broken = await BubblewrapSandbox.open({
      hostRoot: path.join(root, "ws"),
      hostTmp: path.join(root, "tmp"),
      network: "none",
      persistent: true,
      bwrap: "/nonexistent/bwrap",
    });
    const r = await broken.exec(["true"]);
    expect(r.exitCode).toBe(127);
    expect(r.stderr.toString()).toMatch(/ENOENT/);
    await broken.close();
  });
});
