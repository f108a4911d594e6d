/**
 * Attack (issue 15): big files are where a backend is tempted to take a host-side shortcut (the runner
 * hands big files to the host by descriptor). A process inside the sandbox swaps the folder holding
 * them for a symlink to a host folder (renameat2 RENAME_EXCHANGE) in a tight loop, while the host reads,
 * replaces and creates files over the hand-off threshold there. Any host step that resolves the path by
 * name reads the canary's big secret or writes into the canary; neither may ever happen.
 */
import { createHash, randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapWorkspace } from "../../sdk/backends/bubblewrap/workspace.js";
import { DockerDriver } from "../../sdk/backends/docker/driver.js";
import { DockerWorkspace } from "../../sdk/backends/docker/workspace.js";
import type { Sandbox } from "../../sdk/sandbox.js";
import type { Workspace } from "../../sdk/workspace/workspace.js";
import { BASE_IMAGE, dockerEngine } from "../support/docker-engine.js";

const SECONDS = 6;
const SECRET = `CANARY-${randomBytes(8).toString("hex")}`;
/** Over the 64 KiB hand-off threshold, and the secret at both ends and in the middle. */
const BIG = 512 << 10;

function bigWith(marker: string): Buffer {
  const b = Buffer.alloc(BIG, 0x2e);
  for (const at of [0, BIG / 2, BIG - marker.length]) b.write(marker, at);
  return b;
}

const SWAPPER = String.raw`
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
exch = getattr(libc, "renameat2", None)
def swap(a, b):
    if exch is not None:
        return exch(-100, a, -100, b, 2)
    return libc.syscall(316, -100, a, -100, b, 2)
os.chdir(sys.argv[2])
end = time.time() + float(sys.argv[1])
n = 0
while time.time() < end:
    if swap(b"d", b"d.l") == 0:
        n += 1
if os.path.islink("d"):
    swap(b"d", b"d.l")
print(n)
`;

async function digest(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fs.readdir(dir, { withFileTypes: true, recursive: true })) {
    const p = path.join(e.parentPath, e.name);
    out.push(`${path.relative(dir, p)}:${e.isFile() ? createHash("sha256").update(await fs.readFile(p)).digest("hex") : e.isDirectory() ? "dir" : "other"}`);
  }
  return out.sort();
}

async function makeCanary(root: string): Promise<string> {
  const canary = path.join(root, "canary");
  await fs.mkdir(canary, { recursive: true });
  await fs.writeFile(path.join(canary, "big.bin"), bigWith(SECRET));
  await fs.writeFile(path.join(canary, "only-in-canary.bin"), bigWith(SECRET));
  return canary;
}

async function race(ws: Workspace, canary: string): Promise<{ swaps: number; calls: number; leaks: number }> {
  const sb: Sandbox = ws.getBackend();
  const benign = bigWith("benign");
  await sb.mkdir("d");
  await sb.writeFile("d/big.bin", benign);
  await sb.writeFile("d/only-in-canary.bin", benign);
  expect((await sb.exec(["ln", "-sfn", canary, "d.l"])).exitCode).toBe(0);
  const swapper = sb.exec(["python3", "-c", SWAPPER, String(SECONDS), sb.workdir], { timeoutMs: (SECONDS + 30) * 1000 });
  let leaks = 0;
  const record = async (p: Promise<unknown>) => {
    try {
      const v = await p;
      if (Buffer.isBuffer(v) && v.includes(SECRET)) leaks++;
    } catch (e) {
      if (String((e as Error)?.message ?? e).includes(SECRET)) leaks++;
    }
  };
  const end = Date.now() + SECONDS * 1000;
  let calls = 0;
  for (let i = 0; Date.now() < end; i++) {
    await Promise.all([
      record(sb.readFile("d/big.bin")),
      record(sb.readFile("d/only-in-canary.bin", { maxBytes: BIG })),
      record(sb.writeFile("d/big.bin", benign)),
      record(sb.writeFile(`d/new-${i % 8}.bin`, benign)),
      record(sb.writeFile(`d/excl-${i}.bin`, benign, { exclusive: true })),
      record(sb.readFile("d/big.bin")),
    ]);
    calls += 6;
  }
  const r = await swapper;
  return { swaps: Number(r.stdout.toString().trim()), calls, leaks };
}

const engine = await dockerEngine();

describe("big files while the agent swaps their folder for a symlink (issue 15)", () => {
  let root: string;
  beforeAll(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-bigswap-"));
  });
  afterAll(async () => {
    await fs.rm(root, { recursive: true, force: true });
  });

  it("Bubblewrap: the canary is never read nor written", { timeout: (SECONDS + 60) * 1000 }, async () => {
    const canary = await makeCanary(path.join(root, "bw"));
    const before = await digest(canary);
    const ws = new BubblewrapWorkspace({ workspaceId: `bigswap-${randomBytes(4).toString("hex")}`, basedir: path.join(root, "bw", "base") });
    await ws.initialize();
    try {
      const { swaps, calls, leaks } = await race(ws, canary);
      expect(swaps).toBeGreaterThan(1000);
      expect(calls).toBeGreaterThan(30);
      expect(leaks).toBe(0);
      expect(await digest(canary)).toEqual(before);
    } finally {
      await ws.close();
    }
  });

  it.skipIf(!engine)("Docker with its host folder: the canary is never read nor written", { timeout: (SECONDS + 120) * 1000 }, async () => {
    const canary = await makeCanary(path.join(root, "dk"));
    const before = await digest(canary);
    const basedir = path.join(root, "dk", "base");
    const workspaceId = `bigswap-${randomBytes(4).toString("hex")}`;
    const ws = new DockerWorkspace({ workspaceId, basedir, baseImage: BASE_IMAGE });
    await ws.initialize();
    try {
      expect((ws.getBackend() as unknown as { fileAccess: string }).fileAccess).toBe("host");
      const { swaps, calls, leaks } = await race(ws, canary);
      expect(swaps).toBeGreaterThan(1000);
      expect(calls).toBeGreaterThan(30);
      expect(leaks).toBe(0);
      expect(await digest(canary)).toEqual(before);
    } finally {
      await ws.close();
      await new DockerDriver({ basedir, baseImage: BASE_IMAGE }).destroy(workspaceId).catch(() => undefined);
    }
  });
});
