/**
 * The host's side of the runner's descriptor hand-off (sdk/backends/shared/runner/handoff.ts), against
 * real processes holding real descriptors: only the very inode the runner reported is read or written,
 * never a special file, and a pid that is not the runner's is not taken for it.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { openSync, promises as fs, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { matchRunnerPid, readHandedOff, writeHandedOff } from "../sdk/backends/shared/runner/handoff.js";

describe("runner descriptor hand-off", () => {
  let dir: string;
  const kids: ChildProcess[] = [];
  /** A process holding `file` (or a pipe) as its fd 0. */
  const holder = (file?: string, flags = "r"): ChildProcess => {
    const c = spawn("sleep", ["60"], { stdio: [file ? openSync(file, flags) : "pipe", "ignore", "ignore"] });
    kids.push(c);
    return c;
  };
  const idOf = (p: string) => {
    const st = statSync(p, { bigint: true });
    return { dev: st.dev, ino: st.ino };
  };
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-handoff-"));
    await fs.writeFile(path.join(dir, "a"), "the runner's file");
    await fs.writeFile(path.join(dir, "b"), "another file");
  });
  afterAll(async () => {
    for (const c of kids) c.kill("SIGKILL");
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("reads the reported inode, and refuses a descriptor that is another file", async () => {
    const a = path.join(dir, "a");
    const c = holder(a);
    expect((await readHandedOff(c.pid!, { fd: 0, ...idOf(a) }, 17, undefined)).toString()).toBe("the runner's file");
    await expect(readHandedOff(c.pid!, { fd: 0, ...idOf(path.join(dir, "b")) }, 12, undefined)).rejects.toThrow(/not the runner's file/);
  });

  it("bounds a read by maxBytes even when the file grew past the size reported", async () => {
    const a = path.join(dir, "grown");
    await fs.writeFile(a, Buffer.alloc(200_000, 1));
    const c = holder(a);
    await expect(readHandedOff(c.pid!, { fd: 0, ...idOf(a) }, 10, 100_000)).rejects.toMatchObject({ code: "TOOBIG" });
  });

  it("never writes to an inode other than the reported one", async () => {
    const a = path.join(dir, "w");
    await fs.writeFile(a, "old");
    const c = holder(a, "r+");
    await expect(writeHandedOff(c.pid!, { fd: 0, ...idOf(path.join(dir, "b")) }, Buffer.from("new"))).rejects.toThrow(/not the runner's file/);
    expect(await fs.readFile(a, "utf8")).toBe("old");
    expect(await fs.readFile(path.join(dir, "b"), "utf8")).toBe("another file");
    await writeHandedOff(c.pid!, { fd: 0, ...idOf(a) }, Buffer.from("new"));
    expect(await fs.readFile(a, "utf8")).toBe("new");
  });

  it("refuses a pipe without blocking, whatever inode numbers it claims", async () => {
    const c = holder();
    const st = await fs.stat(`/proc/${c.pid}/fd/0`, { bigint: true });
    // Refused at open (ENXIO) or after fstat: either way an error, not a read that waits for a writer.
    await expect(readHandedOff(c.pid!, { fd: 0, dev: st.dev, ino: st.ino }, 10, undefined)).rejects.toThrow(/ENXIO|not the runner's file/);
  });

  it("takes a pid for the runner only when its own view of its pid is the one reported", async () => {
    const c = holder();
    const own = (await fs.readFile(`/proc/${c.pid}/status`, "utf8")).match(/^NSpid:\s*(.*)$/m)![1]!.trim().split(/\s+/).map(Number);
    expect(await matchRunnerPid([c.pid!], own[own.length - 1]!)).toBe(c.pid);
    expect(await matchRunnerPid([c.pid!], own[own.length - 1]! + 1)).toBeUndefined();
    expect(await matchRunnerPid([2 ** 22 + 12345], 1)).toBeUndefined();
  });
});
