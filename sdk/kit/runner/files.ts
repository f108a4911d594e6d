import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import { ConflictError, NotFoundError, PathEscapeError, TooLargeError, WorkspaceError, ExecFailedError, InvalidArgumentError } from "../../errors.js";
import { checkRange, cursorAt, pageBounds, type DirEntry, type FileInfo, type ListPage, type ListPageOptions } from "../../sandbox.js";
import { type TreeEntry, type WalkTreeOptions, type WalkTreeResult } from "../../sandbox.js";
import { checkRelativePath } from "../../paths.js";
import { MAX_READ_BYTES, RunnerFailure, type RunnerClient } from "./client.js";

/** A runner lent for one call; `release` ends a runner started for that call alone (after its handle closed). */
export interface RunnerLease {
  client: RunnerClient;
  release?: () => void;
}

/** Tree entries parsed between two turns of the event loop. */
const PARSE_SLICE = 4096;
/** Entries a copyTree or copyIn may carry: a bound on what one call walks. */
const MAX_TREE_ENTRIES = 100_000;

/**
 * The Sandbox file operations done by the in-sandbox runner: every path is resolved inside the
 * sandbox's own view, so a folder swapped for a symlink can only lead to what the sandbox already sees.
 * Errors are the ones LocalSandbox gives for the same case.
 */
export class RunnerFiles {
  readonly #acquire: () => Promise<RunnerLease>;

  /** `acquire` lends the live runner (starting or restarting it when needed) for one call. */
  constructor(acquire: () => Promise<RunnerLease>) {
    this.#acquire = acquire;
  }

  async readFile(rel: string, options: { maxBytes?: number } = {}): Promise<Buffer> {
    const clean = checkRelativePath(rel);
    // The host caps every read: a caller without a cap gets MAX_READ_BYTES (and its error names that).
    return this.#run(clean, "read", (r) => r.read(clean, options.maxBytes), options.maxBytes ?? MAX_READ_BYTES);
  }

  async readRange(rel: string, offset: number, length: number): Promise<Buffer> {
    const clean = checkRelativePath(rel);
    checkRange(offset, length);
    return this.#run(clean, "read", (r) => r.readRange(clean, offset, Math.min(length, MAX_READ_BYTES)));
  }

  async writeFile(rel: string, data: Uint8Array | string, options: { mode?: number; exclusive?: boolean } = {}): Promise<void> {
    const clean = nonRoot(checkRelativePath(rel));
    await this.#run(clean, "write", (r) => r.write(clean, options.exclusive ? "x" : "w", bytes(data), options.mode));
  }

  async appendFile(rel: string, data: Uint8Array | string): Promise<void> {
    const clean = nonRoot(checkRelativePath(rel));
    await this.#run(clean, "append to", (r) => r.write(clean, "a", bytes(data), undefined));
  }

  /** Exclusive create without a temp file (offloaded tool results); a failed write leaves no file. */
  async createFile(rel: string, data: Uint8Array | string): Promise<void> {
    const clean = nonRoot(checkRelativePath(rel));
    await this.#run(clean, "create", (r) => r.write(clean, "c", bytes(data), undefined));
  }

  async list(rel: string): Promise<FileInfo[]> {
    const clean = checkRelativePath(rel);
    const { payload } = await this.#run(clean, "list", (r) => r.call("l", [clean]));
    const f = fields(payload);
    const out: FileInfo[] = [];
    for (let i = 0; i + 3 < f.length; i += 4) out.push({ name: f[i + 3]!, type: typeOf(f[i]!), size: Number(f[i + 1]), mtimeMs: Number(f[i + 2]) / 1e6 });
    return out;
  }

  /** One page, skipped and cut inside the sandbox: the host never receives more than `limit` entries. */
  async listPage(rel: string, options: ListPageOptions = {}): Promise<ListPage> {
    const clean = checkRelativePath(rel);
    const { offset, limit } = pageBounds(options);
    const { fields: flags, payload } = await this.#run(clean, "list", (r) => r.call("l", [clean, String(offset), String(limit)]));
    const f = fields(payload);
    const entries: FileInfo[] = [];
    // Never more than asked for, whatever the runner sent.
    for (let i = 0; i + 3 < f.length && entries.length < limit; i += 4)
      entries.push({ name: f[i + 3]!, type: typeOf(f[i]!), size: Number(f[i + 1]), mtimeMs: Number(f[i + 2]) / 1e6 });
    return flags[0] === "1" ? { entries, nextCursor: cursorAt(offset + limit) } : { entries };
  }

