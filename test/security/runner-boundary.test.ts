/**
 * Attack (issue 25, item 1): an agent's own processes reach its runner. From inside the sandbox, through
 * the runner itself (one exec, as the Bash tool runs), a Python program finds every process whose command
 * line carries the runner's source, then tries: ptrace(PTRACE_ATTACH), /proc/<pid>/mem opened for
 * writing, the runner's stdin and stdout reopened (and named) through /proc/<pid>/fd, and
 * pidfd_getfd(pidfd_open(pid), 1). The same program against a process of its own must succeed (the
 * attack works; only the runner is out of reach). Then it signals the runner (Bubblewrap: kill(-1) and
 * kill(1) included) and, on Docker, replaces what the next runner starts from (python3 ahead on PATH,
 * /etc/ld.so.preload, /usr/bin) and kills it: the next call must be served by the genuine runner.
 * Every attack here succeeds on main 5e43587.
 */
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapSandbox } from "../../sdk/backends/bubblewrap/sandbox.js";
import { DockerDriver } from "../../sdk/backends/docker/driver.js";
import { DockerWorkspace } from "../../sdk/backends/docker/index.js";
import type { Sandbox } from "../../sdk/sandbox.js";
import { uniqueId } from "../contract/fixture.js";
import { BASE_IMAGE, dockerEngine } from "../support/docker-engine.js";

/** The runner source's first line: how an agent (and the e2b/daytona tests) tell a runner's command line. */
const RUNNER_MARK = "import errno, os, select, stat";
/** Shell: the runners' pids, the mark assembled in a variable so the shell's own command line does not carry it. */
const RUNNER_PIDS = `m='${RUNNER_MARK.slice(0, 12)}'; m="$m${RUNNER_MARK.slice(12)}"; grep -l -a -F "$m" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3`;

/** What one attack did to one process: true where it succeeded, else the error. */
interface Attempt {
  pid: number;
  argv0: string;
  ptrace: true | string;
  mem: true | string;
  fd0: true | string;
  fd1: true | string;
  readlink: true | string;
  getfd: true | string;
}

/**
 * Prints one JSON line per target: the runners (found by command line) and, as the positive control,
 * a child of its own. x86_64 syscall numbers: pidfd_open 434, pidfd_getfd 438.
 */
const ATTACK = String.raw`
import ctypes, json, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
mark = sys.argv[1].encode()
err = lambda: os.strerror(ctypes.get_errno())
def tryopen(p, flags):
    try:
        os.close(os.open(p, flags | os.O_NONBLOCK))
        return True
    except OSError as e:
        return e.strerror
def attack(pid):
    r = {"pid": pid}
    try:
        r["argv0"] = open("/proc/%d/cmdline" % pid, "rb").read().split(b"\0")[0].decode("utf-8", "replace")
    except OSError:
        r["argv0"] = "?"
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        r["ptrace"] = True
        os.waitpid(pid, 0x40000000)  # __WALL: the stop, then let it go
        libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
    else:
        r["ptrace"] = err()
    r["mem"] = tryopen("/proc/%d/mem" % pid, os.O_RDWR)
    r["fd0"] = tryopen("/proc/%d/fd/0" % pid, os.O_RDONLY)
    r["fd1"] = tryopen("/proc/%d/fd/1" % pid, os.O_WRONLY)
    try:
        os.readlink("/proc/%d/fd/1" % pid)
        r["readlink"] = True
    except OSError as e:
        r["readlink"] = e.strerror
    pfd = libc.syscall(434, pid, 0)
    if pfd < 0:
        r["getfd"] = "pidfd_open: " + err()
    else:
        fd = libc.syscall(438, pfd, 1, 0)
        r["getfd"] = True if fd >= 0 else err()
        if fd >= 0:
            os.close(fd)
        os.close(pfd)
    print(json.dumps(r), flush=True)
me = os.getpid()
for p in sorted(os.listdir("/proc")):
    if not p.isdigit() or int(p) == me:
        continue
    try:
        cl = open("/proc/%s/cmdline" % p, "rb").read()
    except OSError:
        continue
    if mark in cl:
        attack(int(p))
own = subprocess.Popen(["sleep", "30"])
print("OWN", end=" ")
attack(own.pid)
own.kill()
own.wait()
`;

async function attack(sb: Sandbox): Promise<{ runners: Attempt[]; own: Attempt }> {
  const r = await sb.exec(["python3", "-c", ATTACK, RUNNER_MARK]);
  expect(r.exitCode, r.stderr.toString()).toBe(0);
  const lines = r.stdout.toString().trim().split("\n");
  const own = lines.find((l) => l.startsWith("OWN "));
  expect(own, r.stdout.toString()).toBeDefined();
  return { runners: lines.filter((l) => !l.startsWith("OWN ")).map((l) => JSON.parse(l) as Attempt), own: JSON.parse(own!.slice(4)) as Attempt };
}

/** Every way in failed for every runner-like process; the same program reached a process of its own. */
function expectOutOfReach(found: { runners: Attempt[]; own: Attempt }, options: { getfdAllowed: boolean }): void {
  // Positive controls: a runner was found, and the attack does work on what it may reach (Docker's
  // default seccomp profile refuses pidfd_getfd to a process without CAP_SYS_PTRACE, even on its own child).
  expect(found.runners.length, "no runner found by its command line").toBeGreaterThan(0);
  expect(found.own).toMatchObject({ ptrace: true, mem: true, readlink: true, ...(options.getfdAllowed ? { getfd: true } : {}) });
  for (const a of found.runners) {
    for (const way of ["ptrace", "mem", "fd0", "fd1", "readlink", "getfd"] as const) expect(a[way], `${way} on pid ${a.pid} (${a.argv0})`).not.toBe(true);
  }
}

