import { spawn } from "node:child_process";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, it } from "vitest";
import { RunnerClient, RunnerFiles, type RunnerTransport } from "../../../sdk/backends/shared/runner/index.js";
import { expectConcurrentCallsApart, expectEveryByteAndABigFile } from "../../support/runner-channel-checks.js";
import { textChannelReader, textChannelWriter, textRunnerArgv } from "../../../sdk/backends/shared/runner/text-channel.js";

/** The runner behind its base64 wrapper as a host process, its output decoded as text the way E2B's SDK does. */
function textRunner(root: string, b64Stdin: boolean): RunnerTransport {
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

for (const b64Stdin of [false, true]) {
  describe(`runner over a text channel (stdin ${b64Stdin ? "base64 lines" : "bytes"})`, () => {
    let root: string;
    let client: RunnerClient;
    let files: RunnerFiles;
    beforeAll(async () => {
      root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "agentws-text-")));
      client = new RunnerClient(textRunner(root, b64Stdin));
      await client.ready;
      files = new RunnerFiles(async () => ({ client }));
    });
    afterAll(async () => {
      await client.stop();
      await fs.rm(root, { recursive: true, force: true });
    });

    it("carries every byte value both ways: command output, stdin and files", () => expectEveryByteAndABigFile(client, files, root));

    it("multiplexes concurrent calls as on a byte channel", () => expectConcurrentCallsApart(() => client));
  });
}
