/**
 * Attack (issue 15): big files are where a backend is tempted to take a host-side shortcut (the runner
 * hands big files to the host by descriptor). A process inside the sandbox swaps the folder holding
 * them for a symlink to a host folder (renameat2 RENAME_EXCHANGE) in a tight loop, while the host reads,
 * replaces and creates files over the hand-off threshold there. Any host step that resolves the path by
 * name reads the canary's big secret or writes into the canary; neither may ever happen.
 */
import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import type { Workspace } from "../../sdk/workspace/workspace.js";
import { linkTwins, swapFor, swapRaceSuite } from "../support/swap-race.js";

const SECONDS = 6;
const SECRET = `CANARY-${randomBytes(8).toString("hex")}`;
/** Over the 64 KiB hand-off threshold, and the secret at both ends and in the middle. */
const BIG = 512 << 10;

function bigWith(marker: string): Buffer {
  const b = Buffer.alloc(BIG, 0x2e);
  for (const at of [0, BIG / 2, BIG - marker.length]) b.write(marker, at);
  return b;
}

async function makeCanary(root: string): Promise<string> {
  const canary = path.join(root, "canary");
  await fs.mkdir(canary, { recursive: true });
  await fs.writeFile(path.join(canary, "big.bin"), bigWith(SECRET));
  await fs.writeFile(path.join(canary, "only-in-canary.bin"), bigWith(SECRET));
  return canary;
}

async function race(ws: Workspace, canary: string): Promise<{ swaps: number; calls: number; leaks: string[] }> {
  const sb = ws.getBackend();
  const benign = bigWith("benign");
  await linkTwins(sb, canary, ["d"]);
  await sb.writeFile("d/big.bin", benign);
  await sb.writeFile("d/only-in-canary.bin", benign);
  const swapper = swapFor(sb, SECONDS, ["d"]);
  const leaks: string[] = [];
  const record = async (what: string, p: Promise<unknown>) => {
    try {
      const v = await p;
      if (Buffer.isBuffer(v) && v.includes(SECRET)) leaks.push(what);
    } catch (e) {
      if (String((e as Error)?.message ?? e).includes(SECRET)) leaks.push(`${what} (error)`);
    }
  };
  const end = Date.now() + SECONDS * 1000;
  let calls = 0;
  for (let i = 0; Date.now() < end; i++) {
    await Promise.all([
      record("read", sb.readFile("d/big.bin")),
      record("capped read", sb.readFile("d/only-in-canary.bin", { maxBytes: BIG })),
      record("replace", sb.writeFile("d/big.bin", benign)),
      record("write new", sb.writeFile(`d/new-${i % 8}.bin`, benign)),
      record("exclusive", sb.writeFile(`d/excl-${i}.bin`, benign, { exclusive: true })),
      record("read again", sb.readFile("d/big.bin")),
    ]);
    calls += 6;
  }
  return { swaps: await swapper, calls, leaks };
}

await swapRaceSuite("big files while the agent swaps their folder for a symlink (issue 15)", { seconds: SECONDS, makeCanary, race, minCalls: 30 });
