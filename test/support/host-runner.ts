import { spawn } from "node:child_process";
import { RUNNER_SOURCE, runnerArgv, type RunnerTransport } from "../../sdk/kit/runner/index.js";

/** The runner as a plain host process over `root` (no sandbox): the protocol alone. */
export function hostRunner(root: string): RunnerTransport {
  const [cmd, ...args] = runnerArgv("python3", root, RUNNER_SOURCE);
  const child = spawn(cmd!, args, { stdio: ["pipe", "pipe", "pipe"], detached: true });
  let err = "";
  child.stderr.on("data", (c: Buffer) => (err += c.toString()));
  return {
    stdin: child.stdin,
    stdout: child.stdout,
    pid: child.pid,
    exited: new Promise((resolve) => child.once("close", () => resolve({ why: err }))),
    kill: () => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // Already gone (ESRCH): nothing left to kill.
      }
    },
  };
}
