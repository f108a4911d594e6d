import { spawn as spawnChild } from "node:child_process";
import { randomBytes } from "node:crypto";
import fsSync, { promises as fs, constants as fsc, type Dirent } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { ConflictError, NotFoundError, PathEscapeError, TooLargeError, WorkspaceError } from "../../errors.js";
import type { DirEntry, ExecOptions, ExecResult, FileInfo, Sandbox, SandboxProcess, SpawnOptions } from "../../sandbox.js";
import { checkRelativePath } from "../../paths.js";
import { collectOutput } from "../../util/process.js";

/**
 * Files up to this size are read and written with synchronous calls. An async `fs` call is a
 * thread-pool round trip (tens of µs under load, several per file), its synchronous twin a few µs
 * of event-loop time; at this size the copy itself stays well under a millisecond. Larger files
 * go through the thread pool so one big file never stalls other work.
 */
const SYNC_IO_LIMIT = 256 * 1024;
/**
 * createFile claims a new name (tool results): up to this size it writes synchronously, blocking
 * the event loop well under a millisecond per MiB, rather than paying a temp file, a link and a
 * thread-pool round trip.
 */
const CREATE_SYNC_LIMIT = 2 * 1024 * 1024;
/** Read once at load: the umask is process-wide and a server does not change it as it runs. */
const UMASK = process.umask();
/** Directories with more entries than this are stat-ed through the thread pool, in parallel. */
const SYNC_LIST_LIMIT = 512;

const readFd = promisify(fsSync.readFile);
const writeFd = promisify(fsSync.write);

/**
 * A host folder as a Sandbox. Processes run on the host with the workspace root as cwd (no
 * isolation: that is what Bubblewrap and Docker are for); file operations are confined to the root,
 * with symlinks resolved against it.
 *
 * Path checks, metadata calls and small reads and writes are synchronous (see SYNC_IO_LIMIT): they
 * are bounded and far cheaper than a thread-pool round trip. Nothing is cached between calls apart
 * from the root's real path, so every call re-checks each component of its path: a folder swapped
 * for a symlink (a process inside a Bubblewrap or Docker workspace can do that) is caught on the
 * next call, as before.
 */
export class LocalSandbox implements Sandbox {
  readonly kind: string = "local";
  readonly persistent = true;
  readonly workdir: string;
  #realRoot: string | undefined;

  constructor(root: string) {
    this.workdir = path.resolve(root);
  }

  /** Absolute host path of a workspace-relative path, after confinement checks (symlinks resolved). */
  async hostPath(rel: string, opts: { followFinal?: boolean } = {}): Promise<string> {
    return this.#resolve(rel, opts.followFinal ?? false);
  }

