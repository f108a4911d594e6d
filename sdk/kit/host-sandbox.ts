// Size: one cohesive engine, the confined host-tree Sandbox (descriptor walks, no-follow opens, atomic
// writes) shared by Local and Bubblewrap; exec and files could later split.
import { spawn as spawnChild } from "node:child_process";
import { randomBytes } from "node:crypto";
import fsSync, { promises as fs, constants as fsc, type Dirent } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { ConflictError, NotFoundError, PathEscapeError, TooLargeError, WorkspaceError, isWorkspaceError, InvalidArgumentError } from "../errors.js";
import { checkRange, cursorAt, pageBounds, type DirEntry, type ExecOptions, type ExecResult, type FileInfo, type ListPage } from "../sandbox.js";
import { type ListPageOptions, type Sandbox, type SandboxProcess, type SpawnOptions, type TreeEntry, type WalkTreeOptions } from "../sandbox.js";
import { type WalkTreeResult } from "../sandbox.js";
import { checkRelativePath } from "../paths.js";
import { collectOutput } from "../util/process.js";
import { RootedPaths, errnoOf, fdPath } from "./rooted.js";

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
/** Entries one fs.opendir batch reads: the most a folder read holds the event loop for between two thread-pool hops. */
const DIR_BATCH = 512;
/** Stats dispatched to the thread pool at once when a big folder is listed. */
const LSTAT_SLICE = 1024;
/** Directories with more entries than this are stat-ed through the thread pool, in parallel. */
const SYNC_LIST_LIMIT = 512;

/** The most one readRange returns (the runner's read cap). */
const MAX_RANGE_BYTES = 1 << 30;

const readFd = promisify(fsSync.read);
const writeFd = promisify(fsSync.write);

/**
 * A host folder as a Sandbox. Processes run on the host with the workspace root as cwd (no
 * isolation: that is what Bubblewrap and Docker are for); file operations are confined to the root,
 * with symlinks resolved against it.
 *
 * File operations never resolve a path by name after checking it: every call walks its path with
 * descriptors and O_NOFOLLOW (see rooted.ts) and does its I/O on the descriptor it ends with, so a
 * folder swapped for a symlink (by a process inside a Bubblewrap or Docker workspace, or on the
 * host for Local) is refused, even in the middle of the call. Special files (FIFOs, sockets,
 * devices) are opened non-blocking and refused; reads stop at their cap by bytes actually read.
 *
 * Path checks, metadata calls and small reads and writes are synchronous (see SYNC_IO_LIMIT): they
 * are bounded and far cheaper than a thread-pool round trip. Nothing is cached between calls apart
 * from the root's real path.
 */
export class LocalSandbox implements Sandbox {
  readonly kind: string = "local";
  readonly persistent = true;
  readonly unconfinedProcesses = true;
  readonly workdir: string;
  #realRoot: string | undefined;
  #rooted: RootedPaths | undefined;
  /** Folders a listing page stopped in, kept open briefly for the next page. */
  readonly #pages = new OpenPages();

  constructor(root: string) {
    this.workdir = path.resolve(root);
  }