  /** The whole tree in one call, walked inside the sandbox with a descriptor per level. */
  async walkTree(rel: string, options: WalkTreeOptions): Promise<WalkTreeResult> {
    const clean = checkRelativePath(rel);
    const cap = Math.max(0, Math.floor(options.maxEntries));
    const skip = (options.skipDirs ?? []).filter((d) => d !== "" && !d.includes("/")).join("/");
    const { fields: flags, payload } = await this.#run(clean, "walk", (r) => r.call("t", [clean, "R", String(cap), skip]));
    const entries: TreeEntry[] = [];
    // Parsed field by field, yielding between slices: 200,000 entries split at once would hold the event loop.
    const f: string[] = [];
    let extra = false;
    for (let at = 0; at < payload.length;) {
      const end = payload.indexOf(0, at);
      f.push(payload.toString("utf8", at, end < 0 ? payload.length : end));
      at = end < 0 ? payload.length : end + 1;
      if (f.length < 5) continue;
      if (entries.length >= cap) {
        extra = true;
        break;
      }
      const parent = Number(f[0]);
      // A parent must come before its child: anything else is a malformed answer, not a tree.
      if (!Number.isSafeInteger(parent) || parent < -1 || parent >= entries.length)
        throw new ExecFailedError(`malformed tree listing of '${clean}' from the sandbox`, { field: "path" });
      entries.push({ parent, type: typeOf(f[1]!), size: Number(f[2]) || 0, mtimeMs: Number(f[3]) / 1e6 || 0, name: f[4]! });
      f.length = 0;
      if (entries.length % PARSE_SLICE === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    return { entries, truncated: flags[0] === "1" || extra };
  }

  async readDirTyped(rel: string): Promise<DirEntry[]> {
    const clean = checkRelativePath(rel);
    const { payload } = await this.#run(clean, "list", (r) => r.call("t", [clean]));
    const f = fields(payload);
    const out: DirEntry[] = [];
    for (let i = 0; i + 1 < f.length; i += 2) out.push({ name: f[i + 1]!, type: typeOf(f[i]!) });
    return out;
  }

  async stat(rel: string): Promise<FileInfo | null> {
    const clean = checkRelativePath(rel);
    const { fields: f } = await this.#run(clean, "stat", (r) => r.call("s", [clean]));
    if (f.length < 4) return null;
    return { name: path.posix.basename(clean) || ".", type: typeOf(f[0]!), size: Number(f[1]), mtimeMs: Number(f[2]) / 1e6 };
  }

  async remove(rel: string): Promise<void> {
    const clean = checkRelativePath(rel);
    if (clean === "") throw new PathEscapeError(`path '${rel}' cannot remove the workspace root`);
    await this.#run(clean, "remove", (r) => r.call("d", [clean]));
  }

  async mkdir(rel: string, mode?: number): Promise<void> {
    const clean = checkRelativePath(rel);
    await this.#run(clean, "create directory", (r) => r.call("m", [clean, mode === undefined ? "-" : mode.toString(8)]));
  }

  async rename(from: string, to: string): Promise<void> {
    const a = nonRoot(checkRelativePath(from, "from"));
    const b = nonRoot(checkRelativePath(to, "to"));
    await this.#run(a, "rename", (r) => r.call("n", [a, b]), undefined, b);
  }

  /**
   * Copies the workspace folder `from` to a new folder `to` inside the sandbox: one call lists the tree
   * (regular files and folders, no symlink followed), the names `exclude` refuses are dropped here at
   * every depth, one more call copies the rest. A missing `from` gives an empty `to`.
   */
  async copyTree(from: string, to: string, options: { exclude?: (name: string) => boolean } = {}): Promise<void> {
    const src = checkRelativePath(from, "from");
    const dst = nonRoot(checkRelativePath(to, "to"));
    const exclude = options.exclude ?? (() => false);
    const listed = await this.#run(src, "copy", (r) => r.call("T", [src]));
    const f = listed.fields[0] === "missing" ? [] : fields(listed.payload);
    const keep: string[] = [];
    for (let i = 0; i + 1 < f.length; i += 2) {
      const rel = f[i + 1]!;
      if (rel.split("/").some((n) => exclude(n))) continue;
      keep.push(f[i]!, rel);
    }
    await this.#run(dst, "copy into", (r) => r.call("C", [src, dst], Buffer.from(keep.join("\0"))), undefined, dst);
  }

  /**
   * Copies a host file or tree (symlinks skipped, modes kept) into the workspace at `to`: built under a
   * temp name beside it, then renamed into place, so a failed copy leaves nothing at `to`. The host side
   * reads only the caller's own host path; every write is the runner's.
   */
  async copyIn(hostSource: string, to: string): Promise<void> {
    const dst = nonRoot(checkRelativePath(to, "to"));
    if (await this.stat(dst)) throw new ConflictError(`${dst} already exists`, { field: "to" });
    const st = await fs.lstat(hostSource).catch((e: unknown) => {
      throw new NotFoundError(`host path '${hostSource}' not found`, { cause: e, field: "hostPath" });
    });
    if (st.isSymbolicLink()) return;
    if (!st.isDirectory()) {
      if (!st.isFile()) throw notCopyable(hostSource);
      return this.writeFile(dst, await fs.readFile(hostSource), { mode: st.mode & 0o7777, exclusive: true });
    }
    const parent = path.posix.dirname(dst);
    const tmp = `${parent === "." ? "" : `${parent}/`}.agentws-copy-${randomBytes(6).toString("hex")}`;
    try {
      await this.mkdir(tmp);
      await this.#copyHostDir(hostSource, tmp, { count: 0 });
      await this.mkdir(tmp, st.mode & 0o7777);
      await this.rename(tmp, dst);
    } catch (e) {
      await this.remove(tmp).catch(() => undefined);
      throw e;
    }
  }

  async #copyHostDir(src: string, dst: string, seen: { count: number }): Promise<void> {
    for (const d of await fs.readdir(src, { withFileTypes: true })) {
      if (++seen.count > MAX_TREE_ENTRIES) throw new TooLargeError(`'${src}' holds more than ${MAX_TREE_ENTRIES} entries`, { field: "hostPath" });
      const from = path.join(src, d.name);
      const to = `${dst}/${d.name}`;
      if (d.isSymbolicLink()) continue;
      const st = await fs.lstat(from);
      if (st.isDirectory()) {
        await this.mkdir(to);
        await this.#copyHostDir(from, to, seen);
        await this.mkdir(to, st.mode & 0o7777);
      } else if (st.isFile()) {
        await this.writeFile(to, await fs.readFile(from), { mode: st.mode & 0o7777, exclusive: true });
      } else throw notCopyable(from);
    }
  }

  async #run<T>(rel: string, verb: string, fn: (r: RunnerClient) => Promise<T>, maxBytes?: number, other?: string): Promise<T> {
    const lease = await this.#acquire();
    try {
      return await fn(lease.client);
    } catch (e) {
      throw mapRunnerError(e, rel, verb, maxBytes, other);
    } finally {
      lease.release?.();
    }
  }
}