  #resolve(rel: string, followFinal: boolean): string {
    return this.#walk(rel, followFinal).path;
  }

  /**
   * Resolves every existing ancestor (and the final component with `followFinal`) through
   * realpath when it is a symlink; the remainder does not exist yet. Throws PathEscapeError for a
   * symlink leaving the root or a dangling one. Also hands back the lstat the walk made of the
   * final component (so callers need not repeat it): undefined when it does not exist, null when
   * it was not looked at (the root, or a followed final symlink).
   */
  #walk(rel: string, followFinal: boolean): Resolved {
    const clean = checkRelativePath(rel);
    const root = this.#root();
    if (clean === "") return { path: root, stat: null };
    const parts = clean.split("/");
    let current = root;
    for (let i = 0; i < parts.length; i++) {
      const next = `${current}/${parts[i]!}`;
      const isLast = i === parts.length - 1;
      let st: fsSync.Stats | undefined;
      try {
        st = fsSync.lstatSync(next, { throwIfNoEntry: false });
      } catch {
        st = undefined;
      }
      if (!st) return { path: path.join(next, ...parts.slice(i + 1)), stat: undefined };
      if (st.isSymbolicLink() && (!isLast || followFinal)) {
        let real: string;
        try {
          real = fsSync.realpathSync(next);
        } catch {
          throw new PathEscapeError(rel, "goes through a dangling symlink");
        }
        if (real !== root && !real.startsWith(root + path.sep)) throw new PathEscapeError(rel, "resolves through a symlink outside the workspace");
        current = real;
        if (isLast) return { path: current, stat: null };
      } else {
        current = next;
        if (isLast) return { path: current, stat: st };
      }
    }
    return { path: current, stat: null };
  }

  #root(): string {
    if (this.#realRoot) return this.#realRoot;
    fsSync.mkdirSync(this.workdir, { recursive: true });
    this.#realRoot = fsSync.realpathSync(this.workdir);
    return this.#realRoot;
  }

  async exec(argv: string[], options: ExecOptions = {}): Promise<ExecResult> {
    if (argv.length === 0) return { exitCode: 127, stdout: Buffer.alloc(0), stderr: Buffer.from("empty command"), timedOut: false, truncated: false };
    const cwd = this.#resolve(options.cwd ?? "", true);
    const child = spawnChild(argv[0]!, argv.slice(1), {
      cwd,
      env: { ...process.env, ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
      detached: true,
    });
    return collectOutput(child, options);
  }

  spawn(argv: string[], options: SpawnOptions = {}): SandboxProcess {
    if (argv.length === 0) throw new WorkspaceError("invalid_argument", "spawn: argv must not be empty", { field: "argv" });
    const cwd = path.join(this.workdir, checkRelativePath(options.cwd ?? "", "cwd"));
    const child = spawnChild(argv[0]!, argv.slice(1), { cwd, env: { ...process.env, ...options.env }, stdio: ["pipe", "pipe", "pipe"] });
    const exited = new Promise<number | null>((resolve) => {
      child.once("error", () => resolve(127));
      child.once("exit", (code) => resolve(code));
    });
    return { stdin: child.stdin, stdout: child.stdout, stderr: child.stderr, exited, kill: () => void child.kill("SIGKILL") };
  }

  async readFile(rel: string, options: { maxBytes?: number } = {}): Promise<Buffer> {
    try {
      const p = this.#resolve(rel, true);
      // O_NONBLOCK: opening a FIFO an agent left here must not block the event loop (it is then
      // read through the thread pool below, as any non-regular file).
      const fd = fsSync.openSync(p, fsc.O_RDONLY | fsc.O_NONBLOCK);
      let handedOff = false;
      try {
        const st = fsSync.fstatSync(fd);
        if (options.maxBytes !== undefined && st.size > options.maxBytes)
          throw new TooLargeError(`${rel} is ${st.size} bytes, over the ${options.maxBytes}-byte limit`);
        if (st.isFile() && st.size <= SYNC_IO_LIMIT) return fsSync.readFileSync(fd);
        if (st.isFile()) {
          handedOff = true;
          return await readFd(fd).finally(() => fsSync.closeSync(fd));
        }
      } finally {
        if (!handedOff) fsSync.closeSync(fd);
      }
      return await fs.readFile(p);
    } catch (e) {
      throw mapFsError(e, rel);
    }
  }

  async writeFile(rel: string, data: Uint8Array | string, options: { mode?: number; exclusive?: boolean } = {}): Promise<void> {
    const { path: p, stat } = this.#walk(rel, false);
    // link() neither follows nor replaces an existing name, so only the replacing write needs this check.
    if (!options.exclusive && stat?.isSymbolicLink()) throw symlinkRefused(rel);
    const tmp = `${p}.tmp-${randomBytes(6).toString("hex")}`;
    const encoded = encode(data);
    const bytes = encoded.bytes;
    // Replacing a script must not drop its execute bit: keep the old file's permission bits.
    const keepMode = options.mode === undefined && stat?.isFile() === true;
    const mode = options.mode ?? (keepMode ? stat!.mode & 0o7777 : 0o644);
    try {
      try {
        await writeNew(tmp, bytes, mode);
      } catch (e) {
        // Parents are usually there already: create them only when the first attempt says so.
        if ((e as NodeJS.ErrnoException)?.code !== "ENOENT") throw e;
        fsSync.mkdirSync(path.dirname(p), { recursive: true });
        await writeNew(tmp, bytes, mode);
      }
      // open() applies the umask; a kept mode must be exact (a chmod only when the umask cut bits).
      if (keepMode && (mode & UMASK) !== 0) fsSync.chmodSync(tmp, mode);
      if (options.exclusive) {
        // link() publishes the complete file and fails with EEXIST atomically, unlike rename().
        fsSync.linkSync(tmp, p);
        fsSync.unlinkSync(tmp);
      } else {
        fsSync.renameSync(tmp, p);
      }
    } catch (e) {
      fsSync.rmSync(tmp, { force: true });
      if ((e as NodeJS.ErrnoException)?.code === "EEXIST") throw new ConflictError(`${rel} already exists`, { field: rel, cause: e });
      throw mapFsError(e, rel);
    } finally {
      encoded.release();
    }
  }

  /**
   * Creates `rel` exclusively (ConflictError when the name exists) with one
   * open(O_CREAT | O_EXCL | O_NOFOLLOW) and write, instead of writeFile's temp file + link + unlink.
   * Up to CREATE_SYNC_LIMIT bytes, create and write happen in one synchronous stretch, so no other
   * code in this process can see the file before its bytes; another process listing the folder
   * at that very moment could. Larger files go through the atomic writeFile path.
   */
  async createFile(rel: string, data: Uint8Array | string): Promise<void> {
    const encoded = encode(data);
    try {
      if (encoded.bytes.byteLength > CREATE_SYNC_LIMIT) return await this.writeFile(rel, encoded.bytes, { exclusive: true });
      const { path: p } = this.#walk(rel, false);
      const flags = fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW;
      let fd: number;
      try {
        try {
          fd = fsSync.openSync(p, flags, 0o644);
        } catch (e) {
          if ((e as NodeJS.ErrnoException)?.code !== "ENOENT") throw e;
          fsSync.mkdirSync(path.dirname(p), { recursive: true });
          fd = fsSync.openSync(p, flags, 0o644);
        }
      } catch (e) {
        if ((e as NodeJS.ErrnoException)?.code === "EEXIST") throw new ConflictError(`${rel} already exists`, { field: rel, cause: e });
        throw mapFsError(e, rel);
      }
      try {
        const bytes = encoded.bytes;
        for (let done = 0; done < bytes.byteLength; ) done += fsSync.writeSync(fd, bytes, done, bytes.byteLength - done);
        fsSync.closeSync(fd);
      } catch (e) {
        // A failed write (disk full) leaves no partial file behind.
        fsSync.closeSync(fd);
        fsSync.rmSync(p, { force: true });
        throw mapFsError(e, rel);
      }
    } finally {
      encoded.release();
    }
  }

  async appendFile(rel: string, data: Uint8Array | string): Promise<void> {
    const { path: p, stat } = this.#walk(rel, false);
    if (stat?.isSymbolicLink()) throw symlinkRefused(rel);
    if (stat === undefined) fsSync.mkdirSync(path.dirname(p), { recursive: true });
    const encoded = encode(data);
    const bytes = encoded.bytes;
    try {
      // O_APPEND with one write call: concurrent appenders never interleave or lose lines.
      const fd = fsSync.openSync(p, fsc.O_WRONLY | fsc.O_APPEND | fsc.O_CREAT | fsc.O_NOFOLLOW, 0o644);
      try {
        if (bytes.byteLength <= SYNC_IO_LIMIT) fsSync.writeSync(fd, bytes);
        else await writeFd(fd, bytes, 0, bytes.byteLength);
      } finally {
        fsSync.closeSync(fd);
      }
    } finally {
      encoded.release();
    }
  }

  async list(rel: string): Promise<FileInfo[]> {
    const p = this.#resolve(rel, true);
    let names: string[];
    try {
      names = fsSync.readdirSync(p);
    } catch (e) {
      throw mapFsError(e, rel);
    }
    if (names.length > SYNC_LIST_LIMIT) {
      const out = await Promise.all(names.map((name) => lstatInfoAsync(path.join(p, name), name)));
      return out.filter((x): x is FileInfo => x !== null);
    }
    const out: FileInfo[] = [];
    for (const name of names) {
      const info = lstatInfo(`${p}/${name}`, name);
      if (info) out.push(info);
    }
    return out;
  }

  /** Names and types only, from one readdir (no lstat per entry). */
  async readDirTyped(rel: string): Promise<DirEntry[]> {
    const p = this.#resolve(rel, true);
    let entries: Dirent[];
    try {
      entries = fsSync.readdirSync(p, { withFileTypes: true });
    } catch (e) {
      throw mapFsError(e, rel);
    }
    return entries.map((d) => ({ name: d.name, type: direntType(d) }));
  }

  async stat(rel: string): Promise<FileInfo | null> {
    const { path: p, stat } = this.#walk(rel, false);
    const name = path.posix.basename(rel) || ".";
    // The walk has already lstat-ed the final component.
    if (stat === undefined) return null;
    return stat ? infoOf(stat, name) : lstatInfo(p, name);
  }

  async remove(rel: string): Promise<void> {
    const clean = checkRelativePath(rel);
    if (clean === "") throw new PathEscapeError(rel, "cannot remove the workspace root");
    await fs.rm(this.#resolve(clean, false), { recursive: true, force: true });
  }

  async mkdir(rel: string): Promise<void> {
    const { path: p, stat } = this.#walk(rel, true);
    if (stat?.isDirectory()) return;
    try {
      fsSync.mkdirSync(p, { recursive: true });
    } catch (e) {
      throw mapFsError(e, rel);
    }
  }

  async rename(from: string, to: string): Promise<void> {
    const src = this.#resolve(from, false);
    const dst = this.#walk(to, false);
    if (present(dst)) throw new ConflictError(`${to} already exists`, { field: to });
    try {
      fsSync.renameSync(src, dst.path);
    } catch (e) {
      // The destination's parent is usually there: create it only when the rename says so.
      if ((e as NodeJS.ErrnoException)?.code !== "ENOENT" || !exists(src)) throw mapFsError(e, from);
      fsSync.mkdirSync(path.dirname(dst.path), { recursive: true });
      try {
        fsSync.renameSync(src, dst.path);
      } catch (e2) {
        throw mapFsError(e2, from);
      }
    }
  }

  async copyIn(hostSource: string, to: string): Promise<void> {
    const target = this.#walk(to, false);
    const dst = target.path;
    if (present(target)) throw new ConflictError(`${to} already exists`, { field: to });
    fsSync.mkdirSync(path.dirname(dst), { recursive: true });
    // Symlinks in the source are skipped: a skill must not smuggle a link out of the workspace.
    const st = fsSync.lstatSync(hostSource);
    if (st.isSymbolicLink()) return;
    if (st.isDirectory()) await copyHostDir(hostSource, dst, st.mode);
    else await copyHostFile(hostSource, dst, st);
  }

  /**
   * Copies a workspace folder to `to` (created; it must not exist yet) inside this workspace.
   * Regular files and folders only (symlinks and special files are skipped); names for which
   * `exclude` is true are skipped at every depth. Files are created with mode 0644 and folders with
   * the default mode, as writeFile and mkdir would. A missing `from` gives an empty `to`.
   */
  async copyTree(from: string, to: string, options: { exclude?: (name: string) => boolean } = {}): Promise<void> {
    const target = this.#walk(to, false);
    const dst = target.path;
    if (present(target)) throw new ConflictError(`${to} already exists`, { field: to });
    fsSync.mkdirSync(dst, { recursive: true });
    let entries: Dirent[];
    try {
      entries = fsSync.readdirSync(this.#resolve(from, true), { withFileTypes: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException)?.code === "ENOENT") return;
      throw mapFsError(e, from);
    }
    await this.#copyEntries(checkRelativePath(from), checkRelativePath(to), entries, options.exclude ?? (() => false));
  }

  /**
   * Every source and destination path goes through the same confinement walk as a single
   * readFile / writeFile would, so a folder swapped for a symlink during the copy is caught just
   * as it was when the copy went file by file through the Sandbox interface.
   */
  async #copyEntries(from: string, to: string, entries: Dirent[], exclude: (name: string) => boolean): Promise<void> {
    for (const d of entries) {
      if (exclude(d.name)) continue;
      const src = `${from}/${d.name}`;
      const dst = `${to}/${d.name}`;
      if (d.isDirectory()) {
        fsSync.mkdirSync(this.#resolve(dst, false));
        let children: Dirent[];
        try {
          children = fsSync.readdirSync(this.#resolve(src, true), { withFileTypes: true });
        } catch (e) {
          throw mapFsError(e, src);
        }
        await this.#copyEntries(src, dst, children, exclude);
      } else if (d.isFile()) {
        const data = await this.readFile(src);
        try {
          await writeNew(this.#resolve(dst, false), data, 0o644);
        } catch (e) {
          if ((e as NodeJS.ErrnoException)?.code === "EEXIST") throw new ConflictError(`${dst} already exists`, { field: dst, cause: e });
          throw mapFsError(e, dst);
        }
      }
    }
  }
}

/**
 * Reusable buffers for encoding large strings. A fresh multi-MiB Buffer costs page faults and GC
 * work several times the UTF-8 encoding itself; encodeInto a kept buffer avoids both. A buffer is
 * lent to one write at a time and returned when that write is done (also across its awaits).
 */
const SCRATCH_MIN_CHARS = 64 * 1024;
const SCRATCH_MAX_BYTES = 4 * 1024 * 1024;
const SCRATCH_KEEP = 4;
const scratchFree: Buffer[] = [];
const utf8 = new TextEncoder();
const noop = (): void => undefined;

interface Encoded {
  bytes: Uint8Array;
  release(): void;
}

/** UTF-8 bytes of `data` (as Buffer.from would give; lone surrogates become U+FFFD). */
function encode(data: Uint8Array | string): Encoded {
  if (typeof data !== "string") return { bytes: data, release: noop };
  // UTF-8 needs at most 3 bytes per UTF-16 unit.
  const need = data.length * 3;
  if (data.length < SCRATCH_MIN_CHARS || need > SCRATCH_MAX_BYTES) return { bytes: Buffer.from(data, "utf8"), release: noop };
  const i = scratchFree.findIndex((b) => b.length >= need);
  // Sized to the need (next power of two), so many concurrent writes cost no more than their data.
  const buf = i >= 0 ? scratchFree.splice(i, 1)[0]! : Buffer.allocUnsafeSlow(2 ** Math.ceil(Math.log2(need)));
  const { written } = utf8.encodeInto(data, buf);
  return {
    bytes: buf.subarray(0, written),
    release: () => {
      if (scratchFree.length < SCRATCH_KEEP) scratchFree.push(buf);
    },
  };
}

/** Creates `file` (which must not exist) with `bytes`; small files without a thread-pool hop. */
async function writeNew(file: string, bytes: Uint8Array, mode: number): Promise<void> {
  if (bytes.byteLength <= SYNC_IO_LIMIT) return fsSync.writeFileSync(file, bytes, { mode, flag: "wx" });
  // Open and close are quick metadata calls; only the copy of the bytes goes to the thread pool.
  const fd = fsSync.openSync(file, "wx", mode);
  try {
    for (let done = 0; done < bytes.byteLength; ) done += (await writeFd(fd, bytes, done, bytes.byteLength - done)).bytesWritten;
  } finally {
    fsSync.closeSync(fd);
  }
}

interface Resolved {
  path: string;
  /** lstat of `path` made by the walk: undefined when missing, null when not looked at. */
  stat: fsSync.Stats | undefined | null;
}

function present(r: Resolved): boolean {
  return r.stat === null ? exists(r.path) : r.stat !== undefined;
}

function symlinkRefused(rel: string): PathEscapeError {
  return new PathEscapeError(rel, "is a symlink; refusing to write through it");
}

function exists(p: string): boolean {
  try {
    return fsSync.lstatSync(p, { throwIfNoEntry: false }) !== undefined;
  } catch {
    return false;
  }
}

function infoOf(st: fsSync.Stats, name: string): FileInfo {
  const type = st.isSymbolicLink() ? "symlink" : st.isDirectory() ? "dir" : st.isFile() ? "file" : "other";
  return { name, type, size: st.size, mtimeMs: st.mtimeMs };
}

function lstatInfo(p: string, name: string): FileInfo | null {
  try {
    const st = fsSync.lstatSync(p, { throwIfNoEntry: false });
    return st ? infoOf(st, name) : null;
  } catch {
    return null;
  }
}

async function lstatInfoAsync(p: string, name: string): Promise<FileInfo | null> {
  const st = await fs.lstat(p).catch(() => null);
  return st ? infoOf(st, name) : null;
}

function direntType(d: Dirent): FileInfo["type"] {
  return d.isSymbolicLink() ? "symlink" : d.isDirectory() ? "dir" : d.isFile() ? "file" : "other";
}

/**
 * Host folder → workspace, as `fs.cp(recursive, errorOnExist)` with symlinks filtered out did:
 * modes kept (a folder gets its mode after its content is in), existing names are an error,
 * special files (FIFOs, sockets, devices) are refused.
 */
async function copyHostDir(src: string, dst: string, mode: number): Promise<void> {
  fsSync.mkdirSync(dst);
  for (const d of fsSync.readdirSync(src, { withFileTypes: true })) {
    const from = `${src}/${d.name}`;
    const to = `${dst}/${d.name}`;
    if (d.isSymbolicLink()) continue;
    if (d.isDirectory()) await copyHostDir(from, to, fsSync.lstatSync(from).mode);
    else await copyHostFile(from, to, fsSync.lstatSync(from));
  }
  fsSync.chmodSync(dst, mode);
}

async function copyHostFile(src: string, dst: string, st: fsSync.Stats): Promise<void> {
  if (st.isSymbolicLink()) return;
  if (!st.isFile()) throw new WorkspaceError("invalid_argument", `cannot copy '${src}': not a regular file, folder or symlink`, { field: "hostPath" });
  // copyfile keeps the mode; COPYFILE_EXCL refuses an existing destination.
  if (st.size <= SYNC_IO_LIMIT) fsSync.copyFileSync(src, dst, fsc.COPYFILE_EXCL);
  else await fs.copyFile(src, dst, fsc.COPYFILE_EXCL);
}

function mapFsError(e: unknown, rel: string): unknown {
  if (e instanceof WorkspaceError) return e;
  const code = (e as NodeJS.ErrnoException)?.code;
  if (code === "ENOENT") return new NotFoundError(`'${rel}'`, { cause: e, field: rel });
  if (code === "EISDIR") return new WorkspaceError("invalid_argument", `'${rel}' is a directory`, { cause: e, field: rel });
  if (code === "ENOTDIR") return new WorkspaceError("invalid_argument", `'${rel}' is not a directory`, { cause: e, field: rel });
  if (code === "ELOOP") return new PathEscapeError(rel, "is a symlink; refusing to follow it", { cause: e });
  return e;
}
