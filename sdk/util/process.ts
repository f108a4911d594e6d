import type { ChildProcess } from "node:child_process";
import type { ExecOptions, ExecResult } from "../sandbox.js";

export const DEFAULT_MAX_OUTPUT = 16 * 1024 * 1024;

/**
 * Feeds stdin, collects capped stdout/stderr, enforces the timeout and abort signal by killing the
 * whole process group (spawn it with `detached: true`). Never throws for a failed command:
 * spawn failure is exit 127, a timeout is exit -1 with `timedOut`.
 */
export function collectOutput(child: ChildProcess, options: ExecOptions): Promise<ExecResult> {
  const max = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
  return new Promise((resolve) => {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outLen = 0;
    let errLen = 0;
    let truncated = false;
    let timedOut = false;
    let spawnError: Error | undefined;
    const take = (chunks: Buffer[], len: number, chunk: Buffer): number => {
      const room = max - len;
      if (room <= 0) {
        truncated = true;
        return len;
      }
      if (chunk.length > room) truncated = true;
      chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
      return len + Math.min(chunk.length, room);
    };
    child.stdout?.on("data", (c: Buffer) => (outLen = take(out, outLen, c)));
    child.stderr?.on("data", (c: Buffer) => (errLen = take(err, errLen, c)));
    const kill = () => {
      try {
        if (child.pid) process.kill(-child.pid, "SIGKILL");
      } catch {
        child.kill("SIGKILL");
      }
    };
    const timer = options.timeoutMs !== undefined && options.timeoutMs > 0 ? setTimeout(() => ((timedOut = true), kill()), options.timeoutMs) : undefined;
    const onAbort = () => ((timedOut = true), kill());
    options.signal?.addEventListener("abort", onAbort, { once: true });
    child.once("error", (e) => (spawnError = e));
    child.once("close", (code, signal) => {
      if (timer) clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      if (spawnError)
        return resolve({ exitCode: 127, stdout: Buffer.alloc(0), stderr: Buffer.from(String(spawnError.message)), timedOut: false, truncated: false });
      const stderr = Buffer.concat(err);
      resolve({
        exitCode: timedOut ? -1 : (code ?? (signal ? 128 : -1)),
        stdout: Buffer.concat(out),
        stderr: timedOut && stderr.length === 0 ? Buffer.from("timed out") : stderr,
        timedOut,
        truncated,
      });
    });
    if (child.stdin) {
      child.stdin.on("error", () => undefined);
      child.stdin.end(options.stdin ?? undefined);
    }
  });
}
