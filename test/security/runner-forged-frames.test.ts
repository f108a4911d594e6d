/**
 * Issue 25, found 2 to 4: an agent that became its runner forges frames. Here the runner inside a real
 * Bubblewrap sandbox (and a real Docker container when the engine is up) is replaced by a hostile
 * program, started by the backend's own transport start function: a 600 MiB header, a size of -1, a
 * 4 GiB payload claim with 1 GiB sent, a descriptor hand-off of /proc/kallsyms with the runner's own
 * numbers. This process (the service) must survive each, its memory must not take the claimed sizes,
 * the caller gets a typed error (or the sandbox's own view of a file), and the next call works on a
 * fresh, honest runner. Failed on main 5e43587: the header crashed the worker (ERR_STRING_TOO_LONG),
 * `s -1` threw a RangeError from the stream listener, the claim pinned the bytes and hung the call,
 * and the hand-off returned the host's real kernel addresses.
 */
import { promises as fs, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapSandbox } from "../../sdk/backends/bubblewrap/sandbox.js";
import { BwrapLauncher } from "../../sdk/backends/bubblewrap/launch.js";
import { startBwrapRunner } from "../../sdk/backends/bubblewrap/runner.js";
import { dockerClient } from "../../sdk/backends/docker/client.js";
import { startDockerRunner } from "../../sdk/backends/docker/runner.js";
import { RunnerFiles, RunnerSupervisor, RUNNER_SOURCE, type RunnerTransport } from "../../sdk/kit/runner/index.js";
import { isWorkspaceError } from "../../sdk/errors.js";
import { BASE_IMAGE, dockerEngine } from "../support/docker-engine.js";
import { hostileRunnerSource, type HostileMode } from "../support/hostile-runner.js";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const MiB = 1 << 20;

/** Resident memory after a full collection. */
function rss(): number {
  gc();
  gc();
  return process.memoryUsage().rss;
}

