// Size: the Daytona backend's runner proofs, sharing one emulator: exact bytes both ways, big files at the runner's descriptors (escapes, a killed write, the fallback), a runner killed from inside, stop/start, close, the fallback without python3.
import { createHash, randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { DaytonaDriver } from "../../../sdk/backends/daytona/driver.js";
import { DaytonaSandbox } from "../../../sdk/backends/daytona/sandbox.js";
import { DaytonaWorkspace } from "../../../sdk/backends/daytona/index.js";
import { q } from "../../../sdk/backends/daytona/scripts.js";
import type { Logger } from "../../../sdk/logger.js";
import { uniqueId } from "../../contract/fixture.js";
import { emulatorSpec, startDaytonaEmulator } from "../../support/daytona-emulator.js";
import { expectFallbackFileOps } from "../../support/fallback-checks.js";

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
    if len(a) > 5 and a[3] == b"-c" and a[4].lstrip().startswith(b"import errno, os, select, stat") and a[5] == root:
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

  /** The toolbox file transfers made since `from` (an index into emu.transfers). */
  const transfersSince = (from: number) => emu.transfers.slice(from);
  const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

  it("big files cross the toolbox's file routes at the runner's own descriptors, byte-exact both ways, and no symlink leads them out", async () => {
    const { sb } = await connected();
    try {
      await sb.exec(["true"]);
      const [pid] = await runners(sb);
      const big = randomBytes(3 * 1024 * 1024 + 7);
      let mark = emu.transfers.length;
      await sb.writeFile("bin/big.bin", big);
      // One upload, at /proc/<the runner's pid>/fd/<n>: never at a workspace name.
      const up = transfersSince(mark);
      expect(up).toHaveLength(1);
      expect(up[0]!.route).toBe("upload");
      expect(up[0]!.path).toMatch(new RegExp(`^/proc/${pid}/fd/\\d+$`));
      expect((await sb.exec(["sha256sum", "bin/big.bin"])).stdout.toString().split(" ")[0]).toBe(sha(big));
      mark = emu.transfers.length;
      expect((await sb.readFile("bin/big.bin")).equals(big)).toBe(true);
      const down = transfersSince(mark);
      expect(down).toHaveLength(1);
      expect(down[0]).toMatchObject({ route: "download" });
      expect(down[0]!.path).toMatch(new RegExp(`^/proc/${pid}/fd/\\d+$`));
      // A replace keeps the file's modes; an exclusive write refuses an existing name; a cap holds.
      expect((await sb.exec(["chmod", "750", "bin/big.bin"])).exitCode).toBe(0);
      const next = randomBytes(200_000);
      await sb.writeFile("bin/big.bin", next);
      expect((await sb.readFile("bin/big.bin")).equals(next)).toBe(true);
      expect((await sb.exec(["stat", "-c", "%a", "bin/big.bin"])).stdout.toString().trim()).toBe("750");
      await expect(sb.writeFile("bin/big.bin", big, { exclusive: true })).rejects.toMatchObject({ code: "conflict" });
      await expect(sb.readFile("bin/big.bin", { maxBytes: 1000 })).rejects.toMatchObject({ code: "too_large" });
      // A symlink planted at the target is refused, never written through; a symlinked folder leads nowhere out.
      expect((await sb.exec(["sh", "-c", "printf outside > /tmp/outside.txt && ln -s /tmp/outside.txt bin/link.bin && ln -s /tmp out"])).exitCode).toBe(0);
      await expect(sb.writeFile("bin/link.bin", big)).rejects.toMatchObject({ code: "path_escape" });
      await expect(sb.writeFile("out/big.bin", big)).rejects.toMatchObject({ code: "path_escape" });
      expect((await sb.exec(["sh", "-c", "cat /tmp/outside.txt; test -e /tmp/big.bin && echo leaked"])).stdout.toString()).toBe("outside");
      expect((await sb.exec(["sh", "-c", "head -c 200000 /dev/zero > /tmp/outside.bin"])).exitCode).toBe(0);
      await expect(sb.readFile("out/outside.bin")).rejects.toMatchObject({ code: "path_escape" });
      // A link swapped in for the file after its write is refused too (the read opens it no-follow).
      expect((await sb.exec(["sh", "-c", "ln -sf /tmp/outside.bin bin/big.bin"])).exitCode).toBe(0);
      await expect(sb.readFile("bin/big.bin")).rejects.toMatchObject({ code: "path_escape" });
      // Nothing of the transfers is left in the folder (the spare files have no name).
      expect((await sb.exec(["ls", "-A", "bin"])).stdout.toString().split("\n").filter(Boolean).sort()).toEqual(["big.bin", "link.bin"]);
    } finally {
      await sb.close();
    }
  });

  it("a big write whose runner is killed during the transfer fails and leaves the old file as it was", async () => {
    const { sb } = await connected();
    try {
      const old = randomBytes(300_000);
      await sb.writeFile("keep.bin", old);
      const [pid] = await runners(sb);
      emu.faults.transferDelayMs = 1500;
      const mark = emu.transfers.length;
      let write: Promise<void>;
      try {
        write = sb.writeFile("keep.bin", randomBytes(2 * 1024 * 1024));
        write.catch(() => undefined);
        // The upload is in flight (held by the fault) when the runner dies.
        for (let i = 0; i < 200 && transfersSince(mark).length === 0; i++) await new Promise((r) => setTimeout(r, 10));
        expect(transfersSince(mark)[0]?.path).toMatch(new RegExp(`^/proc/${pid}/fd/\\d+$`));
        const box = await sdkSandbox(sb.sandboxId);
        expect((await box.process.executeCommand(`kill -9 ${pid}`)).exitCode).toBe(0);
        await expect(write).rejects.toMatchObject({ code: "unavailable" });
      } finally {
        emu.faults.transferDelayMs = 0;
      }
      expect((await sb.readFile("keep.bin")).equals(old)).toBe(true);
      expect((await sb.exec(["ls", "-A"])).stdout.toString().split("\n").filter(Boolean)).toEqual(["keep.bin"]);
    } finally {
      await sb.close();
    }
  });

  it("falls back to the runner's session when the toolbox refuses the descriptor links, saying so once", async () => {
    const { sb } = await connected();
    const warned: string[] = [];
    const logger: Logger = { debug: () => undefined, info: () => undefined, error: () => undefined, warn: (m) => void warned.push(m) };
    const other = new DaytonaSandbox(await sdkSandbox(sb.sandboxId), sb.workdir, { logger });
    emu.faults.procFdRefused = true;
    try {
      const a = randomBytes(1024 * 1024 + 3);
      const b = randomBytes(2 * 1024 * 1024 + 1);
      const mark = emu.transfers.length;
      await other.writeFile("fb/a.bin", a);
      expect((await other.readFile("fb/a.bin")).equals(a)).toBe(true);
      await other.writeFile("fb/b.bin", b);
      expect((await other.readFile("fb/b.bin")).equals(b)).toBe(true);
      // Tried once (refused), then the session carried every byte: no more transfers, one warning.
      expect(transfersSince(mark).map((t) => t.route)).toEqual(["upload"]);
      expect(warned).toHaveLength(1);
      expect(warned[0]).toMatch(/descriptor/);
      expect((await sb.exec(["sha256sum", "fb/a.bin", "fb/b.bin"])).stdout.toString()).toBe(`${sha(a)}  fb/a.bin\n${sha(b)}  fb/b.bin\n`);
    } finally {
      emu.faults.procFdRefused = false;
      await other.close();
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
      await expectFallbackFileOps(plain);
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
