import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, it } from "vitest";
import { RunnerClient, RunnerFiles } from "../../../sdk/kit/runner/index.js";
import { expectConcurrentCallsApart, expectEveryByteAndABigFile } from "../../support/runner-channel-checks.js";
import { textRunner } from "../../support/text-runner.js";

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
