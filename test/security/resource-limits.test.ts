import { execFile } from "node:child_process";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapWorkspace } from "../../sdk/backends/bubblewrap/index.js";
import { DockerWorkspace } from "../../sdk/backends/docker/index.js";
import { DockerBackendSchema } from "../../sdk/backends/docker/schema.js";
import type { Sandbox } from "../../sdk/sandbox.js";
import type { Workspace } from "../../sdk/workspace/workspace.js";
import { uniqueId } from "../contract/fixture.js";
import { BASE_IMAGE, dockerEngine } from "../support/docker-engine.js";

/**
 * Attack: a hostile agent exhausts the machine from inside its workspace: a fork bomb, or one
 * allocation bigger than the machine can spare. Each workspace has a process and a memory cap;
 * the attack here is bounded (twice the cap, with a hard count in the script: never a real
 * unbounded bomb on a shared machine), fails inside, and meanwhile the service and another
 * workspace keep answering.
 */
const run = promisify(execFile);
const CAP = 64;
const MEMORY = 128 * 1024 ** 2;
const engine = await dockerEngine();
/**
 * The caps, given only where the schema knows them: on a version without them the attack runs
 * unbounded (up to the script's own bound) and the test fails on what it asserts, not on an option.
 */
const CAPS = "maxProcesses" in DockerBackendSchema.shape ? { maxProcesses: CAP, memoryBytes: MEMORY } : {};

/**
 * Forks up to `2 * CAP` sleepers (the hard bound), reports how many started and how many forks
 * failed, signals `held` and keeps them alive until `release` appears (bounded to 60 s), then
 * kills them.
 */
const BOMB = String.raw`
import os, signal, sys, time
bound = int(sys.argv[1])
kids, failed = [], 0
for _ in range(bound):
    try:
        pid = os.fork()
    except OSError:
        failed += 1
        continue
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
# Written whole, then renamed: the test polls for "held" and must never read it half-written.
open("held.tmp", "w").write("%d %d" % (len(kids), failed))
os.rename("held.tmp", "held")
deadline = time.time() + 60
while not os.path.exists("release") and time.time() < deadline:
    time.sleep(0.05)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
for pid in kids:
    os.waitpid(pid, 0)
print("%d %d" % (len(kids), failed))
`;

/** One allocation of `mib` MiB, touched page by page; prints "allocated" only if it all succeeded. */
const ALLOC = `import sys; b = bytearray(int(sys.argv[1]) << 20); b[::4096] = b"x" * len(b[::4096]); print("allocated")`;

async function waitForFile(sb: Sandbox, p: string, ms = 60_000): Promise<string> {
  const until = Date.now() + ms;
  for (;;) {
    const st = await sb.stat(p);
    if (st) return (await sb.readFile(p)).toString();
    if (Date.now() > until) throw new Error(`${p} never appeared`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The bounded bomb in `victim`, with the service and `other` checked while its processes are alive. */
async function bombWhileOthersAnswer(victim: Workspace, other: Workspace): Promise<void> {
  const sb = victim.getBackend();
  const bomb = sb.exec(["python3", "-c", BOMB, String(2 * CAP)], { timeoutMs: 120_000 });
  const [started, failed] = (await waitForFile(sb, "held")).split(" ").map(Number) as [number, number];
  // The service itself can still start processes, and the other workspace still runs commands.
  expect((await run("true", [])).stderr).toBe("");
  const echo = await other.getBackend().exec(["sh", "-c", "echo ok"], { timeoutMs: 30_000 });
  expect(echo.stdout.toString().trim()).toBe("ok");
  await sb.writeFile("release", "");
  const r = await bomb;
  expect(r.exitCode, r.stderr.toString()).toBe(0);
  expect(started).toBeLessThan(CAP);
  expect(started + failed).toBe(2 * CAP);
  expect(failed).toBeGreaterThan(CAP);
  // Once the bomb is gone, the victim works again.
  expect((await sb.exec(["echo", "after"])).stdout.toString().trim()).toBe("after");
}

async function allocationOverCapFails(victim: Workspace): Promise<void> {
  const sb = victim.getBackend();
  // Positive control: an allocation well under the cap succeeds.
  const small = await sb.exec(["python3", "-c", ALLOC, "16"], { timeoutMs: 60_000 });
  expect(small.stdout.toString().trim(), small.stderr.toString()).toBe("allocated");
  const big = await sb.exec(["python3", "-c", ALLOC, String((2 * MEMORY) >> 20)], { timeoutMs: 60_000 });
  expect(big.stdout.toString()).not.toContain("allocated");
  expect(big.exitCode).not.toBe(0);
  expect((await sb.exec(["echo", "after"])).stdout.toString().trim()).toBe("after");
}

let tmp: string;
beforeAll(async () => {
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-limits-"));
});
afterAll(async () => {
  await fs.rm(tmp, { recursive: true, force: true });
});

describe("Bubblewrap: process and memory caps", () => {
  const open = async (): Promise<Workspace> => {
    const ws = new BubblewrapWorkspace({ workspaceId: uniqueId("lim"), basedir: tmp, ...CAPS });
    await ws.initialize();
    return ws;
  };

  it("a bounded fork bomb of twice the cap fails inside while the service and another workspace answer", async () => {
    const [victim, other] = await Promise.all([open(), open()]);
    try {
      await bombWhileOthersAnswer(victim, other);
    } finally {
      await Promise.all([victim.close(), other.close()]);
    }
  });

  it("an allocation over the memory cap fails inside", async () => {
    const victim = await open();
    try {
      await allocationOverCapFails(victim);
    } finally {
      await victim.close();
    }
  });
});

describe.skipIf(!engine)("Docker: process and memory caps", () => {
  const opened: DockerWorkspace[] = [];
  const open = async (): Promise<Workspace> => {
    // A host folder: file calls then run on the host side, not as execs that the capped container could not fork.
    const ws = new DockerWorkspace({ workspaceId: uniqueId("lim"), basedir: tmp, baseImage: BASE_IMAGE, ...CAPS, teardown: "destroy" });
    opened.push(ws);
    await ws.initialize();
    return ws;
  };
  afterAll(async () => {
    await Promise.all(opened.map((w) => w.close().catch(() => undefined)));
  });

  it("a bounded fork bomb of twice the cap fails inside while the service and another workspace answer", async () => {
    const [victim, other] = await Promise.all([open(), open()]);
    await bombWhileOthersAnswer(victim, other);
  });

  it("an allocation over the memory cap fails inside", async () => {
    await allocationOverCapFails(await open());
  });
});
