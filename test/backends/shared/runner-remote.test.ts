// The runner client's RemoteFiles hook (a service's file API at the runner's /proc/<pid>/fd links), with
// the host's own file calls standing in for the service: the runner runs here, so its links open here too.
import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RunnerClient, RunnerFiles, type RemoteFiles } from "../../../sdk/kit/runner/index.js";
import { textRunner } from "../../support/text-runner.js";

describe("runner client: big files through RemoteFiles at the runner's descriptors", () => {
  let root: string;
  beforeAll(async () => {
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "agentws-remote-")));
  });
  afterAll(async () => {
    await fs.rm(root, { recursive: true, force: true });
  });

  /** A client whose transport has `remote` (every call recorded), and its file operations. */
  const open = async (remote: (log: string[]) => RemoteFiles) => {
    const log: string[] = [];
    const client = new RunnerClient({ ...textRunner(root, false), remoteFiles: remote(log) });
    await client.ready;
    return { client, log, files: new RunnerFiles(async () => ({ client })) };
  };
  const host = (log: string[], streams = false): RemoteFiles => ({
    streams,
    upload: async (p, d) => {
      log.push(`up ${p}`);
      await fs.writeFile(p, d);
    },
    download: async (p) => {
      log.push(`down ${p}`);
      return fs.readFile(p);
    },
  });

  for (const streams of [false, true])
    it(`writes and reads a big file byte-exact at /proc/<runner pid>/fd/<n>, never at a workspace name, keeping modes (${streams ? "an upload pipe" : "a spare file"})`, async () => {
      const { client, log, files } = await open((l) => host(l, streams));
      try {
        const big = randomBytes(3 * 1024 * 1024 + 11);
        await files.writeFile("d/big.bin", big, { mode: 0o640 });
        expect((await fs.readFile(path.join(root, "d/big.bin"))).equals(big)).toBe(true);
        expect((await fs.stat(path.join(root, "d/big.bin"))).mode & 0o777).toBe(0o640);
        expect((await files.readFile("d/big.bin")).equals(big)).toBe(true);
        expect(log).toHaveLength(2);
        for (const l of log) expect(l).toMatch(/^(up|down) \/proc\/\d+\/fd\/\d+$/);
        // A replace keeps the old file's modes; small files stay on the channel.
        await files.writeFile("d/big.bin", big.subarray(1));
        expect((await fs.stat(path.join(root, "d/big.bin"))).mode & 0o777).toBe(0o640);
        await files.writeFile("small.txt", "small");
        expect((await files.readFile("small.txt")).toString()).toBe("small");
        expect(log).toHaveLength(3);
        // A planted symlink at the target is refused, and the file it names is left alone.
        const outside = path.join(os.tmpdir(), `agentws-outside-${process.pid}-${streams}`);
        await fs.writeFile(outside, "outside");
        await fs.symlink(outside, path.join(root, "d/link.bin"));
        await expect(files.writeFile("d/link.bin", big)).rejects.toMatchObject({ code: "path_escape" });
        await expect(files.readFile("d/link.bin")).rejects.toMatchObject({ code: "path_escape" });
        expect(await fs.readFile(outside, "utf8")).toBe("outside");
        await fs.rm(outside);
        await expect(files.writeFile("d/big.bin", big, { exclusive: true })).rejects.toMatchObject({ code: "conflict" });
        await expect(files.readFile("d/big.bin", { maxBytes: 100 })).rejects.toMatchObject({ code: "too_large" });
        // Nothing but the files themselves is left in the folder.
        expect((await fs.readdir(path.join(root, "d"))).sort()).toEqual(["big.bin", "link.bin"]);
        await fs.rm(path.join(root, "d"), { recursive: true });
      } finally {
        await client.stop();
      }
    });

  it("falls back to the channel when the service refuses, tells once and does not try again on that runner", async () => {
    const told: unknown[] = [];
    const { client, log, files } = await open((l) => ({
      upload: async (p) => {
        l.push(`up ${p}`);
        throw new Error("refused");
      },
      download: async (p) => {
        l.push(`down ${p}`);
        throw new Error("refused");
      },
      fellBack: (e) => void told.push(e),
    }));
    try {
      const a = randomBytes(1024 * 1024);
      const b = randomBytes(512 * 1024);
      await files.writeFile("fb/a.bin", a);
      await files.writeFile("fb/b.bin", b, { exclusive: true });
      expect((await files.readFile("fb/a.bin")).equals(a)).toBe(true);
      expect((await files.readFile("fb/b.bin")).equals(b)).toBe(true);
      expect(log.map((l) => l.split(" ")[0])).toEqual(["up"]);
      expect(told).toHaveLength(1);
    } finally {
      await client.stop();
    }
  });

  it("an upload into the pipe that ends short or fails midway names nothing half-written; the bytes go over the channel", async () => {
    const told: unknown[] = [];
    let mode: "short" | "fail" = "short";
    const { client, files } = await open((l) => ({
      ...host(l, true),
      upload: async (p, d) => {
        l.push(`up ${p}`);
        // Half the bytes, then the service says it is done (short) or fails.
        await fs.writeFile(p, d.subarray(0, d.byteLength >> 1));
        if (mode === "fail") throw new Error("connection reset");
      },
      fellBack: (e) => void told.push(e),
    }));
    try {
      const old = randomBytes(100_000);
      await fs.writeFile(path.join(root, "s.bin"), old);
      const a = randomBytes(1024 * 1024);
      await files.writeFile("s.bin", a);
      expect((await fs.readFile(path.join(root, "s.bin"))).equals(a)).toBe(true);
      expect(told).toHaveLength(1);
      expect(await fs.readdir(root)).not.toContainEqual(expect.stringMatching(/agentws-tmp/));
    } finally {
      await client.stop();
    }
    mode = "fail";
    const again = await open((l) => ({
      ...host(l, true),
      upload: async (p, d) => {
        await fs.writeFile(p, d.subarray(0, d.byteLength >> 1));
        throw new Error("connection reset");
      },
      fellBack: (e) => void told.push(e),
    }));
    try {
      const b = randomBytes(1024 * 1024);
      await again.files.writeFile("s.bin", b, { mode: 0o600 });
      expect((await fs.readFile(path.join(root, "s.bin"))).equals(b)).toBe(true);
      expect(told).toHaveLength(2);
    } finally {
      await again.client.stop();
    }
  });

  it("a refused download alone falls back too (reads over the channel)", async () => {
    const told: unknown[] = [];
    const { client, files } = await open((l) => ({
      ...host(l),
      download: async () => {
        throw new Error("refused");
      },
      fellBack: (e) => void told.push(e),
    }));
    try {
      const a = randomBytes(700_000);
      await files.writeFile("r/a.bin", a);
      expect((await files.readFile("r/a.bin")).equals(a)).toBe(true);
      expect((await files.readFile("r/a.bin")).equals(a)).toBe(true);
      expect(told).toHaveLength(1);
    } finally {
      await client.stop();
    }
  });
});