/** A working directory the runner refused, as the errors LocalSandbox gives for one. */
export function cwdError(e: unknown, rel: string): unknown {
  if (!(e instanceof RunnerFailure)) return e;
  if (e.code === "ENOENT") return new NotFoundError(`working directory '${rel}' not found`, { field: "cwd", cause: e });
  if (e.code === "ENOTDIR") return new InvalidArgumentError(`'${rel}' is not a directory`, { field: "cwd", cause: e });
  return mapRunnerError(e, rel, "use as working directory");
}

/** The WorkspaceError LocalSandbox would give for the same failure. `other` names the second path (rename's target). */
export function mapRunnerError(e: unknown, rel: string, verb: string, maxBytes?: number, other?: string): unknown {
  if (!(e instanceof RunnerFailure)) return e;
  const { code, detail } = e;
  switch (code) {
    case "ENOENT":
      return new NotFoundError(`'${rel}' not found`, { field: "path", cause: e });
    case "EISDIR":
      return new InvalidArgumentError(`'${rel}' is a directory`, { field: "path", fieldPrefix: false, cause: e });
    case "ENOTDIR":
      return new InvalidArgumentError(`'${rel}' is not a directory`, { field: "path", fieldPrefix: false, cause: e });
    case "ESCAPE":
      return new PathEscapeError(`path '${rel}' ${detail || "resolves outside the workspace"}`, { cause: e });
    case "ELOOP":
      return new PathEscapeError(`path '${rel}' is a symlink; refusing to follow it`, { cause: e });
    case "EROOT":
      return new PathEscapeError(`path '${rel}' cannot remove the workspace root`, { cause: e });
    case "EEXIST":
      return new ConflictError(`${other ?? rel} already exists`, { field: other !== undefined ? "to" : "path", cause: e });
    case "TOOBIG":
      return /entries/.test(detail)
        ? new TooLargeError(`'${rel}' ${detail}`, { field: "path", cause: e })
        : new TooLargeError(
            `${rel} is ${maxBytes !== undefined && Number(detail) > maxBytes ? `at least ${detail}` : detail} bytes, over the ${maxBytes}-byte limit`,
            { field: "path", cause: e },
          );
    case "SPECIAL":
    case "ENXIO":
      return new InvalidArgumentError(`'${rel}' is not a regular file (a FIFO, socket or device); refusing to open it`, {
        field: "path",
        fieldPrefix: false,
        cause: e,
      });
    case "ENAMETOOLONG":
      return new InvalidArgumentError(`'${rel}': a name in the path is too long`, { field: "path", fieldPrefix: false, cause: e });
  }
  return new ExecFailedError(`could not ${verb} '${rel}' in the sandbox: ${code}${detail ? ` (${detail})` : ""}`, { field: "path", cause: e });
}

function bytes(data: Uint8Array | string): Uint8Array {
  return typeof data === "string" ? Buffer.from(data, "utf8") : data;
}

function fields(payload: Buffer): string[] {
  return payload.length ? payload.toString("utf8").split("\0") : [];
}

function typeOf(t: string): FileInfo["type"] {
  return t === "f" ? "file" : t === "d" ? "dir" : t === "l" ? "symlink" : "other";
}

function nonRoot(rel: string): string {
  if (rel === "") throw new PathEscapeError(`path '${rel}' must name a file, not the workspace root`);
  return rel;
}

function notCopyable(p: string): WorkspaceError {
  return new InvalidArgumentError(`cannot copy '${p}': not a regular file, folder or symlink`, { field: "hostPath", fieldPrefix: false });
}
