import { closeSync, constants, fstatSync, openSync, promises as fs, read, readSync, write, writeSync, type BigIntStats } from "node:fs";
import { promisify } from "node:util";
import { RunnerFailure } from "./failure.js";
import { InternalError } from "../../errors.js";

/**
 * Descriptor hand-off for big files, when the runner runs on this kernel (Bubblewrap; Docker with the
 * host folder shared): the runner opens the file inside the sandbox's view as it always does (descriptor
 * walk, no-follow), tells its descriptor number and the file's device and inode, and the host takes
 * `/proc/<runner's host pid>/fd/<n>`. That magic link reaches the open file itself, never a name, so
 * nothing the agent renames or swaps can redirect it.
 *
 * The runner may be the agent's own program, and the host's credentials are stronger than the
 * sandbox's (root reads real addresses from /proc/kallsyms; the sandbox reads zeros). So the host never
 * gains access the runner did not already have: the link is first taken with O_PATH (which opens
 * nothing), must be a regular file on the workspace's own device as the host knows it (a host-side
 * stat, never the runner's numbers), and the runner's own descriptor must, by the kernel's account in
 * /proc/<pid>/fdinfo/<n>, be that very file (same mount and inode) opened for the access the host wants
 * (not O_PATH). Only then is it reopened through the host's own O_PATH descriptor.
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
  if (!fd || !dev || !ino || !/^\d{1,9}$/.test(fd) || !/^\d{1,20}$/.test(dev) || !/^\d{1,20}$/.test(ino)) return undefined;
  return { fd: Number(fd), dev: BigInt(dev), ino: BigInt(ino) };
}

/** Bytes moved synchronously (open, fstat and close always are: they are cheap); more go through the thread pool. */
const SYNC_IO_LIMIT = 256 << 10;

/** O_PATH (Linux, every architecture Node runs on): a handle on the file that opens nothing. */
const O_PATH = 0o10000000;
const O_ACCMODE = 3;

/** What /proc/<pid>/fdinfo/<fd> says of a descriptor (kernel-provided): its flags, mount and inode. */
export function fdInfo(pid: number | "self", fd: number): { flags: number; mnt: string; ino: string } | undefined {
  let text: string;
  try {
    const h = openSync(`/proc/${pid}/fdinfo/${fd}`, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      const buf = Buffer.alloc(4096);
      text = buf.subarray(0, readSync(h, buf, 0, buf.length, null)).toString("latin1");
    } finally {
      closeSync(h);
    }
  } catch {
    return undefined;
  }
  const field = (name: string) => new RegExp(`^${name}:\\s*(\\S+)$`, "m").exec(text)?.[1];
  const flags = field("flags");
  const mnt = field("mnt_id");
  const ino = field("ino");
  if (!flags || !/^[0-7]+$/.test(flags) || !mnt || !ino) return undefined;
  return { flags: parseInt(flags, 8), mnt, ino };
}

/** Whether a descriptor opened with `flags` grants `access` (O_RDONLY or O_WRONLY): never an O_PATH one. */
function grants(flags: number, access: number): boolean {
  if (flags & O_PATH) return false;
  const mode = flags & O_ACCMODE;
  return mode === constants.O_RDWR || mode === access;
}

/**
 * Opens the runner's descriptor `n` for `access` (O_RDONLY / O_WRONLY) only if `ok` accepts the file and
 * the runner's own descriptor is that file, opened for that access; the caller closes it. Never opens
 * (and so never triggers) a device or FIFO the runner points at: the link is taken with O_PATH first.
 */
