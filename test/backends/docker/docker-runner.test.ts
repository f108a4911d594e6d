import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerDriver } from "../../../sdk/backends/docker/driver.js";
import type { Logger } from "../../../sdk/logger.js";
import { uniqueId } from "../../contract/fixture.js";
import { BASE_IMAGE, dockerEngine } from "../../support/docker-engine.js";

const engine = await dockerEngine();

function recordingLogger(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  const noop = () => undefined;
  return { warnings, debug: noop, info: noop, error: noop, warn: (msg) => void warnings.push(msg) };
}

describe.skipIf(!engine)("Docker through the in-sandbox runner", () => {
  let basedir: string;
  const made: string[] = [];
  const driver = () => new DockerDriver({ basedir, baseImage: BASE_IMAGE });
  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-docker-runner-"));
  });
  afterAll(async () => {
    await Promise.all(
      made.map((w) =>
        driver()
          .destroy(w, { deleteData: true })
          .catch(() => undefined),
      ),
    );
    await fs.rm(basedir, { recursive: true, force: true });
  });

  it("serves exec and files through one runner; an image without python3 falls back to plain exec, said once", async () => {
    // A writable rootfs (the opt-out), so the test can take python3 away from inside.
    const d = new DockerDriver({ basedir, baseImage: BASE_IMAGE, readOnlyRootfs: false });
    const w = uniqueId("dkr");
    made.push(w);
    await d.create({ workspaceId: w, managedBy: "runtime" });
    const sb = await d.connect(w);
    const count = "cat /proc/[0-9]*/cmdline | tr '\\0' ' ' | grep -c 'sleep 97[.]5 ' || true";
    // Alive while its command runs, gone with it: setsid does not escape the runner.
    expect((await sb.exec(["sh", "-c", `setsid sleep 97.5 >/dev/null 2>&1 & sleep 0.2; ${count}`])).stdout.toString().trim()).toBe("1");
    expect(sb.runnerMode).toBe("runner");
    expect((await sb.exec(["sh", "-c", count])).stdout.toString().trim()).toBe("0");
    await sb.writeFile("a/b.txt", "via runner", { mode: 0o750 });
    expect((await sb.exec(["stat", "-c", "%a %s", "a/b.txt"])).stdout.toString().trim()).toBe("750 10");
    expect((await sb.exec(["pwd"], { cwd: "a" })).stdout.toString().trim()).toBe("/workspace/a");
    // Take python3 away: a fresh handle cannot start a runner and falls back.
    expect((await sb.exec(["sh", "-c", "rm /usr/bin/python3 /usr/bin/python3.*"])).exitCode).toBe(0);
    // The running runner still works (a closed handle would park it for the next one): kill it, so
    // the next handle has to start a new one. A command's parent is the runner.
    await sb.exec(["sh", "-c", "kill -9 $PPID"]);
    for (let i = 0; i < 100 && sb.runnerAlive; i++) await new Promise((r) => setTimeout(r, 50));
    expect(sb.runnerAlive).toBe(false);
    await sb.close();
    const logger = recordingLogger();
    const plain = await d.connect(w, { logger });
    expect((await plain.readFile("a/b.txt")).toString()).toBe("via runner");
    expect(plain.runnerMode).toBe("plain");
    await plain.writeFile("a/c.txt", "plain");
    expect((await plain.exec(["cat", "a/c.txt"])).stdout.toString()).toBe("plain");
    expect((await plain.readDirTyped("a")).map((e) => e.name).sort()).toEqual(["b.txt", "c.txt"]);
    await plain.copyTree("a", "copy");
    expect((await plain.list("copy")).map((e) => e.name).sort()).toEqual(["b.txt", "c.txt"]);
    expect(logger.warnings.filter((m) => /python3/.test(m))).toHaveLength(1);
    await plain.close();
  });

  it("a closed handle's idle runner serves the next handle on the container (an idle eviction's resume skips the runner start)", async () => {
    const d = driver();
    const w = uniqueId("dkp");
    made.push(w);
    await d.create({ workspaceId: w, managedBy: "runtime" });
    const first = await d.connect(w);
    const pid = (await first.exec(["sh", "-c", "echo $PPID"])).stdout.toString().trim();
    await first.close();
    await d.pause(w);
    await d.resume(w);
    const second = await d.connect(w);
    expect(second.runnerMode).toBe("runner");
    expect((await second.exec(["sh", "-c", "echo $PPID"])).stdout.toString().trim()).toBe(pid);
    await second.writeFile("p.txt", "after resume");
    expect((await second.readFile("p.txt")).toString()).toBe("after resume");
    // A handle closed while a call is in flight does not park its runner: the next one starts afresh.
    const slow = second.exec(["sleep", "1"]);
    await new Promise((r) => setTimeout(r, 300));
    await second.close();
    await slow;
    const third = await d.connect(w);
    expect((await third.exec(["sh", "-c", "echo $PPID"])).stdout.toString().trim()).not.toBe(pid);
    await third.close();
  });

  it("spawns through the runner over its private pipe pair; close and the runner's death end what it spawned", async () => {
    const d = driver();
    const w = uniqueId("dks");
    made.push(w);
    await d.create({ workspaceId: w, managedBy: "runtime" });
    const sb = await d.connect(w);
    const runner = (await sb.exec(["sh", "-c", "echo $PPID"])).stdout.toString().trim();
    // The engine shares this kernel (the host folder is seen): calls move off the dockerd relay.
    for (let i = 0; i < 100 && sb.runnerChannel !== "private"; i++) await new Promise((r) => setTimeout(r, 20));
    expect(sb.runnerChannel).toBe("private");
    const p = sb.spawn(["sh", "-c", 'echo "ppid:$PPID"; while read l; do echo "out:$l"; done; echo bye >&2']);
    const out = collect(p.stdout);
    const err = collect(p.stderr);
    p.stdin.end("one\ntwo\n");
    expect(await p.exited).toBe(0);
    // A child of the runner, not an engine exec of its own.
    expect((await out).toString()).toBe(`ppid:${runner}\nout:one\nout:two\n`);
    expect((await err).toString()).toBe("bye\n");
    const big = Buffer.alloc(3 << 20, 7);
    await sb.writeFile("big.bin", big);
    expect((await sb.readFile("big.bin")).equals(big)).toBe(true);
    const count = (secs: string) => `cat /proc/[0-9]*/cmdline | tr '\\0' ' ' | grep -c 'sleep ${secs.replace(".", "[.]")}' || true`;
    const running = async (secs: string) => (await sb.exec(["sh", "-c", count(secs)])).stdout.toString().trim();
    // The runner killed under a live process: it settles at once, and the next call gets a fresh runner.
    const held = sb.spawn(["sleep", "98.5"]);
    for (let i = 0; i < 50 && (await running("98.5")) !== "1"; i++) await new Promise((r) => setTimeout(r, 20));
    await sb.exec(["sh", "-c", `kill -9 ${runner}`]);
    expect(await held.exited).toBeNull();
    expect((await sb.exec(["sh", "-c", "echo $PPID"])).stdout.toString().trim()).not.toBe(runner);
    // (A runner killed outright cannot take its orphan down inside a container; it dies with the container.)
    // close() with a live process stops the runner (it is not parked) and the process with it.
    const live = sb.spawn(["sleep", "98.6"]);
    for (let i = 0; i < 50 && (await running("98.6")) !== "1"; i++) await new Promise((r) => setTimeout(r, 20));
    await sb.close();
    expect(await live.exited).toBeNull();
    const next = await d.connect(w);
    let left = "1";
    for (let i = 0; i < 50 && left !== "0"; i++) left = (await next.exec(["sh", "-c", count("98.6")])).stdout.toString().trim();
    expect(left).toBe("0");
    await next.close();
  });
});

function collect(s: NodeJS.ReadableStream): Promise<Buffer> {
  const parts: Buffer[] = [];
  s.on("data", (c: Buffer) => parts.push(c));
  return new Promise((resolve) => s.once("end", () => resolve(Buffer.concat(parts))));
}
