import { randomBytes } from "node:crypto";
import { Sandbox } from "e2b";
import { afterAll, describe, expect, it } from "vitest";
import { dockerClient } from "../../../sdk/backends/docker/client.js";
import { E2BDriver, REFERENCE_KEY } from "../../../sdk/backends/e2b/driver.js";
import { E2BSandbox } from "../../../sdk/backends/e2b/sandbox.js";
import { E2BWorkspace } from "../../../sdk/backends/e2b/index.js";
import type { Logger } from "../../../sdk/logger.js";
import { uniqueId } from "../../contract/fixture.js";
import { run } from "../../emulators/e2b/containers.js";
import { e2bConnection, e2bEmulator } from "../../support/e2b-emulator.js";

const emu = await e2bEmulator();
const docker = dockerClient();

/** Runner processes inside a sandbox's container, read from /proc as root: the runners and their base64 wrappers. */
const PS = String.raw`
import os
for p in os.listdir("/proc"):
    if not p.isdigit() or int(p) == os.getpid():
        continue
    try:
        if open("/proc/%s/comm" % p).read().strip() == "sleep" and open("/proc/%s/cmdline" % p).read().startswith("sleep\0" + "60"):
            print("sleep", p)
    except OSError:
        pass
    try:
        a = open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")
    except OSError:
        continue
    if len(a) > 4 and a[3] == b"-c":
        if a[4].lstrip().startswith(b"import errno, os, select, stat"):
            print("runner", p)
        elif b"import base64, os, subprocess" in a[4]:
            print("wrapper", p)
`;

