import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RunnerClient, RunnerFiles } from "../../../sdk/backends/shared/runner/index.js";
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

    it("carries every byte value both ways: command output, stdin and files", async () => {
      const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      const r = await client.exec({ argv: ["cat"], cwd: "", env: {}, stdin: all, maxOutputBytes: 4096 });
      expect(r.exitCode).toBe(0);
      expect(r.stdout.equals(all)).toBe(true);
      const big = Buffer.alloc(3 * 1024 * 1024 + 7);
      for (let i = 0; i < big.length; i++) big[i] = (i * 7919) % 256;
      await files.writeFile("bin/big.bin", big);
      expect((await fs.readFile(path.join(root, "bin/big.bin"))).equals(big)).toBe(true);
      expect((await files.readFile("bin/big.bin")).equals(big)).toBe(true);
    });

    it("multiplexes concurrent calls as on a byte channel", async () => {
      const rs = await Promise.all(
        Array.from({ length: 12 }, (_, i) => client.exec({ argv: ["sh", "-c", `printf 'out${i}\\377'; printf err${i} >&2`], cwd: "", env: {}, maxOutputBytes: 1024 })),
      );
      for (const [i, r] of rs.entries()) expect([r.stdout.toString("latin1"), r.stderr.toString()]).toEqual([`out${i}\xff`, `err${i}`]);
    });
  });
}
