import { spawn } from "node:child_process";
import type { RunnerTransport } from "../../sdk/kit/runner/index.js";
import { textChannelReader, textChannelWriter, textRunnerArgv } from "../../sdk/kit/runner/text-channel.js";

/** The runner behind its base64 wrapper as a host process, its output decoded as text the way E2B's SDK does. */
export function textRunner(root: string, b64Stdin: boolean): RunnerTransport {
  const [cmd, ...args] = textRunnerArgv("python3", root, b64Stdin);
  const child = spawn(cmd!, args, { stdio: ["pipe", "pipe", "pipe"], detached: true });
  // A lossy text decoder on the way, in odd chunk sizes: base64 must survive it.
  const decoder = new TextDecoder();
  const reader = textChannelReader();
  child.stdout.on("data", (c: Buffer) => {
    for (let i = 0; i < c.length; i += 4093) reader.write(decoder.decode(c.subarray(i, i + 4093), { stream: true }));
  });
  child.stdout.on("end", () => reader.end());
  let stdin: NodeJS.WritableStream & import("node:stream").Writable = child.stdin;
  if (b64Stdin) {
    const w = textChannelWriter();
    w.pipe(child.stdin);
    stdin = w;
  }
  let err = "";
  child.stderr.on("data", (c: Buffer) => (err += c.toString()));
  return {
    stdin,
    stdout: reader,
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
