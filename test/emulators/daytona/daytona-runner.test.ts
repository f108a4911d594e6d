// Size: the Daytona backend's runner proofs, sharing one emulator: exact bytes both ways, a runner killed from inside, stop/start, close, the fallback without python3.
import { afterAll, describe, expect, it } from "vitest";
import { DaytonaDriver } from "../../../sdk/backends/daytona/driver.js";
import { DaytonaSandbox } from "../../../sdk/backends/daytona/sandbox.js";
import { DaytonaWorkspace } from "../../../sdk/backends/daytona/workspace.js";
import { q } from "../../../sdk/backends/daytona/scripts.js";
import type { Logger } from "../../../sdk/logger.js";
import { uniqueId } from "../../contract/fixture.js";
import { emulatorSpec, startDaytonaEmulator } from "../../support/daytona-emulator.js";

const emulator = await startDaytonaEmulator();

/** All 256 byte values, several times over, in a shuffled order (no accidental text). */
const ALL_BYTES = Buffer.from(Array.from({ length: 256 * 4 }, (_, i) => (i * 167 + 13) % 256));

/**
 * Lists the pids of runner processes rooted at `root` (argv: python -I -S -c <runner source> <root>),
 * from a toolbox command of its own (not through the runner).
 */
const SCAN = `import os, sys
root = sys.argv[1].encode()
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        a = open("/proc/%s/cmdline" % p, "rb").read().split(b"\\0")
    except OSError:
        continue
    if len(a) > 5 and a[3] == b"-c" and a[4].startswith(b"\\nimport errno, os, selectors") and a[5] == root:
        print("RUNNER", p)
`;

