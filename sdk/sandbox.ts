import type { Readable, Writable } from "node:stream";
import { InvalidArgumentError } from "./errors.js";

/**
 * The handle `Workspace` needs from a backend: run processes and touch files. Every path is
 * workspace-relative POSIX ("" = the root) and has already passed `checkRelativePath`;
 * implementations still resolve symlinks against their root and refuse anything that leaves it.
 */
export interface Sandbox {
  /** Backend kind, e.g. "local", "bubblewrap", "docker". */
  readonly kind: string;
  /** The workspace root as processes inside the sandbox see it (host path for Local, "/workspace" for containers). */
  readonly workdir: string;
  /** Whether files outlive the sandbox (false for ephemeral containers). */
  readonly persistent: boolean;
  /**
   * True when exec/spawn processes run unconfined on the host (Local). Tools then never hand such a
   * process a workspace path to walk, since a folder swapped for a symlink would lead it out of the
   * root: Grep's "auto" engine scans through the file methods instead of running ripgrep.
   */
  readonly unconfinedProcesses?: boolean;

  /** Runs argv (never a shell string). Timeouts give `timedOut: true` and exitCode -1, not a throw. */
  exec(argv: string[], options?: ExecOptions): Promise<ExecResult>;
  /** Starts a long-lived process with piped stdio, e.g. a stdio MCP server. */
  spawn(argv: string[], options?: SpawnOptions): SandboxProcess;

  readFile(path: string, options?: { maxBytes?: number }): Promise<Buffer>;
  /**
   * Atomic (temp file + rename) and creates parent directories. Refuses to follow a symlink out of the root.
   * A new file gets `mode` (default 0644); a replaced regular file keeps its permission bits unless `mode` is given.
   * With `exclusive`, fails with ConflictError when `path` exists, decided atomically (no check-then-write),
   * so concurrent writers can claim distinct names.
   */
  writeFile(path: string, data: Uint8Array | string, options?: { mode?: number; exclusive?: boolean }): Promise<void>;
  /**
   * Optional: at most `length` bytes of the regular file `path` from byte `offset`, without reading
   * the rest, so a file of any size can be fetched in pieces. Fewer bytes at the end of the file (none
   * past it), and at most 1 GiB per call. Callers fall back to `readFile` (whole, capped) when absent.
   */
  readRange?(path: string, offset: number, length: number): Promise<Buffer>;
  /** Appends in one write (O_APPEND where the backend has it), creating parents. */
  appendFile(path: string, data: Uint8Array | string): Promise<void>;
  /** Entries of a directory; NotFoundError when it is missing. */
  list(path: string): Promise<FileInfo[]>;
  /** null when missing. Does not follow a final symlink. */
  stat(path: string): Promise<FileInfo | null>;
  /** Recursive, missing is a no-op. */
  remove(path: string): Promise<void>;
  /** Recursive (mkdir -p). */
  mkdir(path: string): Promise<void>;
  /** Atomic rename within the workspace; fails with ConflictError when `to` exists. */
  rename(from: string, to: string): Promise<void>;
  /** Copies a host file or directory tree into the workspace at `to` (which must not exist). */
  copyIn(hostPath: string, to: string): Promise<void>;

  /**
   * Optional fast path: names and types of a directory's entries without their size and mtime
   * (one readdir where `list` needs a stat per entry). Callers fall back to `list` when absent.
   * NotFoundError when the directory is missing.
   */
  readDirTyped?(path: string): Promise<DirEntry[]>;
  /**
   * Optional: one page of a directory's entries, so a folder of any size (an agent can make 200,000
   * entries) is listed in bounded calls. `cursor` is the opaque `nextCursor` of the previous page;
   * pages follow the directory's own order, and entries added or removed between pages may be missed
   * or repeated. NotFoundError when the directory is missing. Callers use `listDirectoryPage`, which
   * falls back to `list` when absent.
   */
  listPage?(path: string, options?: ListPageOptions): Promise<ListPage>;
  /**
   * Optional: every entry below the folder `path` (which must exist), symlinks neither followed nor
   * entered, in depth-first pre-order (a folder before its content), walked with a descriptor per
   * level so a deep tree costs the same per entry as a flat one. Stops after `maxEntries` entries or
   * `timeoutMs` with `truncated`. Callers fall back to `list` per folder when absent.
   */
  walkTree?(path: string, options: WalkTreeOptions): Promise<WalkTreeResult>;
  /**
   * Optional fast path: copies the workspace folder `from` to `to` (created; must not exist) in
   * one call, instead of a list + readFile + writeFile per file. Regular files and folders only;
   * names for which `exclude` is true are skipped at every depth; files get mode 0644. A missing
   * `from` gives an empty `to`. Callers fall back to copying through the other methods when absent.
   */
  copyTree?(from: string, to: string, options?: { exclude?: (name: string) => boolean }): Promise<void>;

