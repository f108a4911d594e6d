/**
 * E2B backend figures against the plain e2b SDK calls on the same emulator (test/emulators/e2b), in one
 * run, medians over rounds, interleaved so load drifts hit both alike:
 *   - create: E2BDriver.create (list, create, converge list, bootstrap) vs `Sandbox.create` (goal ≤ 1.1x);
 *   - exec of `true`: E2BSandbox.exec(["true"]) vs `sbx.commands.run("true")` (goal ≤ 1.1x);
 *   - a 1 MiB file round trip: writeFile + readFile vs `files.write` + `files.read` (goal ≤ 1.1x);
 *   - resume (median): E2BDriver.resume after pause vs `Sandbox.connect` after `Sandbox.pause`.
 * Needs the Docker engine with the base image (as the tests). Run: npx tsx bench/cloud-e2b.ts [rounds]
 */
import { randomBytes } from "node:crypto";
import { Sandbox } from "e2b";
import { dockerClient } from "../sdk/backends/docker/client.js";
import { E2BDriver } from "../sdk/backends/e2b/driver.js";
import { startE2BEmulator } from "../test/emulators/e2b/server.js";

const ROUNDS = Number(process.argv[2] ?? 10);
const BASE_IMAGE = process.env.AGENTWS_BASE_IMAGE ?? "agentws-base:bookworm";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (v: number) => `${v.toFixed(1)} ms`;
function row(name: string, subject: number[], baseline: number[], goal?: number): void {
  const ratio = median(subject) / median(baseline);
  const verdict = goal === undefined ? "" : ratio <= goal ? `  (goal ≤ ${goal}x: met)` : `  (goal ≤ ${goal}x: NOT met)`;
  console.log(
    `${name.padEnd(22)} ours ${ms(median(subject)).padStart(10)}  plain SDK ${ms(median(baseline)).padStart(10)}  ratio ${ratio.toFixed(2)}x${verdict}`,
  );
}
async function time(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

const emu = await startE2BEmulator(dockerClient(), { baseImage: BASE_IMAGE });
const conn = { apiKey: "e2b_bench", apiUrl: emu.url, sandboxUrl: emu.url };
const driver = new E2BDriver(conn);
try {
  const create: number[] = [];
  const createPlain: number[] = [];
  for (let i = 0; i < Math.max(3, Math.ceil(ROUNDS / 3)); i++) {
    const id = `bench-${process.pid}-${i}`;
    create.push(await time(() => driver.create({ workspaceId: id, managedBy: "runtime" })));
    createPlain.push(await time(() => Sandbox.create({ ...conn, metadata: { bench: id } })));
  }
  row("create", create, createPlain, 1.1);

  const id = `bench-${process.pid}-0`;
  const ours = await driver.connect(id);
  const plain = await Sandbox.connect((await driver.find(id))!.location.sandboxId!, conn);
  await plain.commands.run("mkdir -p /home/user/plain");
  const exec: number[] = [];
  const execPlain: number[] = [];
  const file: number[] = [];
  const filePlain: number[] = [];
  const data = randomBytes(1024 * 1024);
  for (let i = 0; i < ROUNDS; i++) {
    exec.push(await time(() => ours.exec(["true"])));
    execPlain.push(await time(() => plain.commands.run("true")));
    file.push(await time(async () => ours.readFile((await ours.writeFile("big.bin", data), "big.bin"))));
    filePlain.push(
      await time(async () =>
        plain.files.read(
          (await plain.files.write("/home/user/plain/big.bin", data.buffer.slice(data.byteOffset, data.byteOffset + data.length) as ArrayBuffer),
          "/home/user/plain/big.bin"),
          { format: "bytes" },
        ),
      ),
    );
  }
  row("exec true", exec, execPlain, 1.1);
  row("1 MiB round trip", file, filePlain, 1.1);

  const resume: number[] = [];
  const resumePlain: number[] = [];
  const other = (await Sandbox.list({ ...conn, query: { metadata: { bench: `bench-${process.pid}-1` } } }).nextItems())[0]!.sandboxId;
  for (let i = 0; i < Math.max(3, Math.ceil(ROUNDS / 2)); i++) {
    await driver.pause(id);
    resume.push(await time(() => driver.resume(id)));
    await Sandbox.pause(other, conn);
    resumePlain.push(await time(() => Sandbox.connect(other, conn)));
  }
  row("resume", resume, resumePlain);
  await ours.close();
} finally {
  await emu.close();
}
