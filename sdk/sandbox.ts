import type { Readable, Writable } from "node:stream";

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