  /**
   * Optional fast path for files whose name the caller claims with this very call (an offloaded
   * tool result): creates `path` exclusively (ConflictError when it exists) without writeFile's
   * temp file. The bytes may not be atomic to a concurrent reader in another process; a failed
   * write leaves no file. Callers fall back to `writeFile(path, data, { exclusive: true })`.
   */
  createFile?(path: string, data: Uint8Array | string): Promise<void>;

  /** Releases client-side resources (not the backend object). */
  close?(): Promise<void>;
}

export interface ExecOptions {
  /** Workspace-relative working directory; default the root. */
  cwd?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
  signal?: AbortSignal;
  stdin?: Uint8Array | string;
  /** Cap on captured stdout/stderr each; extra output is dropped and `truncated` set. Default 16 MiB. */
  maxOutputBytes?: number;
}

export interface ExecResult {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
  timedOut: boolean;
  truncated: boolean;
}

export interface SpawnOptions {
  cwd?: string;
  env?: Record<string, string>;
}

export interface SandboxProcess {
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** Resolves with the exit code (null when killed by a signal). */
  readonly exited: Promise<number | null>;
  kill(): void;
}

export interface DirEntry {
  name: string;
  type: FileInfo["type"];
}

export interface FileInfo {
  name: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
  mtimeMs: number;
}

export interface ListPageOptions {
  /** The previous page's `nextCursor`; absent for the first page. */
  cursor?: string;
  /** Entries per page: default DEFAULT_LIST_PAGE, at most MAX_LIST_PAGE. */
  limit?: number;
}

export interface ListPage {
  entries: FileInfo[];
  /** Present when more entries follow: pass it as `cursor` for the next page. */
  nextCursor?: string;
}

/** Entries per listing page when the caller gives no limit. */
export const DEFAULT_LIST_PAGE = 1000;
/** The most entries one listing page may carry. */
export const MAX_LIST_PAGE = 10_000;

export interface WalkTreeOptions {
  /** Stop (truncated) after this many entries. */
  maxEntries: number;
  /** Stop (truncated) after about this long. */
  timeoutMs?: number;
  /** Folder names (at any depth) listed as entries but not entered, e.g. ".git". */
  skipDirs?: readonly string[];
}

export interface TreeEntry {
  /** Index in `entries` of the folder holding this entry; -1 for the walked folder itself. */
  parent: number;
  name: string;
  type: FileInfo["type"];
  /** Size and mtime of files (0 for other entries). */
  size: number;
  mtimeMs: number;
}

export interface WalkTreeResult {
  entries: TreeEntry[];
  truncated: boolean;
}

/** The path of `entries[i]` relative to the walked folder (built only for the entries a caller keeps). */
export function treePath(entries: readonly TreeEntry[], i: number): string {
  const names: string[] = [];
  for (let at = i; at >= 0; at = entries[at]!.parent) names.push(entries[at]!.name);
  return names.reverse().join("/");
}

/** A readRange's offset and length: non-negative safe integers, else InvalidArgumentError naming the one at fault. */
export function checkRange(offset: number, length: number): void {
  if (!Number.isSafeInteger(offset) || offset < 0) throw new InvalidArgumentError("must be a non-negative integer", { field: "offset" });
  if (!Number.isSafeInteger(length) || length < 0) throw new InvalidArgumentError("must be a non-negative integer", { field: "length" });
}

