/**
 * OpenSandbox figures: our backend against the plain `@alibaba-group/opensandbox` SDK on the same
 * server, in one run, medians of paired rounds (subject and baseline alternate):
 *   - create: driver.create (list, create, convergence list) + connect (runner start) vs Sandbox.create (goal ≤ 1.1x),
 *     each round on the same server population (a list costs this server time per sandbox it holds);
 *   - find of an absent workspace at two server populations, against a get by id (no goal: the cost of a list);
 *   - exec of `true` through our handle vs `sbx.commands.run("true")` (goal ≤ 1.1x);
 *   - a 1 MiB file written and read back (writeFile + readFile) vs `files.writeFiles` + `files.readBytes` (goal ≤ 1.1x);
 *   - resume from pause: driver.resume vs `SandboxManager.resumeSandbox` + polling until Running (median).
 * Needs a server: OPEN_SANDBOX_DOMAIN, else scripts/opensandbox-server.sh starts the local one.
 * Run: npx tsx bench/opensandbox.ts [rounds]
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Sandbox as OsbSandbox, SandboxManager } from "@alibaba-group/opensandbox";
import { OpenSandboxDriver } from "../sdk/backends/opensandbox/driver.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const ROUNDS = Number(process.argv[2] ?? 10);
const IMAGE = process.env.AGENTWS_BASE_IMAGE ?? "agentws-base:bookworm";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
function row(name: string, subject: number[], baseline: number[], goal?: number): void {
  const ratio = median(subject) / median(baseline);
  const verdict = goal === undefined ? "" : ratio <= goal ? `  (goal ≤ ${goal}x: met)` : `  (goal ≤ ${goal}x: NOT met)`;
  console.log(
    `${name.padEnd(34)} ${median(subject).toFixed(1).padStart(8)} ms  vs plain SDK ${median(baseline).toFixed(1).padStart(8)} ms  → ${ratio.toFixed(2)}x${verdict}`,
  );
}
async function paired(
  n: number,
  subject: (i: number) => Promise<unknown>,
  baseline: (i: number) => Promise<unknown>,
  between?: (i: number) => Promise<unknown>,
): Promise<[number[], number[]]> {
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < n; i++) {
    for (const [fn, out] of i % 2
      ? ([
          [subject, a],
          [baseline, b],
        ] as const)
      : ([
          [baseline, b],
          [subject, a],
        ] as const)) {
      const t = performance.now();
      await fn(i);
      out.push(performance.now() - t);
    }
    await between?.(i);
  }
  return [a, b];
}

if (!process.env.OPEN_SANDBOX_DOMAIN) {
  const { stdout } = await promisify(execFile)(path.join(ROOT, "scripts/opensandbox-server.sh"), ["start"], { timeout: 600_000 });
  process.env.OPEN_SANDBOX_DOMAIN = /OPEN_SANDBOX_DOMAIN=(\S+)/.exec(stdout)![1];
}
const connectionConfig = { domain: process.env.OPEN_SANDBOX_DOMAIN, disableMetrics: true };
const driver = new OpenSandboxDriver({ image: IMAGE });
const manager = SandboxManager.create({ connectionConfig });
const run = randomBytes(3).toString("hex");
const ours: string[] = [];
const plain: OsbSandbox[] = [];
console.log(`OpenSandbox at ${process.env.OPEN_SANDBOX_DOMAIN}, ${ROUNDS} rounds, image ${IMAGE}`);
try {
  // Round-to-round noise is about ±100 ms of a 1 s create: as many rounds as asked.
  const createRounds = Math.max(6, ROUNDS);
  const [c1, c2] = await paired(
    createRounds,
    async (i) => {
      const w = `bench-${run}-${i}`;
      ours.push(w);
      await driver.create({ workspaceId: w, managedBy: "runtime" });
      await (await driver.connect(w)).close();
    },
    async () => plain.push(await OsbSandbox.create({ connectionConfig, image: IMAGE, timeoutSeconds: 600 })),
    // Each round's pair is removed (untimed), but the first: every round meets the same server population.
    // This Docker-backed server's list costs time in proportion to its sandboxes (the "find" row below).
    async (i) => {
      if (i === 0) return;
      await driver.destroy(ours.pop()!);
      const s = plain.pop()!;
      await s.kill();
      await s.close();
    },
  );
  row("create (+ connect)", c1, c2, 1.1);

  // What an existence check costs as the server fills: ours lists by metadata, the plain SDK has no such
  // step (the baseline here is a get by id). Sandboxes are added with the plain SDK, then removed.
  const filler: OsbSandbox[] = [];
  for (const population of [2, 12]) {
    while (plain.length + ours.length + filler.length < population)
      filler.push(await OsbSandbox.create({ connectionConfig, image: IMAGE, timeoutSeconds: 600 }));
    const [l1, l2] = await paired(
      ROUNDS,
      () => driver.find(`bench-${run}-absent`),
      () => manager.getSandboxInfo(plain[0]!.id),
    );
    row(`find, ${population} sandboxes on the server`, l1, l2);
  }
  for (const s of filler)
    await s
      .kill()
      .then(() => s.close())
      .catch(() => undefined);

  const sb = await driver.connect(ours[0]!);
  const sbx = plain[0]!;
  const [e1, e2] = await paired(
    ROUNDS * 3,
    () => sb.exec(["true"]),
    () => sbx.commands.run("true"),
  );
  row("exec true", e1, e2, 1.1);

  const mib = randomBytes(1024 * 1024);
  await sbx.files.createDirectories([{ path: "/workspace" }]);
  const [f1, f2] = await paired(
    ROUNDS * 2,
    async () => {
      await sb.writeFile("data/mib.bin", mib);
      if (!(await sb.readFile("data/mib.bin")).equals(mib)) throw new Error("round trip changed the bytes");
    },
    async () => {
      await sbx.files.writeFiles([{ path: "/workspace/mib.bin", data: mib }]);
      if (!Buffer.from(await sbx.files.readBytes("/workspace/mib.bin")).equals(mib)) throw new Error("round trip changed the bytes");
    },
  );
  row("1 MiB write + read", f1, f2, 1.1);
  await sb.close();

  const [r1, r2] = await paired(
    ROUNDS,
    async () => {
      await driver.pause(ours[0]!);
      const t = performance.now();
      await driver.resume(ours[0]!);
      return performance.now() - t;
    },
    async () => {
      await manager.pauseSandbox(sbx.id);
      await manager.resumeSandbox(sbx.id);
      while ((await manager.getSandboxInfo(sbx.id)).status.state !== "Running") await new Promise((r) => setTimeout(r, 20));
    },
  );
  // Both timings include the pause; the figure is the median of the pair.
  row("pause + resume", r1, r2);
} finally {
  for (const w of ours) await driver.destroy(w).catch(() => undefined);
  for (const s of plain) await s.kill().catch(() => undefined);
  await Promise.all(plain.map((s) => s.close()));
  await driver.close();
  await manager.close();
}