describe("Bubblewrap: agent processes cannot reach their runner", () => {
  let root: string;
  let sb: BubblewrapSandbox;
  beforeAll(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-runner-boundary-"));
    await fs.mkdir(path.join(root, "ws"));
    await fs.mkdir(path.join(root, "tmp"));
    // With caps, as the driver opens it: bwrap then starts through the shell that joins the cgroups.
    sb = await BubblewrapSandbox.open({
      hostRoot: path.join(root, "ws"),
      hostTmp: path.join(root, "tmp"),
      network: "none",
      persistent: true,
      limits: { maxProcesses: 512, memoryBytes: 2 << 30, cpus: 1 },
    });
  });
  afterAll(async () => {
    await sb?.close();
    await fs.rm(root, { recursive: true, force: true });
  });

  it("ptrace, /proc/<runner>/mem and fd/*, and pidfd_getfd all fail; the channel is unchanged", async () => {
    expectOutOfReach(await attack(sb), { getfdAllowed: true });
    expect((await sb.exec(["echo", "still-here"])).stdout.toString()).toBe("still-here\n");
  });

  it("kill(-1), and every signal to the runner, leave it serving (the same runner, not a restart)", async () => {
    await sb.exec(["true"]);
    const before = sb.runnerPid;
    expect(before).toBeDefined();
    // What a hostile command sends: to every process it may signal, then to each runner by pid.
    const script =
      `for s in INT TERM HUP QUIT USR1 KILL; do kill -s $s -1 2>/dev/null; done; ` +
      `for p in $(${RUNNER_PIDS}); do for s in INT TERM HUP QUIT USR1 STOP KILL; do kill -s $s $p 2>/dev/null; done; done; echo sent`;
    // On main the runner dies here, taking this exec with it.
    await sb.exec(["sh", "-c", script]).catch(() => undefined);
    const after = await sb.exec(["echo", "served"]);
    expect(after.stdout.toString()).toBe("served\n");
    expect(sb.runnerPid, "the runner was restarted: the agent ended it").toBe(before);
  });

  it("the sandbox sees no host working directory, and /tmp is a sized tmpfs", async () => {
    const r = await sb.exec([
      "sh",
      "-c",
      'echo "PWD=$PWD OLDPWD=${OLDPWD-unset}"; for f in /proc/[0-9]*/environ; do tr "\\0" "\\n" < "$f" 2>/dev/null; done | grep -E "^(OLD)?PWD=" | sort -u; stat -f -c %T /tmp; df -B1 --output=size /tmp | tail -1',
    ]);
    const out = r.stdout.toString();
    const pwds = out.split("\n").filter((l) => /^(OLD)?PWD=/.test(l));
    expect(out.startsWith("PWD=/workspace OLDPWD=unset\n"), out).toBe(true);
    for (const l of pwds) expect(l, "a PWD from outside /workspace").toMatch(/^PWD=\/workspace(\/\S*)?( |$)/);
    expect(out).toContain("tmpfs");
    expect(Number(out.trim().split("\n").pop())).toBeLessThanOrEqual(1 << 30);
  });
});

const engine = await dockerEngine();

describe.skipIf(!engine)("Docker: agent processes cannot reach their runner, nor replace the next one", () => {
  let basedir: string;
  const made: string[] = [];
  let ws: DockerWorkspace;
  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-runner-boundary-dk-"));
    const workspaceId = uniqueId("rb");
    made.push(workspaceId);
    ws = new DockerWorkspace({ workspaceId, basedir, baseImage: BASE_IMAGE });
    await ws.initialize();
  });
  afterAll(async () => {
    await ws?.close();
    const d = new DockerDriver({ basedir, baseImage: BASE_IMAGE });
    await Promise.all(made.map((w) => d.destroy(w).catch(() => undefined)));
    await fs.rm(basedir, { recursive: true, force: true });
  });

  it("ptrace, /proc/<runner>/mem and fd/*, and pidfd_getfd all fail", async () => {
    const sb = ws.getBackend();
    await sb.exec(["true"]);
    expectOutOfReach(await attack(sb), { getfdAllowed: false });
  });

  it("python3 ahead on PATH, /etc/ld.so.preload and /usr/bin cannot be written; the runner killed, the next one is genuine", async () => {
    const sb = ws.getBackend();
    // The planted interpreter leaves a mark in the workspace, then starts the real one (a quiet takeover).
    const plant = [
      `printf '#!/bin/sh\\necho planted >> /workspace/planted\\nexec /usr/bin/python3 "$@"\\n' > /usr/local/bin/python3 && chmod 755 /usr/local/bin/python3 && echo plant=ok || echo plant=refused`,
      `touch /etc/ld.so.preload 2>/dev/null && echo preload=ok || echo preload=refused`,
      `touch /usr/bin/agentws-probe 2>/dev/null && echo usrbin=ok || echo usrbin=refused`,
    ].join("; ");
    const planted = (await sb.exec(["sh", "-c", plant])).stdout.toString();
    expect(planted).toContain("plant=refused");
    expect(planted).toContain("preload=refused");
    expect(planted).toContain("usrbin=refused");
    // Kill the runner from inside (this call ends with it).
    await sb.exec(["sh", "-c", `for p in $(${RUNNER_PIDS}); do kill -9 $p; done`]).catch(() => undefined);
    const next = await sb.exec(["sh", "-c", "cat /workspace/planted 2>/dev/null; echo served"]);
    expect(next.stdout.toString()).toBe("served\n");
    // And the new runner is as out of reach as the first.
    expectOutOfReach(await attack(sb), { getfdAllowed: false });
  });
});
