import { createHash, randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapWorkspace } from "../../sdk/backends/bubblewrap/index.js";
import { DockerDriver } from "../../sdk/backends/docker/driver.js";
import { DockerWorkspace } from "../../sdk/backends/docker/index.js";
import type { Sandbox } from "../../sdk/sandbox.js";
import type { Workspace } from "../../sdk/workspace/workspace.js";
import { BASE_IMAGE, dockerEngine } from "./docker-engine.js";

/**
 * The symlink-swap race shared by the security tests: inside the sandbox, a process swaps each folder
 * with its symlink twin leading to a host canary folder (renameat2 RENAME_EXCHANGE) in a tight loop,
 * while the test drives the host side; the canary must end unread and unchanged.
 */
const SWAPPER = String.raw`
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
exch = getattr(libc, "renameat2", None)
def swap(a, b):
    if exch is not None:
        return exch(-100, a, -100, b, 2)
    return libc.syscall(316, -100, a, -100, b, 2)
os.chdir(sys.argv[2])
pairs = [(p.encode(), (p + ".l").encode()) for p in sys.argv[3:]]
end = time.time() + float(sys.argv[1])
n = 0
while time.time() < end:
    for a, b in pairs:
        if swap(a, b) == 0:
            n += 1
# Leave every real folder in place.
for a, b in pairs:
    if os.path.islink(a):
        swap(a, b)
print(n)
`;

/** Makes each folder of `pairs` and its twin `<folder>.l` linking to `canary`. */
export async function linkTwins(sb: Sandbox, canary: string, pairs: string[]): Promise<void> {
  for (const p of pairs) {
    await sb.mkdir(p);
    expect((await sb.exec(["ln", "-sfn", canary, `${p}.l`])).exitCode).toBe(0);
  }
}

/** Starts swapping `pairs` for `seconds`; resolves with the number of swaps done. */
export async function swapFor(sb: Sandbox, seconds: number, pairs: string[]): Promise<number> {
  const r = await sb.exec(["python3", "-c", SWAPPER, String(seconds), sb.workdir, ...pairs], { timeoutMs: (seconds + 30) * 1000 });
  return Number(r.stdout.toString().trim());
}

/** Every entry below `dir` with a digest of its bytes: what must not change. */
export async function fingerprint(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fs.readdir(dir, { withFileTypes: true, recursive: true })) {
    const p = path.join(e.parentPath, e.name);
    out.push(
      `${path.relative(dir, p)}:${
        e.isFile()
          ? createHash("sha256")
              .update(await fs.readFile(p))
              .digest("hex")
          : e.isDirectory()
            ? "dir"
            : "other"
      }`,
    );
  }
  return out.sort();
}

export interface SwapRace {
  seconds: number;
  /** Fills a canary folder under `dir` and returns its path. */
  makeCanary(dir: string): Promise<string>;
  /** Runs the race on an initialized workspace; `scratch` is a host folder of its own. */
  race(ws: Workspace, canary: string, scratch: string): Promise<{ swaps: number; calls: number; leaks: unknown[] }>;
  minCalls: number;
}

/** The race on Bubblewrap (and Docker, skipped only outside CI when no engine can start) with its host folder: many swaps, many calls, no leak, the canary unchanged. */
export async function swapRaceSuite(title: string, spec: SwapRace): Promise<void> {
  const engine = await dockerEngine();
  describe(title, () => {
    let root: string;
    beforeAll(async () => {
      root = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-swap-"));
    });
    afterAll(async () => {
      await fs.rm(root, { recursive: true, force: true });
    });
    const check = async (ws: Workspace, dir: string) => {
      const canary = await spec.makeCanary(dir);
      const before = await fingerprint(canary);
      await ws.initialize();
      const { swaps, calls, leaks } = await spec.race(ws, canary, path.join(dir, "src"));
      expect(swaps).toBeGreaterThan(1000);
      expect(calls).toBeGreaterThan(spec.minCalls);
      expect(leaks).toEqual([]);
      expect(await fingerprint(canary)).toEqual(before);
    };

    it("Bubblewrap: the canary is never read nor written", { timeout: (spec.seconds + 60) * 1000 }, async () => {
      const dir = path.join(root, "bw");
      const ws = new BubblewrapWorkspace({ workspaceId: `swap-${randomBytes(4).toString("hex")}`, basedir: path.join(dir, "base") });
      try {
        await check(ws, dir);
      } finally {
        await ws.close();
      }
    });

    it.skipIf(!engine)("Docker with its host folder: the canary is never read nor written", { timeout: (spec.seconds + 120) * 1000 }, async () => {
      const dir = path.join(root, "dk");
      const basedir = path.join(dir, "base");
      const workspaceId = `swap-${randomBytes(4).toString("hex")}`;
      const ws = new DockerWorkspace({ workspaceId, basedir, baseImage: BASE_IMAGE });
      try {
        await check(ws, dir);
        expect((ws.getBackend() as unknown as { fileAccess: string }).fileAccess).toBe("host");
      } finally {
        await ws.close();
        await new DockerDriver({ basedir, baseImage: BASE_IMAGE }).destroy(workspaceId).catch(() => undefined);
      }
    });
  });
}