/**
 * readRange for a backend without a ranged read (no runner): the piece cut from a whole read capped
 * at `maxBytes` (TooLargeError for a bigger file, naming that cap).
 */
export async function rangeOfWholeRead(
  sandbox: Pick<Sandbox, "readFile">,
  path: string,
  offset: number,
  length: number,
  maxBytes = 64 * 1024 * 1024,
): Promise<Buffer> {
  checkRange(offset, length);
  return (await sandbox.readFile(path, { maxBytes })).subarray(offset, offset + length);
}

/** The offset and limit a ListPageOptions stands for; InvalidArgumentError names a bad cursor or limit. */
export function pageBounds(options: ListPageOptions = {}): { offset: number; limit: number; token?: string } {
  const { cursor, limit = DEFAULT_LIST_PAGE } = options;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIST_PAGE)
    throw new InvalidArgumentError(`must be an integer from 1 to ${MAX_LIST_PAGE}`, { field: "limit" });
  if (cursor === undefined || cursor === "") return { offset: 0, limit };
  // Opaque to callers: the readdir position the previous page stopped at, and maybe a handle the backend kept.
  const m = typeof cursor === "string" ? /^o([0-9]{1,9})(?:\.([0-9a-f]{16}))?$/.exec(cursor) : null;
  if (!m) throw new InvalidArgumentError("is not a cursor this listing gave out", { field: "cursor" });
  return m[2] ? { offset: Number(m[1]), limit, token: m[2] } : { offset: Number(m[1]), limit };
}

/** The cursor of the page starting at readdir position `offset` (with `token`: a handle kept open for it). */
export function cursorAt(offset: number, token?: string): string {
  return token ? `o${offset}.${token}` : `o${offset}`;
}

/**
 * Every Sandbox method that does one piece of work and settles (spawn, which starts a process, and
 * close are apart): the one list wrappers (tracking, resume-on-use) derive what they wrap from. A
 * method added to Sandbox and not here fails to compile below.
 */
export const SANDBOX_OPERATIONS = [
  "exec",
  "readFile",
  "writeFile",
  "appendFile",
  "list",
  "stat",
  "remove",
  "mkdir",
  "rename",
  "copyIn",
  "readRange",
  "readDirTyped",
  "listPage",
  "walkTree",
  "copyTree",
  "createFile",
] as const satisfies readonly (keyof Sandbox)[];

export type SandboxOperation = (typeof SANDBOX_OPERATIONS)[number];
type SandboxMethod = { [K in keyof Sandbox]-?: NonNullable<Sandbox[K]> extends (...args: never[]) => unknown ? K : never }[keyof Sandbox];
/** Compile-time check: never unless a Sandbox method is missing from SANDBOX_OPERATIONS. */
type Unlisted = Exclude<SandboxMethod, SandboxOperation | "spawn" | "close">;
const _everyMethodListed: [Unlisted] extends [never] ? true : Unlisted = true;

/**
 * A handle forwarding everything to `inner` (so `instanceof`, casts and a backend's extra properties
 * hold), where `wrap` may replace a method: it gets the method's name and the method bound to `inner`,
 * and returns the replacement, or undefined to forward it as it is. Each replacement is made once.
 * Properties are read with `inner` as receiver: backends keep state in private fields, which a proxy
 * receiver cannot reach.
 */
export function forwardingSandbox<S extends Sandbox>(
  inner: S,
  wrap: (name: PropertyKey, method: (...args: unknown[]) => unknown) => ((...args: unknown[]) => unknown) | undefined,
): S {
  const made = new Map<PropertyKey, unknown>();
  return new Proxy(inner, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      let fn = made.get(prop);
      if (fn === undefined) {
        const bound = (value as (...args: unknown[]) => unknown).bind(target);
        fn = wrap(prop, bound) ?? bound;
        made.set(prop, fn);
      }
      return fn;
    },
  });
}
