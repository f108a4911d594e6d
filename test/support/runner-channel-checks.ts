import { promises as fs } from "node:fs";
import path from "node:path";
import { expect } from "vitest";
import type { RunnerClient, RunnerFiles } from "../../sdk/kit/runner/index.js";

/** What every route to the runner must carry exactly: each byte value through a command, a 3 MiB file both ways. */
export async function expectEveryByteAndABigFile(client: RunnerClient, files: RunnerFiles, root: string): Promise<void> {
  const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  const r = await client.exec({ argv: ["cat"], cwd: "", env: {}, stdin: all, maxOutputBytes: 4096 });
  expect(r.exitCode).toBe(0);
  expect(r.stdout.equals(all)).toBe(true);
  const big = Buffer.alloc(3 * 1024 * 1024 + 7);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7919) % 256;
  await files.writeFile("bin/big.bin", big);
  expect((await fs.readFile(path.join(root, "bin/big.bin"))).equals(big)).toBe(true);
  expect((await files.readFile("bin/big.bin")).equals(big)).toBe(true);
}

/** Twelve concurrent commands whose stdout and stderr must come back apart and whole. */
export async function expectConcurrentCallsApart(pick: (i: number) => RunnerClient): Promise<void> {
  const rs = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      pick(i).exec({ argv: ["sh", "-c", `printf 'out${i}\\377'; printf err${i} >&2`], cwd: "", env: {}, maxOutputBytes: 1024 }),
    ),
  );
  for (const [i, r] of rs.entries()) expect([r.stdout.toString("latin1"), r.stderr.toString()]).toEqual([`out${i}\xff`, `err${i}`]);
}
