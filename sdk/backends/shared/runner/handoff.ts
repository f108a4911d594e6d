import { closeSync, constants, fstatSync, openSync, promises as fs, read, readSync, write, writeSync } from "node:fs";
import { promisify } from "node:util";
import { RunnerFailure } from "./client.js";

/**
 * Descriptor hand-off for big files, when the runner runs on this kernel (Bubblewrap; Docker with the
 * host folder shared): the runner opens the file inside the sandbox's view as it always does (descriptor
 * walk, no-follow), tells its descriptor number and the file's device and inode, and the host opens
 * `/proc/<runner's host pid>/fd/<n>`. That magic link reaches the open file itself, never a name, so
 * nothing the agent renames or swaps can redirect it; the host still refuses anything but the very
 * inode the runner reported (a reused pid, a process posing as the runner) and anything not regular.
 */

const readAsync = promisify(read);
const writeAsync = promisify(write);

/** Files at or under this size cross the pipe: a hand-off costs two opens and a round trip more. */
export const HANDOFF_MIN = 64 << 10;

/** The runner's descriptor as the runner reported it ("h" fd dev ino [size]). */
export interface HandedOff {
  fd: number;
  dev: bigint;
  ino: bigint;
}

export function parseHandedOff(fields: string[]): HandedOff | undefined {
  const [fd, dev, ino] = [fields[1], fields[2], fields[3]];
  if (!fd || !dev || !ino || !/^\d+$/.test(fd) || !/^\d+$/.test(dev) || !/^\d+$/.test(ino)) return undefined;
  return { fd: Number(fd), dev: BigInt(dev), ino: BigInt(ino) };
}

/** Bytes moved synchronously (open, fstat and close always are: they are cheap); more go through the thread pool. */
const SYNC_IO_LIMIT = 256 << 10;

/** Opens the runner's descriptor and checks it is the reported regular file; the caller closes it. */
function openHandedOff(pid: number, h: HandedOff, flags: number): number {
  // No O_NOFOLLOW: a /proc fd entry is a magic link, and following it is the point (it is not a path).
  const fd = openSync(`/proc/${pid}/fd/${h.fd}`, flags | constants.O_NONBLOCK);
  try {
    const st = fstatSync(fd, { bigint: true });
    if (!st.isFile() || st.dev !== h.dev || st.ino !== h.ino) throw new Error("the handed-off descriptor is not the runner's file");
    return fd;
  } catch (e) {
    closeSync(fd);
    throw e;
  }
}

/** Reads the whole handed-off file into one buffer sized by fstat (grown only if the file grows), bounded by `maxBytes`. */
export async function readHandedOff(pid: number, h: HandedOff, size: number, maxBytes: number | undefined): Promise<Buffer> {
  const fd = openHandedOff(pid, h, constants.O_RDONLY);
  try {
    // One byte over the size the runner saw, so the end shows without a grow (and a copy) of a full buffer.
    let out = Buffer.allocUnsafe(size + 1);
    let len = 0;
    for (;;) {
      if (len === out.length) {
        const grown = Buffer.allocUnsafe(out.length * 2);
        out.copy(grown, 0, 0, len);
        out = grown;
      }
      const n = size <= SYNC_IO_LIMIT ? readSync(fd, out, len, out.length - len, len) : (await readAsync(fd, out, len, out.length - len, len)).bytesRead;
      if (n === 0) break;
      len += n;
      if (maxBytes !== undefined && len > maxBytes) throw new RunnerFailure("TOOBIG", String(len));
    }
    return out.subarray(0, len);
  } finally {
    closeSync(fd);
  }
}

/** Writes `data` into the runner's (fresh, exclusive) temp file through its descriptor. */
export async function writeHandedOff(pid: number, h: HandedOff, data: Uint8Array): Promise<void> {
  const fd = openHandedOff(pid, h, constants.O_WRONLY);
  try {
    let at = 0;
    const sync = data.byteLength <= SYNC_IO_LIMIT;
    while (at < data.byteLength) at += sync ? writeSync(fd, data, at, data.byteLength - at, at) : (await writeAsync(fd, data, at, data.byteLength - at, at)).bytesWritten;
  } finally {
    closeSync(fd);
  }
}

/**
 * Opens the runner's private pipe pair ("o" wfd ino rfd ino, see the runner's op S) through its
 * descriptors: each must be a FIFO with the very inode the runner reported. Non-blocking, so an open
 * never waits. Returns the host's write end (requests) and read end (replies); the caller owns them.
 */
export function openRunnerPipes(pid: number, fields: string[]): { w: number; r: number } {
  const [wfd, wino, rfd, rino] = fields;
  if (![wfd, wino, rfd, rino].every((f) => f !== undefined && /^\d+$/.test(f))) throw new Error("bad pipe pair");
  const open = (fd: string, ino: string, flags: number) => {
    const h = openSync(`/proc/${pid}/fd/${fd}`, flags | constants.O_NONBLOCK);
    try {
      const st = fstatSync(h, { bigint: true });
      if (!st.isFIFO() || st.ino !== BigInt(ino)) throw new Error("the runner's descriptor is not its pipe");
      return h;
    } catch (e) {
      closeSync(h);
      throw e;
    }
  };
  const w = open(wfd!, wino!, constants.O_WRONLY);
  try {
    return { w, r: open(rfd!, rino!, constants.O_RDONLY) };
  } catch (e) {
    closeSync(w);
    throw e;
  }
}

/** The pid in each pid namespace, outermost first, from /proc/<pid>/status (undefined if the process is gone). */
async function nsPids(pid: number): Promise<number[] | undefined> {
  const status = await readSmall(`/proc/${pid}/status`);
  const line = status?.split("\n").find((l) => l.startsWith("NSpid:"));
  return line ? line.slice(6).trim().split(/\s+/).map(Number) : undefined;
}

/**
 * Which of `candidates` (host pids) is the runner that said it is `nsPid` in its own view: the one whose
 * innermost pid is nsPid, at the shallowest nesting (a process in a pid namespace the agent made deeper
 * down cannot pose as it; the inode check is the guard that matters anyway).
 */
export async function matchRunnerPid(candidates: number[], nsPid: number): Promise<number | undefined> {
  let best: { pid: number; depth: number } | undefined;
  for (const pid of candidates) {
    const ns = await nsPids(pid);
    if (!ns || ns[ns.length - 1] !== nsPid) continue;
    if (!best || ns.length < best.depth) best = { pid, depth: ns.length };
  }
  return best?.pid;
}

/** Descendants of `pid` up to `depth` generations (bwrap's own processes sit between it and the runner). */
export async function descendants(pid: number, depth: number): Promise<number[]> {
  const out: number[] = [];
  let level = [pid];
  for (let d = 0; d < depth && level.length; d++) {
    const next: number[] = [];
    for (const p of level) {
      const kids = await readSmall(`/proc/${p}/task/${p}/children`);
      for (const k of kids?.trim().split(/\s+/) ?? []) if (/^\d+$/.test(k)) next.push(Number(k));
    }
    // Bounded: only the first generations, and at most a few processes each (the runner is near the top).
    level = next.slice(0, 16);
    out.push(...level);
  }
  return out;
}

async function readSmall(file: string): Promise<string | undefined> {
  let fh: fs.FileHandle | undefined;
  try {
    fh = await fs.open(file, constants.O_RDONLY | constants.O_NONBLOCK);
    const buf = Buffer.alloc(8192);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    return buf.subarray(0, bytesRead).toString("utf8");
  } catch {
    return undefined;
  } finally {
    await fh?.close();
  }
}