describe.skipIf(!emu)("E2B backend: the in-sandbox runner (emulator)", () => {
  const conn = () => e2bConnection(emu!);
  const driver = new E2BDriver(conn());
  const containerOf = (id: string) => docker.getContainer(emu!.sandboxes().find((s) => s.metadata[REFERENCE_KEY] === id)!.containerId);
  const processes = async (id: string): Promise<{ runner: number[]; wrapper: number[]; sleep: number[] }> => {
    const r = await run(docker, containerOf(id), ["python3", "-I", "-S", "-c", PS], { user: "root", cwd: "/" });
    const out = { runner: [] as number[], wrapper: [] as number[], sleep: [] as number[] };
    for (const line of r.stdout.toString().trim().split("\n").filter(Boolean)) {
      const [kind, pid] = line.split(" ");
      out[kind as "runner" | "wrapper" | "sleep"].push(Number(pid));
    }
    return out;
  };
  const runners = async (id: string) => {
    const { runner, wrapper } = await processes(id);
    return { runner, wrapper };
  };
  /** Waits (bounded) until the sandbox holds `n` runners, each with its wrapper; what it holds then. */
  const settle = async (id: string, n: number) => {
    let got = await runners(id);
    for (let i = 0; i < 50 && (got.runner.length !== n || got.wrapper.length !== n); i++) {
      await new Promise((r) => setTimeout(r, 200));
      got = await runners(id);
    }
    return got;
  };
  const fresh = async () => {
    const id = uniqueId("e2b-run");
    await driver.create({ workspaceId: id, managedBy: "runtime" });
    return { id, sb: await driver.connect(id) };
  };

  afterAll(async () => {
    await emu?.close();
  });

  it("carries every byte value exactly: file contents, exec stdin and exec output", async () => {
    const { id, sb } = await fresh();
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await sb.writeFile("bin/all.bin", all);
    expect((await sb.readFile("bin/all.bin")).equals(all)).toBe(true);
    const cat = await sb.exec(["cat"], { stdin: all });
    expect(cat.exitCode).toBe(0);
    expect(cat.stdout.equals(all)).toBe(true);
    const out = await sb.exec(["python3", "-c", "import sys; sys.stdout.buffer.write(bytes(range(256))); sys.stderr.buffer.write(bytes(range(255, -1, -1)))"]);
    expect(out.stdout.equals(all)).toBe(true);
    expect(out.stderr.equals(Buffer.from([...all].reverse()))).toBe(true);
    const big = randomBytes(3 * 1024 * 1024 + 5);
    const mark = emu!.transfers.length;
    await sb.writeFile("bin/big.bin", big);
    expect((await sb.readFile("bin/big.bin")).equals(big)).toBe(true);
    // Through the files API at the runner's own descriptor links (an upload pipe, then the held file), never a workspace name.
    const [runner] = (await runners(id)).runner;
    const moved = emu!.transfers.slice(mark);
    expect(moved.map((t) => t.route)).toEqual(["upload", "download"]);
    for (const t of moved) expect(t.path).toMatch(new RegExp(`^/proc/${runner}/fd/\\d+$`));
    expect((await sb.exec(["sha256sum", "bin/big.bin"])).stdout.toString().split(" ")[0]).toBe(
      (await import("node:crypto")).createHash("sha256").update(big).digest("hex"),
    );
    expect(sb.runnerMode).toBe("runner");
    // Big files cross through the files API, but the runner still resolves their paths: no symlink leads out.
    expect((await sb.exec(["ln", "-s", "/tmp", "out"])).exitCode).toBe(0);
    await expect(sb.writeFile("out/big.bin", big)).rejects.toMatchObject({ code: "path_escape" });
    expect((await sb.exec(["sh", "-c", "test -e /tmp/big.bin && echo leaked || echo none"])).stdout.toString()).toBe("none\n");
    expect((await sb.exec(["sh", "-c", "head -c 200000 /dev/zero > /tmp/outside.bin"])).exitCode).toBe(0);
    await expect(sb.readFile("out/outside.bin")).rejects.toMatchObject({ code: "path_escape" });
    await expect(sb.writeFile("bin/big.bin", big, { exclusive: true })).rejects.toMatchObject({ code: "conflict" });
    await expect(sb.readFile("bin/big.bin", { maxBytes: 1000 })).rejects.toMatchObject({ code: "too_large" });
    await sb.close();
    await driver.destroy(id, { deleteData: true });
  });

  it("a runner killed inside the sandbox fails the calls in flight; the next call gets a fresh runner", async () => {
    const { id, sb } = await fresh();
    expect((await sb.exec(["true"])).exitCode).toBe(0);
    const before = await settle(id, 1);
    expect(before.runner).toHaveLength(1);
    const inFlight = sb.exec(["sleep", "60"]);
    // The call is in flight once its sleep runs.
    for (let i = 0; i < 100 && (await processes(id)).sleep.length === 0; i++) await new Promise((res) => setTimeout(res, 100));
    const other = await Sandbox.connect(sb.sandboxId, conn());
    await other.commands.run(`kill -9 ${before.runner[0]}`);
    const r = await inFlight;
    expect(r.exitCode).toBe(-1);
    expect(r.stderr.toString()).toMatch(/runner stopped/);
    const again = await sb.exec(["sh", "-c", "echo back"]);
    expect(again.stdout.toString()).toBe("back\n");
    await sb.writeFile("after.txt", "fresh runner");
    expect((await sb.readFile("after.txt")).toString()).toBe("fresh runner");
    const after = await settle(id, 1);
    expect(after.runner).toHaveLength(1);
    expect(after.runner[0]).not.toBe(before.runner[0]);
    await sb.close();
    await driver.destroy(id, { deleteData: true });
  });

  it("after a pause under an open handle and a resume, calls work and the sandbox keeps one runner", async () => {
    const { id, sb } = await fresh();
    await sb.writeFile("kept.txt", "before the pause");
    expect((await settle(id, 1)).runner).toHaveLength(1);
    const old = await runners(id);
    // A pause drops every connection (the runner's stream too); its process is frozen and lives on.
    await driver.pause(id);
    await driver.resume(id);
    expect((await sb.readFile("kept.txt")).toString()).toBe("before the pause");
    expect((await sb.exec(["sh", "-c", "echo ok"])).stdout.toString()).toBe("ok\n");
    const now = await settle(id, 1);
    expect(now.runner).toHaveLength(1);
    expect(now.wrapper).toHaveLength(1);
    expect(now.runner[0]).not.toBe(old.runner[0]);
    await sb.close();
    expect(await settle(id, 0)).toEqual({ runner: [], wrapper: [] });
    await driver.destroy(id, { deleteData: true });
  });

  it("a workspace closed (paused) and initialized again (resumed) keeps one runner, and close() leaves none", async () => {
    const id = uniqueId("e2b-runws");
    const ws = new E2BWorkspace({ workspaceId: id, ...conn() });
    await ws.initialize();
    await ws.getBackend().writeFile("a.txt", "one");
    await ws.close();
    const again = new E2BWorkspace({ workspaceId: id, ...conn() });
    await again.initialize();
    expect(again.ensureOutcome).toBe("resumed");
    expect((await again.getBackend().readFile("a.txt")).toString()).toBe("one");
    expect((await again.getBackend().exec(["true"])).exitCode).toBe(0);
    const live = await settle(id, 1);
    expect(live.runner).toHaveLength(1);
    expect(live.wrapper).toHaveLength(1);
    await again.close({ keepBackend: true });
    expect(await settle(id, 0)).toEqual({ runner: [], wrapper: [] });
    await driver.destroy(id, { deleteData: true });
  });

  it("a sandbox without python3 falls back to commands and confined scripts, said once in the log", async () => {
    const sbx = await Sandbox.create({ ...conn(), metadata: { [REFERENCE_KEY]: uniqueId("e2b-nopy") } });
    await sbx.commands.run("rm -f /usr/bin/python3 /usr/local/bin/python3 && ! command -v python3", { user: "root" });
    const warnings: string[] = [];
    const logger: Logger = { debug: () => undefined, info: () => undefined, error: () => undefined, warn: (m) => void warnings.push(m) };
    const sb = new E2BSandbox(sbx, { logger });
    expect((await sb.exec(["sh", "-c", "echo plain"])).stdout.toString()).toBe("plain\n");
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await sb.writeFile("d/all.bin", all);
    expect((await sb.readFile("d/all.bin")).equals(all)).toBe(true);
    expect((await sb.list("d")).map((e) => e.name)).toEqual(["all.bin"]);
    await expect(sb.readFile("missing")).rejects.toMatchObject({ code: "not_found" });
    expect(sb.runnerMode).toBe("plain");
    expect(warnings.filter((w) => /python3/.test(w))).toHaveLength(1);
    await sb.close();
    await Sandbox.kill(sbx.sandboxId, conn());
  });
});