describe.skipIf(!emulator)("Daytona backend through the emulator: the runner", () => {
  const emu = emulator!;
  const made = new Set<string>();
  const id = (p = "dtr") => {
    const w = uniqueId(p);
    made.add(w);
    return w;
  };
  const driver = () => new DaytonaDriver(emulatorSpec(emu));
  const sdkSandbox = (sandboxId: string) => driver().client.get(sandboxId);
  /** Pids of the runners serving this workspace root, seen from inside the sandbox. */
  const runners = async (sb: DaytonaSandbox): Promise<string[]> => {
    const box = await sdkSandbox(sb.sandboxId);
    const r = await box.process.executeCommand(`python3 -c ${q(SCAN)} ${q(sb.workdir)}`);
    expect(r.exitCode, r.result).toBe(0);
    return [...(r.result ?? "").matchAll(/^RUNNER (\d+)$/gm)].map((m) => m[1]!);
  };
  const connected = async () => {
    const w = id();
    const d = driver();
    await d.create({ workspaceId: w, managedBy: "runtime" });
    return { w, d, sb: await d.connect(w) };
  };

  afterAll(async () => {
    const d = driver();
    await Promise.all([...made].map((w) => d.destroy(w).catch(() => undefined)));
    await emu.close();
  });

  it("carries every byte value exactly: file contents, exec stdout and stderr, exec stdin", async () => {
    const { sb } = await connected();
    try {
      await sb.writeFile("bin/all.bin", ALL_BYTES);
      expect(sb.runnerMode).toBe("runner");
      expect((await sb.readFile("bin/all.bin")).equals(ALL_BYTES)).toBe(true);
      const cat = await sb.exec(["cat", "bin/all.bin"]);
      expect(cat.exitCode).toBe(0);
      expect(cat.stdout.equals(ALL_BYTES)).toBe(true);
      const err = await sb.exec(["sh", "-c", "cat bin/all.bin >&2"]);
      expect(err.stderr.equals(ALL_BYTES)).toBe(true);
      expect(err.stdout.length).toBe(0);
      const echo = await sb.exec(["cat"], { stdin: ALL_BYTES });
      expect(echo.stdout.equals(ALL_BYTES)).toBe(true);
      await sb.appendFile("bin/all.bin", ALL_BYTES);
      expect((await sb.readFile("bin/all.bin")).equals(Buffer.concat([ALL_BYTES, ALL_BYTES]))).toBe(true);
      const sha = await sb.exec(["sha256sum", "bin/all.bin"]);
      expect(sha.stdout.toString()).toMatch(/^[0-9a-f]{64} /);
      // Bigger than one input call's batch and one output line of the wrapper.
      const big = Buffer.concat(Array.from({ length: 6 * 1024 }, () => ALL_BYTES));
      await sb.writeFile("bin/big.bin", big);
      expect((await sb.readFile("bin/big.bin")).equals(big)).toBe(true);
      expect((await sb.exec(["cat", "bin/big.bin"], { maxOutputBytes: big.length })).stdout.equals(big)).toBe(true);
    } finally {
      await sb.close();
    }
  });

  it("a runner killed inside the sandbox fails the calls in flight; the next call gets a fresh runner", async () => {
    const { sb } = await connected();
    try {
      expect((await sb.exec(["true"])).exitCode).toBe(0);
      const first = sb.runnerSession;
      const [pid, ...more] = await runners(sb);
      expect(pid).toBeDefined();
      expect(more).toEqual([]);
      const inFlight = sb.exec(["sleep", "60"]);
      const box = await sdkSandbox(sb.sandboxId);
      // The runner's own process, killed from a command that does not go through it.
      expect((await box.process.executeCommand(`kill -9 ${pid}`)).exitCode).toBe(0);
      const r = await inFlight;
      expect(r.exitCode).not.toBe(0);
      expect(r.stderr.toString()).toMatch(/runner stopped/);
      const after = await sb.exec(["sh", "-c", "echo fresh"]);
      expect(after.stdout.toString()).toBe("fresh\n");
      expect(sb.runnerSession).not.toBe(first);
      const now = await runners(sb);
      expect(now).toHaveLength(1);
      expect(now[0]).not.toBe(pid);
    } finally {
      await sb.close();
    }
  });

  it("after stop and start, files and calls work and only one runner remains", async () => {
    const { w, d, sb } = await connected();
    try {
      await sb.writeFile("kept.bin", ALL_BYTES);
      expect(await runners(sb)).toHaveLength(1);
      // The same handle across a stop and a start: its runner died with the sandbox's processes.
      await d.pause(w);
      await d.resume(w);
      expect((await sb.readFile("kept.bin")).equals(ALL_BYTES)).toBe(true);
      expect((await sb.exec(["cat", "kept.bin"])).stdout.equals(ALL_BYTES)).toBe(true);
      expect(await runners(sb)).toHaveLength(1);
    } finally {
      await sb.close();
    }
    // A workspace initialized (started) again after a stop.
    await d.pause(w);
    const ws = new DaytonaWorkspace({ workspaceId: w, ...emulatorSpec(emu) });
    await ws.initialize();
    try {
      expect(ws.ensureOutcome).toBe("resumed");
      const again = ws.getBackend();
      expect((await again.readFile("kept.bin")).equals(ALL_BYTES)).toBe(true);
      await again.writeFile("new.txt", "after restart");
      expect((await again.exec(["cat", "new.txt"])).stdout.toString()).toBe("after restart");
      const fresh = await d.connect(w);
      expect(await runners(fresh)).toHaveLength(1);
      await fresh.close();
    } finally {
      await ws.close();
    }
  });

  it("close() leaves no runner process behind, and a spawned process dies with it", async () => {
    const { sb, d, w } = await connected();
    const proc = sb.spawn(["sh", "-c", "echo up; exec cat"]);
    const first = await new Promise<string>((resolve) => proc.stdout.once("data", (c: Buffer) => resolve(c.toString())));
    expect(first).toBe("up\n");
    proc.stdin.write("echoed\n");
    const second = await new Promise<string>((resolve) => proc.stdout.once("data", (c: Buffer) => resolve(c.toString())));
    expect(second).toBe("echoed\n");
    expect(await runners(sb)).toHaveLength(1);
    await sb.close();
    expect(await proc.exited).not.toBe(0);
    const probe = await d.connect(w);
    const box = await sdkSandbox(probe.sandboxId);
    const scan = await box.process.executeCommand(`python3 -c ${q(SCAN)} ${q(probe.workdir)}`);
    expect(scan.result).not.toMatch(/RUNNER/);
    // No session of ours is left either.
    expect((await box.process.listSessions()).map((s) => s.sessionId).filter((s) => s.startsWith("agentws-"))).toEqual([]);
  });

  it("falls back to toolbox calls when the sandbox cannot run python3, saying so once", async () => {
    const { sb } = await connected();
    const warned: string[] = [];
    const logger: Logger = { debug: () => undefined, info: () => undefined, error: () => undefined, warn: (m) => void warned.push(m) };
    const plain = new DaytonaSandbox(await sdkSandbox(sb.sandboxId), sb.workdir, { logger, python: "/nonexistent/python3" });
    try {
      await plain.writeFile("plain/all.bin", ALL_BYTES);
      expect(plain.runnerMode).toBe("plain");
      expect((await plain.readFile("plain/all.bin")).equals(ALL_BYTES)).toBe(true);
      const r = await plain.exec(["sh", "-c", "printf plain; exit 3"]);
      expect(r).toMatchObject({ exitCode: 3 });
      expect(r.stdout.toString()).toBe("plain");
      expect((await plain.list("plain")).map((e) => e.name)).toEqual(["all.bin"]);
      expect(warned).toHaveLength(1);
      expect(warned[0]).toMatch(/python3/);
      // And the runner's sandbox reads what the fallback wrote.
      expect((await sb.readFile("plain/all.bin")).equals(ALL_BYTES)).toBe(true);
    } finally {
      await plain.close();
      await sb.close();
    }
  });
});
