/**
 * What the tracked handle costs: file operations and an exec through `getBackend()` (every call a
 * tracked operation, issue 9 item 14) against the same calls on the bare LocalSandbox, measured
 * in the same run, alternating, medians over many calls.
 *   1. readFile of 4 KiB          handle vs bare      goal within noise (≤ 1.1x)
 *   2. writeFile of 4 KiB         handle vs bare      goal within noise (≤ 1.1x)
 *   3. exec `true`                handle vs bare      goal within noise (≤ 1.1x)
 * Run: npx tsx bench/handle.ts
 */
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { LocalSandbox } from "../sdk/kit/host-sandbox.js";
import { LocalWorkspace } from "../sdk/backends/local/index.js";
import type { Sandbox } from "../sdk/sandbox.js";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function pair(name: string, calls: number, op: (s: Sandbox, i: number) => Promise<unknown>, bare: Sandbox, handle: Sandbox): Promise<void> {
  for (let i = 0; i < calls; i++) {
    await op(bare, i);
    await op(handle, i);
  }
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < calls; i++) {
    // Alternate which goes first, so neither side always gets the warm cache.
    const first = i % 2 === 0;
    for (const side of first ? [0, 1] : [1, 0]) {
      const t = performance.now();
      await op(side === 0 ? bare : handle, i);
      (side === 0 ? a : b).push(performance.now() - t);
    }
  }
  const [ma, mb] = [median(a), median(b)];
  console.log(`${name.padEnd(28)} bare ${(ma * 1000).toFixed(1)} µs   handle ${(mb * 1000).toFixed(1)} µs   ${(mb / ma).toFixed(2)}x`);
}

const root = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-bench-handle-"));
try {
  const ws = new LocalWorkspace({ workdir: root });
  await ws.initialize();
  const handle = ws.getBackend();
  const bare = new LocalSandbox(root);
  const data = Buffer.alloc(4096, 7);
  await bare.writeFile("r.bin", data);
  console.log(`node ${process.version}, ${os.platform()}/${os.arch()}`);
  await pair("readFile 4 KiB", 3000, (s) => s.readFile("r.bin"), bare, handle);
  await pair("writeFile 4 KiB", 2000, (s, i) => s.writeFile(`w${i % 16}.bin`, data), bare, handle);
  await pair("exec true", 200, (s) => s.exec(["true"]), bare, handle);
  await ws.close();
} finally {
  await fs.rm(root, { recursive: true, force: true });
}