function openRunnerFd(pid: number, n: number, access: number, ok: (st: BigIntStats) => boolean, why: string): number {
  // No O_NOFOLLOW: a /proc fd entry is a magic link, and following it is the point (it is not a path).
  const path = openSync(`/proc/${pid}/fd/${n}`, O_PATH); // libuv adds O_CLOEXEC
  try {
    const st = fstatSync(path, { bigint: true });
    if (!ok(st)) throw new InternalError(why);
    // Read after the link was taken: the runner's descriptor still is this file (mount and inode) and
    // was opened for this access, so the host reads or writes nothing the runner could not.
    const theirs = fdInfo(pid, n);
    const ours = fdInfo("self", path);
    if (!theirs || !ours || theirs.mnt !== ours.mnt || theirs.ino !== String(st.ino) || !grants(theirs.flags, access)) throw new InternalError(why);
    return openSync(`/proc/self/fd/${path}`, access | constants.O_NONBLOCK);
  } finally {
    closeSync(path);
  }
}

/**
 * Opens the runner's descriptor: a regular file on the workspace's device (`device`, from the host's
 * stat of its folder) with the inode the runner reported; the caller closes it.
 */
function openHandedOff(pid: number, h: HandedOff, access: number, device: bigint): number {
  return openRunnerFd(
    pid,
    h.fd,
    access,
    (st) => st.isFile() && st.dev === device && st.ino === h.ino,
    "the handed-off descriptor is not the runner's file in the workspace",
  );
}

/**
 * Reads the whole handed-off file into one buffer sized by fstat (grown only if the file grows), never
 * past `maxBytes` (a bigger file is TOOBIG). `size` is the runner's word: checked against the cap first.
 */
export async function readHandedOff(pid: number, h: HandedOff, size: number, maxBytes: number, device: bigint): Promise<Buffer> {
  if (!Number.isSafeInteger(size) || size < 0 || size > maxBytes) throw new RunnerFailure("TOOBIG", String(size));
  const fd = openHandedOff(pid, h, constants.O_RDONLY, device);
  try {
    // One byte over the size the runner saw, so the end shows without a grow (and a copy) of a full buffer.
    let out = Buffer.allocUnsafe(size + 1);
    let len = 0;
    for (;;) {
      if (len === out.length) {
        const grown = Buffer.allocUnsafe(Math.min(out.length * 2, maxBytes + 1));
        out.copy(grown, 0, 0, len);
        out = grown;
      }
      const n = size <= SYNC_IO_LIMIT ? readSync(fd, out, len, out.length - len, len) : (await readAsync(fd, out, len, out.length - len, len)).bytesRead;
      if (n === 0) break;
      len += n;
      if (len > maxBytes) throw new RunnerFailure("TOOBIG", String(len));
    }
    return out.subarray(0, len);
  } finally {
    closeSync(fd);
  }
}

/** Writes `data` into the runner's (fresh, exclusive) temp file through its descriptor. */
export async function writeHandedOff(pid: number, h: HandedOff, data: Uint8Array, device: bigint): Promise<void> {
  const fd = openHandedOff(pid, h, constants.O_WRONLY, device);
  try {
    let at = 0;
    const sync = data.byteLength <= SYNC_IO_LIMIT;
    while (at < data.byteLength)
      at += sync ? writeSync(fd, data, at, data.byteLength - at, at) : (await writeAsync(fd, data, at, data.byteLength - at, at)).bytesWritten;
  } finally {
    closeSync(fd);
  }
}

/**
 * Opens the runner's private pipe pair ("o" wfd ino rfd ino, see the runner's op S) through its
 * descriptors: each must be a FIFO with the very inode the runner reported, held by the runner with the
 * access the host takes (its write end for the host's writes, its read end for the host's reads).
 * Non-blocking, so an open never waits. Returns the host's write end (requests) and read end (replies);
 * the caller owns them.
 */
export function openRunnerPipes(pid: number, fields: string[]): { w: number; r: number } {
  const [wfd, wino, rfd, rino] = fields;
  if (![wfd, wino, rfd, rino].every((f) => f !== undefined && /^\d{1,9}$/.test(f))) throw new InternalError("bad pipe pair");
  const open = (fd: string, ino: string, access: number) =>
    openRunnerFd(pid, Number(fd), access, (st) => st.isFIFO() && st.ino === BigInt(ino), "the runner's descriptor is not its pipe");
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
