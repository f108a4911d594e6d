/**
 * What the Daytona backend costs over the plain `@daytonaio/sdk` calls, both against the same
 * local emulator (test/emulators/daytona: sandboxes are real containers) in one run, alternating,
 * medians over rounds:
 *   1. create          driver.create + connect           vs daytona.create              goal ≤ 1.1x
 *   2. exec `true`      sandbox.exec(["true"])            vs process.executeCommand      goal ≤ 1.1x
 *   3. 1 MiB round trip writeFile + readFile              vs fs.uploadFile + downloadFile goal ≤ 1.1x
 *   4. resume           driver.resume of a stopped one    vs sandbox.start               (median)
 * Needs the project's Docker engine (scripts/dockerd.sh start). Run: npx tsx bench/cloud-daytona.ts [rounds]
 */
import { randomBytes } from "node:crypto";
import os from "node:os";
import { performance } from "node:perf_hooks";
import { DaytonaDriver } from "../sdk/backends/daytona/driver.js";
import { emulatorSpec, startDaytonaEmulator } from "../test/support/daytona-emulator.js";

const rounds = Number(process.argv[2] ?? 5);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

/** Runs both sides `n` times, alternating which goes first; prints medians and the ratio. */
async function pair(name: string, n: number, plain: (i: number) => Promise<number>, ours: (i: number) => Promise<number>, goal: string): Promise<void> {
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < n; i++) {
    if (i % 2 === 0) {
      a.push(await plain(i));
      b.push(await ours(i));
    } else {
      b.push(await ours(i));
      a.push(await plain(i));
    }
  }
  const [ma, mb] = [median(a), median(b)];
  console.log(
    `${name.padEnd(22)} plain SDK ${ma.toFixed(1).padStart(8)} ms   ours ${mb.toFixed(1).padStart(8)} ms   ${(mb / ma).toFixed(2)}x   (goal ${goal})`,
  );
}

const emu = await startDaytonaEmulator();
if (!emu) throw new Error("no Docker engine: start one with scripts/dockerd.sh start");
const driver = new DaytonaDriver(emulatorSpec(emu));
const daytona = driver.client;
const run = randomBytes(3).toString("hex");
try {
  console.log(`node ${process.version}, ${os.platform()}/${os.arch()}, ${os.cpus().length} CPUs, load ${os.loadavg()[0]!.toFixed(1)}; ${rounds} rounds`);
  const plainBoxes: Awaited<ReturnType<typeof daytona.create>>[] = [];
  await pair(
    "create",
    rounds,
    async () => timed(async () => plainBoxes.push(await daytona.create({ labels: { bench: run } }, { timeout: 120 }))),
    async (i) =>
      timed(async () => {
        await driver.create({ workspaceId: `bench-${run}-${i}`, managedBy: "runtime" });
        await driver.connect(`bench-${run}-${i}`);
      }),
    "≤ 1.1x",
  );
  const box = plainBoxes[0]!;
  const sb = await driver.connect(`bench-${run}-0`);
  await pair(
    "exec true",
    rounds * 4,
    () => timed(() => box.process.executeCommand("true")),
    () => timed(() => sb.exec(["true"])),
    "≤ 1.1x",
  );
  const mib = randomBytes(1 << 20);
  await pair(
    "1 MiB round trip",
    rounds * 2,
    () =>
      timed(async () => {
        await box.fs.uploadFile(mib, "/tmp/bench.bin");
        await box.fs.downloadFile("/tmp/bench.bin");
      }),
    () =>
      timed(async () => {
        await sb.writeFile("bench.bin", mib);
        await sb.readFile("bench.bin");
      }),
    "≤ 1.1x",
  );
  await pair(
    "resume (start)",
    rounds,
    async () => {
      await box.stop();
      return timed(() => box.start());
    },
    async () => {
      await driver.pause(`bench-${run}-0`);
      return timed(() => driver.resume(`bench-${run}-0`));
    },
    "median",
  );
} finally {
  await emu.close();
}