  /**
   * Absolute host path of a workspace-relative path, after confinement checks (symlinks resolved).
   * A name, checked now: only for a process's working folder, never to open files by (the file
   * methods below walk descriptors instead).
   */
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
          throw new PathEscapeError(`path '${rel}' goes through a dangling symlink`);
        }
        if (real !== root && !real.startsWith(root + path.sep)) throw new PathEscapeError(`path '${rel}' resolves through a symlink outside the workspace`);
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
    if (argv.length === 0) throw new InvalidArgumentError("spawn: argv must not be empty", { field: "argv", fieldPrefix: false });
    const cwd = path.join(this.workdir, checkRelativePath(options.cwd ?? "", "cwd"));
    const child = spawnChild(argv[0]!, argv.slice(1), { cwd, env: { ...process.env, ...options.env }, stdio: ["pipe", "pipe", "pipe"] });
    const exited = new Promise<number | null>((resolve) => {
      child.once("error", () => resolve(127));
      child.once("exit", (code) => resolve(code));
    });
    return { stdin: child.stdin, stdout: child.stdout, stderr: child.stderr, exited, kill: () => void child.kill("SIGKILL") };
  }

  /** Opens a file to read. O_NONBLOCK: a FIFO an agent left here must not block; regularStat refuses it. */
  #openToRead(rel: string): number {
    const clean = checkRelativePath(rel);
    try {
      return this.#paths().open(clean, fsc.O_RDONLY | fsc.O_NONBLOCK, rel).fd;
    } catch (e) {
      throw mapFsError(e, rel);
    }
  }

  async readFile(rel: string, options: { maxBytes?: number } = {}): Promise<Buffer> {
    const fd = this.#openToRead(rel);
    try {
      return await readRegular(fd, rel, options.maxBytes);
    } catch (e) {
      throw mapFsError(e, rel);
    } finally {
      fsSync.closeSync(fd);
    }
  }

  async readRange(rel: string, offset: number, length: number): Promise<Buffer> {
    checkRelativePath(rel);
    checkRange(offset, length);
    const fd = this.#openToRead(rel);
    try {
      const st = regularStat(fd, rel);
      // Sized by what the file holds there now, never by the asked length alone.
      const buf = Buffer.allocUnsafe(Math.max(0, Math.min(length, MAX_RANGE_BYTES, st.size - offset)));
      let len = 0;
      while (len < buf.length) {
        const { bytesRead } = await readFd(fd, buf, len, buf.length - len, offset + len);
        if (bytesRead === 0) break;
        len += bytesRead;
      }
      return buf.subarray(0, len);
    } catch (e) {
      throw mapFsError(e, rel);
    } finally {
      fsSync.closeSync(fd);
    }
  }

  async writeFile(rel: string, data: Uint8Array | string, options: { mode?: number; exclusive?: boolean } = {}): Promise<void> {
    const { dir, name } = this.#parentOf(rel, true);
    // A big string stays a string: writeNew encodes it piece by piece, never as one second copy.
    const encoded = typeof data === "string" && data.length > CHUNKED_CHARS ? { bytes: data, release: noop } : encode(data);
    const tmp = fdPath(dir, `${name}.tmp-${randomBytes(6).toString("hex")}`);
    const target = fdPath(dir, name);
    try {
      const stat = lstatOrUndefined(target);
      // link() neither follows nor replaces an existing name, so only the replacing write needs this check.
      if (!options.exclusive && stat?.isSymbolicLink()) throw symlinkRefused(rel);
      // Replacing a script must not drop its execute bit: keep the old file's permission bits.
      const keepMode = options.mode === undefined && stat?.isFile() === true;
      const mode = options.mode ?? (keepMode ? stat!.mode & 0o7777 : 0o644);
      // open() applies the umask; a kept mode must be exact (an fchmod only when the umask cut bits).
      await writeNew(tmp, encoded.bytes, mode, keepMode && (mode & UMASK) !== 0);
      if (options.exclusive) {
        // link() publishes the complete file and fails with EEXIST atomically, unlike rename().
        fsSync.linkSync(tmp, target);
        fsSync.unlinkSync(tmp);
      } else {
        fsSync.renameSync(tmp, target);
      }
    } catch (e) {
      unlinkQuietly(tmp);
      if (errnoOf(e) === "EEXIST") throw new ConflictError(`${rel} already exists`, { field: "path", cause: e });
      throw mapFsError(e, rel);
    } finally {
      fsSync.closeSync(dir);
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
    if (typeof data === "string" && data.length > CHUNKED_CHARS) return this.writeFile(rel, data, { exclusive: true });
    const encoded = encode(data);
    try {
      if (encoded.bytes.byteLength > CREATE_SYNC_LIMIT) return await this.writeFile(rel, encoded.bytes, { exclusive: true });
      const { dir, name } = this.#parentOf(rel, true);
      const target = fdPath(dir, name);
      try {
        let fd: number;
        try {
          fd = fsSync.openSync(target, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW, 0o644);
        } catch (e) {
          if (errnoOf(e) === "EEXIST") throw new ConflictError(`${rel} already exists`, { field: "path", cause: e });
          throw mapFsError(e, rel);
        }
        try {
          const bytes = encoded.bytes;
          for (let done = 0; done < bytes.byteLength;) done += fsSync.writeSync(fd, bytes, done, bytes.byteLength - done);
          fsSync.closeSync(fd);
        } catch (e) {
          // A failed write (disk full) leaves no partial file behind.
          fsSync.closeSync(fd);
          unlinkQuietly(target);
          throw mapFsError(e, rel);
        }
      } finally {
        fsSync.closeSync(dir);
      }
    } finally {
      encoded.release();
    }
  }

  async appendFile(rel: string, data: Uint8Array | string): Promise<void> {
    const { dir, name } = this.#parentOf(rel, true);
    const encoded = encode(data);
    const bytes = encoded.bytes;
    try {
      const target = fdPath(dir, name);
      if (lstatOrUndefined(target)?.isSymbolicLink()) throw symlinkRefused(rel);
      // O_APPEND with one write call: concurrent appenders never interleave or lose lines.
      const fd = fsSync.openSync(target, fsc.O_WRONLY | fsc.O_APPEND | fsc.O_CREAT | fsc.O_NOFOLLOW | fsc.O_NONBLOCK, 0o644);
      try {
        const st = fsSync.fstatSync(fd);
        if (!st.isFile()) throw notRegular(rel, st);
        if (bytes.byteLength <= SYNC_IO_LIMIT) fsSync.writeSync(fd, bytes);
        else await writeFd(fd, bytes, 0, bytes.byteLength);
      } finally {
        fsSync.closeSync(fd);
      }
    } catch (e) {
      throw mapFsError(e, rel);
    } finally {
      fsSync.closeSync(dir);
      encoded.release();
    }
  }

  async list(rel: string): Promise<FileInfo[]> {
    const fd = this.#openDirFollowing(rel);
    try {
      let names: string[];
      try {
        names = (await readEntries(fd)).map((d) => d.name);
      } catch (e) {
        throw mapFsError(e, rel);
      }
      if (names.length > SYNC_LIST_LIMIT) {
        // In slices: dispatching 200,000 stats at once would itself hold the event loop for long.
        const out: FileInfo[] = [];
        for (let at = 0; at < names.length; at += LSTAT_SLICE)
          for (const info of await Promise.all(names.slice(at, at + LSTAT_SLICE).map((name) => lstatInfoAsync(fdPath(fd, name), name))))
            if (info) out.push(info);
        return out;
      }
      const out: FileInfo[] = [];
      for (const name of names) {
        const info = lstatInfo(fdPath(fd, name), name);
        if (info) out.push(info);
      }
      return out;
    } finally {
      fsSync.closeSync(fd);
    }
  }

  /**
   * One page of a folder. The folder is read in batches through the thread pool (fs.opendir), so a
   * folder of any size never holds the event loop for more than one batch; the cursor is the readdir
   * position, and skipping to it costs batches, not stats.
   */
  async listPage(rel: string, options: ListPageOptions = {}): Promise<ListPage> {
    const { offset, limit, token } = pageBounds(options);
    // The previous page's open folder, when the cursor names it: the next page costs its own entries, not a re-skip.
    const kept = token ? this.#pages.take(token, rel, offset) : undefined;
    const fd = kept?.fd ?? this.#openDirFollowing(rel);
    let dir: fsSync.Dir | undefined = kept?.dir;
    let keep = false;
    try {
      const names: string[] = [];
      let more = false;
      try {
        dir ??= await fs.opendir(fdPath(fd), { bufferSize: DIR_BATCH });
        for (let seen = kept ? offset : 0; ; seen++) {
          if (seen >= offset && names.length === limit) {
            more = true;
            break;
          }
          const d = await dir.read();
          if (d === null) break;
          if (seen >= offset) names.push(d.name);
        }
      } catch (e) {
        throw mapFsError(e, rel);
      }
      const entries: FileInfo[] = [];
      if (names.length > SYNC_LIST_LIMIT) {
        for (let at = 0; at < names.length; at += LSTAT_SLICE)
          for (const info of await Promise.all(names.slice(at, at + LSTAT_SLICE).map((name) => lstatInfoAsync(fdPath(fd, name), name))))
            if (info) entries.push(info);
      } else
        for (const name of names) {
          const info = lstatInfo(fdPath(fd, name), name);
          if (info) entries.push(info);
        }
      if (!more) return { entries };
      keep = true;
      return { entries, nextCursor: cursorAt(offset + limit, this.#pages.keep(rel, offset + limit, fd, dir!)) };
    } finally {
      if (!keep) {
        await dir?.close().catch(() => undefined);
        fsSync.closeSync(fd);
      }
    }
  }

  /**
   * The tree below `rel`, each folder opened from its parent's descriptor (one openat per folder, at
   * any depth: no path is resolved again per level) and read in thread-pool batches, so neither a deep
   * chain nor a huge folder costs more than its entries or holds the event loop for long.
   */
  async walkTree(rel: string, options: WalkTreeOptions): Promise<WalkTreeResult> {
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    const skip = new Set(options.skipDirs ?? []);
    const entries: TreeEntry[] = [];
    let truncated = false;
    const scan = async (fd: number, parent: number): Promise<Array<[number, string]>> => {
      const subdirs: Array<[number, string]> = [];
      const dir = await fs.opendir(fdPath(fd), { bufferSize: DIR_BATCH });
      try {
        for (let d = await dir.read(); d !== null; d = await dir.read()) {
          if (entries.length >= options.maxEntries || Date.now() > deadline) {
            truncated = true;
            break;
          }
          const type = direntType(d);
          let size = 0;
          let mtimeMs = 0;
          if (type === "file") {
            const st = lstatOrUndefined(fdPath(fd, d.name));
            if (!st) continue;
            size = st.size;
            mtimeMs = st.mtimeMs;
          }
          entries.push({ parent, name: d.name, type, size, mtimeMs });
          if (type === "dir" && !skip.has(d.name)) subdirs.push([entries.length - 1, d.name]);
        }
      } finally {
        await dir.close().catch(() => undefined);
      }
      return subdirs;
    };
    // Open folders whose sub-folders are still to walk: one descriptor per level of the current path.
    const stack: Array<{ fd: number; subdirs: Array<[number, string]>; next: number }> = [{ fd: this.#openDirFollowing(rel), subdirs: [], next: 0 }];
    try {
      try {
        stack[0]!.subdirs = await scan(stack[0]!.fd, -1);
      } catch (e) {
        throw mapFsError(e, rel);
      }
      while (stack.length > 0 && !truncated) {
        const top = stack[stack.length - 1]!;
        if (top.next >= top.subdirs.length) {
          fsSync.closeSync(stack.pop()!.fd);
          continue;
        }
        const [index, name] = top.subdirs[top.next++]!;
        if (stack.length > MAX_TREE_DEPTH) {
          truncated = true;
          break;
        }
        let fd: number;
        try {
          fd = fsSync.openSync(fdPath(top.fd, name), DIR_FLAGS);
        } catch (e) {
          // Out of descriptors: say the walk is partial. Gone or swapped for a symlink: skipped, as a symlink is.
          if (errnoOf(e) === "EMFILE" || errnoOf(e) === "ENFILE") truncated = true;
          continue;
        }
        const frame = { fd, subdirs: [] as Array<[number, string]>, next: 0 };
        stack.push(frame);
        try {
          frame.subdirs = await scan(fd, index);
        } catch {
          // Unreadable folder (permissions): listed, not entered.
        }
      }
    } finally {
      for (const frame of stack) fsSync.closeSync(frame.fd);
    }
    return { entries, truncated };
  }

  /** Names and types only, from one readdir (no lstat per entry). */
  async readDirTyped(rel: string): Promise<DirEntry[]> {
    const fd = this.#openDirFollowing(rel);
    try {
      return (await readEntries(fd)).map((d) => ({ name: d.name, type: direntType(d) }));
    } catch (e) {
      throw mapFsError(e, rel);
    } finally {
      fsSync.closeSync(fd);
    }
  }

  async stat(rel: string): Promise<FileInfo | null> {
    const clean = checkRelativePath(rel);
    if (clean === "") return infoOf(fsSync.lstatSync(this.#root()), ".");
    let parent: { dir: number; name: string };
    try {
      parent = this.#parentOf(rel, false);
    } catch (e) {
      // A missing folder on the way, or a file where a folder should be: nothing there.
      if (isWorkspaceError(e, "not_found") || isWorkspaceError(e, "invalid_argument")) return null;
      throw e;
    }
    try {
      const st = lstatOrUndefined(fdPath(parent.dir, parent.name));
      return st ? infoOf(st, parent.name) : null;
    } finally {
      fsSync.closeSync(parent.dir);
    }
  }

  async remove(rel: string): Promise<void> {
    const clean = checkRelativePath(rel);
    if (clean === "") throw new PathEscapeError(`path '${rel}' cannot remove the workspace root`);
    let parent: { dir: number; name: string };
    try {
      parent = this.#parentOf(rel, false);
    } catch (e) {
      if (isWorkspaceError(e, "not_found") || isWorkspaceError(e, "invalid_argument")) return;
      throw e;
    }
    try {
      await removeEntry(parent.dir, parent.name);
    } catch (e) {
      throw mapFsError(e, rel);
    } finally {
      fsSync.closeSync(parent.dir);
    }
  }

  async mkdir(rel: string): Promise<void> {
    let fd: number;
    try {
      fd = this.#paths().openDir(checkRelativePath(rel), rel, true).fd;
    } catch (e) {
      throw mapFsError(e, rel);
    }
    fsSync.closeSync(fd);
  }

  async rename(from: string, to: string): Promise<void> {
    const src = this.#parentOf(from, false);
    try {
      const source = fdPath(src.dir, src.name);
      if (!lstatOrUndefined(source)) throw new NotFoundError(`'${from}' not found`, { field: "from" });
      const dst = this.#parentOf(to, true);
      try {
        const target = fdPath(dst.dir, dst.name);
        if (lstatOrUndefined(target)) throw new ConflictError(`${to} already exists`, { field: "to" });
        fsSync.renameSync(source, target);
      } finally {
        fsSync.closeSync(dst.dir);
      }
    } catch (e) {
      throw mapFsError(e, from);
    } finally {
      fsSync.closeSync(src.dir);
    }
  }

  async copyIn(hostSource: string, to: string): Promise<void> {
    const { dir, name } = this.#parentOf(to, true);
    try {
      if (lstatOrUndefined(fdPath(dir, name))) throw new ConflictError(`${to} already exists`, { field: "to" });
      // Symlinks in the source are skipped: a skill must not smuggle a link out of the workspace.
      const st = fsSync.lstatSync(hostSource);
      if (st.isSymbolicLink()) return;
      if (st.isDirectory()) await copyHostDir(hostSource, dir, name, st.mode);
      else await copyHostFile(hostSource, fdPath(dir, name), st);
    } finally {
      fsSync.closeSync(dir);
    }
  }

  /**
   * Copies a workspace folder to `to` (created; it must not exist yet) inside this workspace.
   * Regular files and folders only (symlinks and special files are skipped); names for which
   * `exclude` is true are skipped at every depth. Files are created with mode 0644 and folders with
   * the default mode, as writeFile and mkdir would. A missing `from` gives an empty `to`.
   * Both trees are walked through descriptors: a folder swapped for a symlink mid-copy is skipped.
   */
  async copyTree(from: string, to: string, options: { exclude?: (name: string) => boolean } = {}): Promise<void> {
    const { dir, name } = this.#parentOf(to, true);
    let dst: number;
    try {
      if (lstatOrUndefined(fdPath(dir, name))) throw new ConflictError(`${to} already exists`, { field: "to" });
      fsSync.mkdirSync(fdPath(dir, name));
      dst = fsSync.openSync(fdPath(dir, name), DIR_FLAGS);
    } catch (e) {
      throw mapFsError(e, to);
    } finally {
      fsSync.closeSync(dir);
    }
    try {
      let src: number;
      try {
        src = this.#openDirFollowing(from);
      } catch (e) {
        if (isWorkspaceError(e, "not_found")) return;
        throw e;
      }
      try {
        await copyEntries(src, dst, checkRelativePath(to), options.exclude ?? (() => false));
      } finally {
        fsSync.closeSync(src);
      }
    } finally {
      fsSync.closeSync(dst);
    }
  }

  /** Descriptor of the parent folder of `rel` (created with `create`) and the final name, not followed. */
  #parentOf(rel: string, create: boolean): { dir: number; name: string } {
    const clean = checkRelativePath(rel);
    if (clean === "") throw new InvalidArgumentError(`'${rel}' is the workspace root`, { field: "path", fieldPrefix: false });
    try {
      const { dir, name } = this.#paths().parent(clean, rel, create);
      return { dir: dir.fd, name };
    } catch (e) {
      throw mapFsError(e, rel);
    }
  }

  /** Descriptor of the folder `rel`, symlinks inside the root followed. */
  #openDirFollowing(rel: string): number {
    try {
      return this.#paths().open(checkRelativePath(rel), fsc.O_RDONLY | fsc.O_DIRECTORY | fsc.O_NONBLOCK, rel).fd;
    } catch (e) {
      throw mapFsError(e, rel);
    }
  }

  #paths(): RootedPaths {
    const root = this.#root();
    if (this.#rooted?.root !== root) this.#rooted = new RootedPaths(root, this.workdir === root ? [] : [this.workdir]);
    return this.#rooted;
  }
}

/** Folders kept open between listing pages: at most this many per sandbox, each for at most PAGE_KEEP_MS. */
const PAGES_KEPT = 16;
const PAGE_KEEP_MS = 30_000;

interface OpenPage {
  rel: string;
  offset: number;
  fd: number;
  dir: fsSync.Dir;
  timer: NodeJS.Timeout;
}

/**
 * Open folder handles a listing page stopped in, by a random token carried in the cursor, so paging
 * through 200,000 entries reads each once (a fresh open would skip everything before the cursor again).
 * A cursor whose handle expired still works: the folder is opened again and skipped to the position.
 */
class OpenPages {
  readonly #open = new Map<string, OpenPage>();

  keep(rel: string, offset: number, fd: number, dir: fsSync.Dir): string {
    if (this.#open.size >= PAGES_KEPT) this.#close(this.#open.keys().next().value!);
    const token = randomBytes(8).toString("hex");
    const timer = setTimeout(() => this.#close(token), PAGE_KEEP_MS);
    timer.unref();
    this.#open.set(token, { rel, offset, fd, dir, timer });
    return token;
  }

  /** The kept handle for exactly this folder and position (then no longer kept), or undefined. */
  take(token: string, rel: string, offset: number): { fd: number; dir: fsSync.Dir } | undefined {
    const page = this.#open.get(token);
    if (!page || page.rel !== rel || page.offset !== offset) return undefined;
    this.#open.delete(token);
    clearTimeout(page.timer);
    return page;
  }

  #close(token: string): void {
    const page = this.#open.get(token);
    if (!page) return;
    this.#open.delete(token);
    clearTimeout(page.timer);
    page.dir.close().then(
      () => fsSync.closeSync(page.fd),
      () => fsSync.closeSync(page.fd),
    );
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

const DIR_FLAGS = fsc.O_RDONLY | fsc.O_DIRECTORY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK;
/**
 * remove and copyTree hold a descriptor per level (copyTree two); a tree deeper than this is
 * refused. Removal by name stopped at about this depth too (PATH_MAX is 4096 bytes).
 */
const MAX_TREE_DEPTH = 2048;
/** remove retries an entry that another process turned from file into folder (or back) meanwhile. */
const MAX_REMOVE_ATTEMPTS = 4;

/** Strings longer than this are written in CHUNK_CHARS pieces, each encoded just before its write. */
const CHUNKED_CHARS = 8 * 1024 * 1024;
const CHUNK_CHARS = 1024 * 1024;

/**
 * Creates `file` (which must not exist, never through a symlink) with `data`; small files without a
 * thread-pool hop. A string (only ever a big one) is encoded CHUNK_CHARS at a time as it goes.
 */
async function writeNew(file: string, data: Uint8Array | string, mode: number, exactMode = false): Promise<void> {
  const fd = fsSync.openSync(file, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW, mode);
  try {
    if (typeof data === "string") {
      for (let at = 0; at < data.length;) {
        let end = Math.min(at + CHUNK_CHARS, data.length);
        // Never split a surrogate pair: its halves would each encode as U+FFFD.
        const last = data.charCodeAt(end - 1);
        if (end < data.length && last >= 0xd800 && last <= 0xdbff) end++;
        const piece = Buffer.from(data.slice(at, end), "utf8");
        for (let done = 0; done < piece.byteLength;) done += (await writeFd(fd, piece, done, piece.byteLength - done)).bytesWritten;
        at = end;
      }
    } else if (data.byteLength <= SYNC_IO_LIMIT) {
      for (let done = 0; done < data.byteLength;) done += fsSync.writeSync(fd, data, done, data.byteLength - done);
    } else {
      // Open and close are quick metadata calls; only the copy of the bytes goes to the thread pool.
      for (let done = 0; done < data.byteLength;) done += (await writeFd(fd, data, done, data.byteLength - done)).bytesWritten;
    }
    if (exactMode) fsSync.fchmodSync(fd, mode);
  } finally {
    fsSync.closeSync(fd);
  }
}

/** The stat of the file open on `fd`, refusing folders and special files (FIFOs, sockets, devices). */
function regularStat(fd: number, rel: string): fsSync.Stats {
  const st = fsSync.fstatSync(fd);
  if (st.isDirectory()) throw new InvalidArgumentError(`'${rel}' is a directory`, { field: "path", fieldPrefix: false });
  if (!st.isFile()) throw notRegular(rel, st);
  return st;
}

/**
 * The bytes of the regular file open on `fd`. Folders and special files (FIFOs, sockets, devices)
 * are refused before any read, so nothing blocks. Reading stops at the cap by bytes actually read:
 * a file growing meanwhile cannot push it past `maxBytes` (too_large) or, without one, past the
 * size it had when opened.
 */
async function readRegular(fd: number, rel: string, maxBytes: number | undefined): Promise<Buffer> {
  const st = regularStat(fd, rel);
  if (maxBytes !== undefined && st.size > maxBytes) throw new TooLargeError(`${rel} is ${st.size} bytes, over the ${maxBytes}-byte limit`);
  const cap = maxBytes ?? st.size;
  // One byte past the cap tells a file that grew past it from one that ends there.
  let buf = Buffer.allocUnsafe(Math.min(st.size, cap) + 1);
  let len = 0;
  const sync = st.size <= SYNC_IO_LIMIT;
  for (;;) {
    if (len === buf.length) {
      if (len > cap) break;
      const bigger = Buffer.allocUnsafe(Math.min(cap + 1, Math.max(buf.length * 2, 64 * 1024)));
      buf.copy(bigger, 0, 0, len);
      buf = bigger;
    }
    const n = sync ? fsSync.readSync(fd, buf, len, buf.length - len, null) : (await readFd(fd, buf, len, buf.length - len, null)).bytesRead;
    if (n === 0) break;
    len += n;
  }
  if (len > cap) {
    if (maxBytes !== undefined) throw new TooLargeError(`${rel} grew past the ${maxBytes}-byte limit while being read`);
    len = cap;
  }
  return buf.subarray(0, len);
}

function notRegular(rel: string, st: fsSync.Stats): WorkspaceError {
  const kind = st.isFIFO() ? "a FIFO" : st.isSocket() ? "a socket" : st.isCharacterDevice() || st.isBlockDevice() ? "a device" : "not a regular file";
  return new InvalidArgumentError(`'${rel}' is ${kind}; only regular files can be read or written`, { field: "path", fieldPrefix: false });
}

/** Removes `name` in the folder `dir` holds, recursively, never following a symlink. */
async function removeEntry(dir: number, name: string, depth = 0): Promise<void> {
  if (depth > MAX_TREE_DEPTH) throw new InvalidArgumentError(`folder tree deeper than ${MAX_TREE_DEPTH} levels`);
  const p = fdPath(dir, name);
  for (let attempt = 0; attempt < MAX_REMOVE_ATTEMPTS; attempt++) {
    const st = lstatOrUndefined(p);
    if (!st) return;
    if (!st.isDirectory()) {
      try {
        await fs.unlink(p);
        return;
      } catch (e) {
        if (errnoOf(e) === "ENOENT") return;
        // Turned into a folder since the lstat: go round again.
        if (errnoOf(e) === "EISDIR") continue;
        throw e;
      }
    }
    let fd: number;
    try {
      fd = fsSync.openSync(p, DIR_FLAGS);
    } catch (e) {
      if (errnoOf(e) === "ENOENT") return;
      if (errnoOf(e) === "ENOTDIR" || errnoOf(e) === "ELOOP") continue;
      throw e;
    }
    try {
      for (const child of await fs.readdir(fdPath(fd))) await removeEntry(fd, child, depth + 1);
    } finally {
      fsSync.closeSync(fd);
    }
    try {
      await fs.rmdir(p);
      return;
    } catch (e) {
      if (errnoOf(e) === "ENOENT") return;
      if (errnoOf(e) === "ENOTEMPTY" || errnoOf(e) === "ENOTDIR") continue;
      throw e;
    }
  }
  throw new ConflictError(`'${name}' kept changing while it was being removed`);
}

/** Regular files and folders of the folder `src` holds into the (new, empty) folder `dst` holds. */
async function copyEntries(src: number, dst: number, to: string, exclude: (name: string) => boolean, depth = 0): Promise<void> {
  if (depth > MAX_TREE_DEPTH) throw new InvalidArgumentError(`folder tree deeper than ${MAX_TREE_DEPTH} levels`, { field: "to", fieldPrefix: false });
  for (const d of fsSync.readdirSync(fdPath(src), { withFileTypes: true })) {
    if (exclude(d.name)) continue;
    const shown = `${to}/${d.name}`;
    if (d.isDirectory()) {
      let child: number;
      try {
        child = fsSync.openSync(fdPath(src, d.name), DIR_FLAGS);
      } catch {
        // Gone or swapped for a symlink since the listing: skipped, as a symlink would be.
        continue;
      }
      try {
        fsSync.mkdirSync(fdPath(dst, d.name));
        const target = fsSync.openSync(fdPath(dst, d.name), DIR_FLAGS);
        try {
          await copyEntries(child, target, shown, exclude, depth + 1);
        } finally {
          fsSync.closeSync(target);
        }
      } catch (e) {
        if (errnoOf(e) === "EEXIST") throw new ConflictError(`${shown} already exists`, { field: "path", cause: e });
        throw mapFsError(e, shown);
      } finally {
        fsSync.closeSync(child);
      }
    } else if (d.isFile()) {
      let fd: number;
      try {
        fd = fsSync.openSync(fdPath(src, d.name), fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK);
      } catch {
        continue;
      }
      try {
        if (!fsSync.fstatSync(fd).isFile()) continue;
        await copyRegular(fd, fdPath(dst, d.name));
      } catch (e) {
        if (errnoOf(e) === "EEXIST") throw new ConflictError(`${shown} already exists`, { field: "path", cause: e });
        throw mapFsError(e, shown);
      } finally {
        fsSync.closeSync(fd);
      }
    }
  }
}

/** Copies chunk by chunk: a file of any size (an agent's sparse 5 GiB one) never sits in host memory. */
const COPY_CHUNK = 1024 * 1024;
const ZERO_CHUNK = Buffer.alloc(COPY_CHUNK);

/**
 * The regular file open on `src` (up to its size at the call, so a file an agent keeps growing cannot
 * make the copy endless) into the new file `dst`: created exclusively, never through a symlink, mode
 * 0644. All-zero chunks are skipped and the size set at the end, so a sparse file stays sparse rather
 * than filling the disk.
 */
async function copyRegular(src: number, dst: string): Promise<void> {
  const out = fsSync.openSync(dst, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW, 0o644);
  try {
    const size = fsSync.fstatSync(src).size;
    const sync = size < SYNC_IO_LIMIT;
    const buf = Buffer.allocUnsafe(Math.max(1, Math.min(COPY_CHUNK, size)));
    let copied = 0;
    while (copied < size) {
      const want = Math.min(buf.length, size - copied);
      const n = sync ? fsSync.readSync(src, buf, 0, want, null) : (await readFd(src, buf, 0, want, null)).bytesRead;
      if (n === 0) break;
      if (!buf.subarray(0, n).equals(ZERO_CHUNK.subarray(0, n)))
        for (let done = 0; done < n;)
          done += sync ? fsSync.writeSync(out, buf, done, n - done, copied + done) : (await writeFd(out, buf, done, n - done, copied + done)).bytesWritten;
      copied += n;
    }
    fsSync.ftruncateSync(out, copied);
  } catch (e) {
    fsSync.closeSync(out);
    unlinkQuietly(dst);
    throw e;
  }
  fsSync.closeSync(out);
}

/** A folder whose fstat size is at most this (about 2,000 names on ext4) is read in one synchronous readdir. */
const SYNC_DIR_BYTES = 64 * 1024;

/** Every entry of the folder open on `fd`: a big folder in thread-pool batches, so the event loop is never held for the whole read. */
async function readEntries(fd: number): Promise<Dirent[]> {
  if (fsSync.fstatSync(fd).size <= SYNC_DIR_BYTES) return fsSync.readdirSync(fdPath(fd), { withFileTypes: true });
  const out: Dirent[] = [];
  const dir = await fs.opendir(fdPath(fd), { bufferSize: DIR_BATCH });
  try {
    for (let d = await dir.read(); d !== null; d = await dir.read()) out.push(d);
  } finally {
    await dir.close().catch(() => undefined);
  }
  return out;
}

function lstatOrUndefined(p: string): fsSync.Stats | undefined {
  try {
    return fsSync.lstatSync(p, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

function unlinkQuietly(p: string): void {
  try {
    fsSync.unlinkSync(p);
  } catch {
    // Already gone (or never created).
  }
}

interface Resolved {
  path: string;
  /** lstat of `path` made by the walk: undefined when missing, null when not looked at. */
  stat: fsSync.Stats | undefined | null;
}

function symlinkRefused(rel: string): PathEscapeError {
  return new PathEscapeError(`path '${rel}' is a symlink; refusing to write through it`);
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
async function copyHostDir(src: string, parent: number, name: string, mode: number): Promise<void> {
  fsSync.mkdirSync(fdPath(parent, name));
  const dst = fsSync.openSync(fdPath(parent, name), DIR_FLAGS);
  try {
    for (const d of fsSync.readdirSync(src, { withFileTypes: true })) {
      const from = `${src}/${d.name}`;
      if (d.isSymbolicLink()) continue;
      if (d.isDirectory()) await copyHostDir(from, dst, d.name, fsSync.lstatSync(from).mode);
      else await copyHostFile(from, fdPath(dst, d.name), fsSync.lstatSync(from));
    }
    fsSync.fchmodSync(dst, mode);
  } finally {
    fsSync.closeSync(dst);
  }
}

async function copyHostFile(src: string, dst: string, st: fsSync.Stats): Promise<void> {
  if (st.isSymbolicLink()) return;
  if (!st.isFile()) throw new InvalidArgumentError(`cannot copy '${src}': not a regular file, folder or symlink`, { field: "hostPath", fieldPrefix: false });
  // copyfile keeps the mode; COPYFILE_EXCL refuses an existing destination.
  if (st.size <= SYNC_IO_LIMIT) fsSync.copyFileSync(src, dst, fsc.COPYFILE_EXCL);
  else await fs.copyFile(src, dst, fsc.COPYFILE_EXCL);
}

function mapFsError(e: unknown, rel: string): unknown {
  if (e instanceof WorkspaceError) return e;
  const code = (e as NodeJS.ErrnoException)?.code;
  if (code === "ENOENT") return new NotFoundError(`'${rel}' not found`, { cause: e, field: "path" });
  if (code === "EISDIR") return new InvalidArgumentError(`'${rel}' is a directory`, { cause: e, field: "path", fieldPrefix: false });
  if (code === "ENOTDIR") return new InvalidArgumentError(`'${rel}' is not a directory`, { cause: e, field: "path", fieldPrefix: false });
  if (code === "ELOOP") return new PathEscapeError(`path '${rel}' is a symlink; refusing to follow it`, { cause: e });
  // O_NONBLOCK write-open of a FIFO nobody reads (or a socket): refused rather than waited on.
  if (code === "ENXIO") return new InvalidArgumentError(`'${rel}' is not a regular file`, { cause: e, field: "path", fieldPrefix: false });
  if (code === "ENAMETOOLONG") return new InvalidArgumentError(`'${rel}': a name in it is too long`, { cause: e, field: "path", fieldPrefix: false });
  return e;
}
