import { readFileSync } from "node:fs";
import { RUNNER_SOURCE, runnerArgv, type RunnerTransport } from "../../kit/runner/index.js";
import { descendants, matchRunnerPid } from "../../kit/runner/handoff.js";
import type { BwrapLauncher } from "./launch.js";

/**
 * Starts the shared runner as the child of one long-lived bwrap (how Bubblewrap runs a process with
 * stdin and stdout). `bwrapArgs` is the full bwrap argv up to and including `--`. The bwrap runs in
 * its own process group, so killing it takes the runner and every command with it. `hostDevice` is the
 * device of the host folder mounted as the workspace (the host's own stat): it enables the hand-off.
 * `source` is the runner's (another program only in the hostile-runner tests).
 */
export function startBwrapRunner(launcher: BwrapLauncher, bwrapArgs: string[], root: string, hostDevice?: bigint, source = RUNNER_SOURCE): RunnerTransport {
  // The launcher gives bwrap its minimal environment and the handle's cgroup, in a process group of its own.
  const child = launcher.spawn([...bwrapArgs, ...runnerArgv("/usr/bin/python3", root, source)]);
  // Keep the tail of stderr to explain a failure to start (bwrap or python3 missing).
  let stderr = "";
  child.stderr.on("data", (c: Buffer) => (stderr = (stderr + c.toString()).slice(-2000)));
  const exited = new Promise<{ why: string; spawnFailed?: boolean }>((resolve) => {
    child.once("error", (e: NodeJS.ErrnoException) => resolve({ why: String(e.message), spawnFailed: e.code === "ENOENT" || e.code === "EACCES" }));
    child.once("close", () => resolve({ why: stderr }));
  });
  const handles = () => [child, child.stdin, child.stdout, child.stderr] as unknown as { ref?: () => void; unref?: () => void }[];
  return {
    stdin: child.stdin,
    stdout: child.stdout,
    exited,
    pid: child.pid,
    // The runner is a child of bwrap's own init inside the sandbox's pid namespace: this host's kernel.
    runnerHostPid: async (nsPid) => (child.pid ? matchRunnerPid(await descendants(child.pid, 3), nsPid) : undefined),
    hostDevice,
    kill: () => {
      // The runner is the sandbox's init (--as-pid-1): the SIGKILL bwrap's death sends it (--die-with-parent)
      // comes from no process and an init ignores it; one from here, an ancestor namespace, always lands.
      // Its stdin closed as well: a runner that reads EOF ends itself and its commands.
      if (child.pid) for (const pid of childrenOf(child.pid)) killQuietly(pid);
      child.stdin.destroy();
      try {
        if (child.pid) process.kill(-child.pid, "SIGKILL");
      } catch {
        child.kill("SIGKILL");
      }
    },
    ref: () => handles().forEach((h) => h.ref?.()),
    unref: () => handles().forEach((h) => h.unref?.()),
  };
}

/** Live children of `pid` (bwrap is single-threaded): read at kill time, so no pid here can have been reused. */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter((k) => /^\d+$/.test(k))
      .map(Number);
  } catch {
    return [];
  }
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // Gone already.
  }
}