async function within<T>(p: Promise<T>, ms = 30_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** A kallsyms line with a real (non-zero) kernel address. */
const REAL_ADDRESS = /^0*[1-9a-f][0-9a-f]* [a-zA-Z] /m;

/** The attacks, against one backend whose transport starts a runner from `source` in a workspace at `hostRoot`. */
function attacks(env: () => { hostRoot: string; start: (source: string) => RunnerTransport }): void {
  /** A supervisor whose first runner is the hostile one, every later one the real runner. */
  const harness = (mode: HostileMode) => {
    let n = 0;
    const sup = new RunnerSupervisor(() => env().start(n++ === 0 ? hostileRunnerSource(mode) : RUNNER_SOURCE));
    return { sup, files: new RunnerFiles(async () => ({ client: sup.get() })) };
  };
  /** The next calls run on a fresh, honest runner in the same sandbox. */
  const works = async (h: ReturnType<typeof harness>) => {
    await h.files.writeFile("after.txt", "still served");
    expect((await h.files.readFile("after.txt", { maxBytes: 100 })).toString()).toBe("still served");
    const r = await h.sup.get().exec({ argv: ["echo", "ok"], cwd: "", env: {}, maxOutputBytes: 100, timeoutMs: 20_000 });
    expect(r.stdout.toString()).toBe("ok\n");
  };
  const unavailable = async (p: Promise<unknown>) => {
    const e = await within(p).then(
      () => new Error("the forged call succeeded"),
      (x: unknown) => x,
    );
    expect(isWorkspaceError(e) && e.code, String(e)).toBe("unavailable");
    return e as Error;
  };

  it("a 600 MiB header: the runner is ended, the process lives and does not buffer it", async () => {
    const h = harness("header");
    try {
      const before = rss();
      const e = await unavailable(h.files.stat("a"));
      expect(e.message).toMatch(/header/);
      expect(rss() - before).toBeLessThan(200 * MiB);
      await works(h);
    } finally {
      await h.sup.stop();
    }
  });

  it("a size frame of -1 for a read", async () => {
    const h = harness("size");
    try {
      expect((await unavailable(h.files.readFile("a", { maxBytes: 1000 }))).message).toMatch(/size/);
      await works(h);
    } finally {
      await h.sup.stop();
    }
  });

  it("a 4 GiB payload claim with 1 GiB sent: refused on its header, host memory untouched", async () => {
    const h = harness("claim");
    try {
      const before = rss();
      expect((await unavailable(h.files.readFile("a", { maxBytes: 1000 }))).message).toMatch(/over its/);
      expect(rss() - before).toBeLessThan(200 * MiB);
      await works(h);
    } finally {
      await h.sup.stop();
    }
  });

  it("a hand-off of /proc/kallsyms with the runner's own numbers is refused: no real kernel address reaches the host's caller", async () => {
    await fs.writeFile(path.join(env().hostRoot, "big.bin"), Buffer.alloc(200_000, 1));
    const h = harness("kallsyms");
    try {
      // The host offers the hand-off (a big file, the runner on this kernel); what comes back is only
      // ever the sandbox's own view of what the runner pointed at (zeros), through the channel.
      // After the hello: the host then knows the runner's pid and offers the hand-off (R).
      await within(h.sup.get().ready);
      const got = (await within(h.files.readFile("big.bin"))).toString("latin1");
      expect(REAL_ADDRESS.test(got), got.slice(0, 200)).toBe(false);
      expect(got).toMatch(/^0{16} [tT] /m);
      // A refused hand-off is no breach by itself (an honest runner may hand off a file on a nested
      // mount): that runner lives on, so it is stopped here before the honest round trip.
      await h.sup.stop();
      await works(h);
    } finally {
      await h.sup.stop();
    }
  });
}

describe("forged runner frames against a real Bubblewrap sandbox", () => {
  let dir: string;
  let sb: BubblewrapSandbox;
  let args: string[];
  let device: bigint;
  beforeAll(async () => {
    dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "agentws-forged-")));
    await fs.mkdir(path.join(dir, "ws"));
    await fs.mkdir(path.join(dir, "tmp"));
    sb = await BubblewrapSandbox.open({ hostRoot: path.join(dir, "ws"), hostTmp: path.join(dir, "tmp"), network: "none", persistent: true });
    // The backend's own bwrap argv for its runner (mounts, environment, --chdir /workspace --).
    args = await sb.argvFor([]);
    device = statSync(path.join(dir, "ws"), { bigint: true }).dev;
  });
  afterAll(async () => {
    await sb?.close();
    await fs.rm(dir, { recursive: true, force: true });
  });
  const launcher = new BwrapLauncher();
  attacks(() => ({ hostRoot: path.join(dir, "ws"), start: (source) => startBwrapRunner(launcher, args, sb.workdir, device, source) }));
});

const engine = await dockerEngine().catch(() => null);

describe.skipIf(!engine)("forged runner frames against a real Docker container (host folder shared)", () => {
  let dir: string;
  let docker: Docker;
  let container: Docker.Container;
  let device: bigint;
  beforeAll(async () => {
    dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "agentws-forged-dk-")));
    await fs.chmod(dir, 0o777);
    docker = dockerClient();
    container = await docker.createContainer({
      Image: BASE_IMAGE,
      Cmd: ["sleep", "infinity"],
      HostConfig: { Binds: [`${dir}:/workspace`] },
      Labels: { "agentws.test": "forged-frames" },
    });
    await container.start();
    device = statSync(dir, { bigint: true }).dev;
  });
  afterAll(async () => {
    await container?.remove({ force: true }).catch(() => undefined);
    await fs.rm(dir, { recursive: true, force: true });
  });
  attacks(() => ({ hostRoot: dir, start: (source) => startDockerRunner(docker, container, [], "/workspace", true, device, source) }));
});
