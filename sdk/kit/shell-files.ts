/**
 * The plain-exec fallback for file operations, written once for every container backend whose image
 * cannot run the runner (no python3): small sh scripts run inside the sandbox, so every path resolves as
 * the sandbox sees it (`realpath -m`) and anything leaving the workspace root is refused; the host never
 * decides on a sandbox path. A backend adds only how its bytes travel (stdin, a staged upload) and the
 * command that runs a script. Exit codes are SHELL_EXIT; `shellFileError` turns them into the same typed
 * errors the runner gives.
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import tar from "tar-stream";
import { ConflictError, NotFoundError, PathEscapeError, TooLargeError, WorkspaceError, InvalidArgumentError, ExecFailedError } from "../errors.js";
import type { ExecResult, FileInfo, Sandbox } from "../sandbox.js";
import { checkRelativePath } from "../paths.js";

export const SHELL_EXIT = { escape: 65, missing: 66, isDir: 67, notDir: 68, exists: 69, symlink: 70, tooLarge: 71, special: 72 } as const;

/** Single-quoted for sh: safe for any string (NUL excluded, which no argv can hold). */
export function shQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/**
 * Functions every script starts with: `res REL` sets p to REL resolved under the root W (65 when it
 * leaves it), `resp REL` resolves the parent only (d, b, p = d/b: a final symlink stays itself).
 */
export function shellPrelude(root: string): string {
  return `set -u
W=${shQuote(root)}
res() { p=$(realpath -m -- "$W/$1") || exit 65; case "$p" in "$W"|"$W"/*) ;; *) exit 65;; esac; }
resp() { case "$1" in */*) res "\${1%/*}";; *) res "";; esac; d=$p; b=\${1##*/}; p="$d/$b"; }
exists() { [ -e "$1" ] || [ -L "$1" ]; }
`;
}

/** The scripts whose bytes need no transport of their own (appends read stdin). */
export const SHELL_SCRIPTS = {
  /** Appends stdin to $1, creating it (and its parents); never through a final symlink. */
  append: `resp "$1"; [ -L "$p" ] && exit 70; [ -d "$p" ] && exit 67
mkdir -p -- "$d" 2>/dev/null || exit 68
cat >> "$p"`,
  list: `res "$1"; [ -e "$p" ] || exit 66; [ -d "$p" ] || exit 68
exec find "$p" -mindepth 1 -maxdepth 1 -printf '%y\\t%s\\t%T@\\t%f\\0'`,
  stat: `if [ -z "$1" ]; then p=$W; else resp "$1"; fi
exists "$p" || exit 0
exec find "$p" -maxdepth 0 -printf '%y\\t%s\\t%T@\\t%f\\0'`,
  /** Never the root itself, however it is spelled ("", ".", "a/.."). */
  remove: `resp "$1"; [ "$p" = "$W" ] && exit 65; [ "$d" = "$W" ] && [ -z "$b" ] && exit 65
rm -rf -- "$p"`,
  mkdir: `res "$1"; mkdir -p -- "$p" 2>/dev/null || exit 68`,
  rename: `resp "$1"; s=$p; resp "$2"; t=$p; td=$d
exists "$s" || exit 66; exists "$t" && exit 69
mkdir -p -- "$td" 2>/dev/null || exit 68
mv -T -- "$s" "$t"`,
  /** Prints the resolved path of a regular file no bigger than $2 bytes ("-": no cap). */
  resolveRead: `res "$1"; [ -e "$p" ] || exit 66; [ -d "$p" ] && exit 67; [ -f "$p" ] || exit 72
if [ "$2" != "-" ]; then s=$(stat -c %s -- "$p"); [ "$s" -le "$2" ] || { printf %s "$s" >&2; exit 71; }; fi
printf %s "$p"`,
  /** Publishes a file the backend uploaded to $4 (staged outside the workspace) at $1 with mode $2 ("-": keep a replaced file's bits, else 644); $3 = x: exclusive. */
  publish: `u=$4; trap 'rm -f -- "$u"' EXIT
resp "$1"; [ -L "$p" ] && exit 70; [ -d "$p" ] && exit 67
mkdir -p -- "$d" 2>/dev/null || exit 68
t="$d/.$b.agentws-tmp-$$"
m=$2; [ "$m" = - ] && { m=644; [ -f "$p" ] && m=$(stat -c %a -- "$p"); }
mv -fT -- "$u" "$t" && chmod "$m" -- "$t" || { rm -f -- "$t"; exit 1; }
if [ "$3" = x ]; then
  if ln -T -- "$t" "$p" 2>/dev/null; then rm -f -- "$t"; exit 0; fi
  rm -f -- "$t"; exists "$p" && exit 69; exit 1
fi
mv -fT -- "$t" "$p" && exit 0
rm -f -- "$t"; exit 1`,
  /** A working directory: prints it resolved, or fails 65/66/68. */
  cwd: `res "$1"; [ -e "$p" ] || exit 66; [ -d "$p" ] || exit 68; printf %s "$p"`,
} as const;

/** Kills every process whose environment carries `NAME=$1` (a timed-out or aborted command's whole tree). */
export function shellKillScript(markerName: string): string {
  return `for d in /proc/[0-9]*; do
  if grep -qsxz "${markerName}=$1" "$d/environ" 2>/dev/null; then kill -9 "\${d#/proc/}" 2>/dev/null; fi
done; exit 0`;
}

/** The typed error for a script's exit (undefined on success); `where` names the sandbox in the fallback message. */
export function shellFileError(r: ExecResult, verb: string, rel: string, where: string): WorkspaceError | undefined {
  switch (r.exitCode) {
    case 0:
      return undefined;
    case SHELL_EXIT.escape:
      return new PathEscapeError(`path '${rel}' resolves outside the workspace (through a symlink)`);
    case SHELL_EXIT.missing:
      return new NotFoundError(`'${rel}' not found`, { field: "path" });
    case SHELL_EXIT.isDir:
      return new InvalidArgumentError(`'${rel}' is a directory`, { field: "path", fieldPrefix: false });
    case SHELL_EXIT.notDir:
      return new InvalidArgumentError(`'${rel}' (or a parent) is not a directory`, { field: "path", fieldPrefix: false });
    case SHELL_EXIT.exists:
      return new ConflictError(`${rel} already exists`, { field: "path" });
    case SHELL_EXIT.symlink:
      return new PathEscapeError(`path '${rel}' is a symlink; refusing to write through it`);
    case SHELL_EXIT.tooLarge:
      return new TooLargeError(`'${rel}' is ${r.stderr.toString().trim()} bytes, over the cap`, { field: "path" });
    case SHELL_EXIT.special:
      return new InvalidArgumentError(`'${rel}' is not a regular file`, { field: "path", fieldPrefix: false });
  }
  return new ExecFailedError(`could not ${verb} '${rel}' in ${where} (exit ${r.exitCode}): ${r.stderr.toString().trim().slice(0, 500)}`, { field: "path" });
}

/** `find -printf '%y\t%s\t%T@\t%f\0'` records as FileInfo. */
export function parseFind(out: Buffer): FileInfo[] {
  const infos: FileInfo[] = [];
  for (const rec of out.toString("utf8").split("\0")) {
    if (!rec) continue;
    const [y, size, mtime, ...rest] = rec.split("\t");
    const type = y === "f" ? "file" : y === "d" ? "dir" : y === "l" ? "symlink" : "other";
    infos.push({ name: rest.join("\t"), type, size: Number(size), mtimeMs: Math.round(Number(mtime) * 1000) });
  }
  return infos;
}

/** A host file or tree into a tar under `name` (symlinks skipped: a host link never becomes a sandbox one). */
export async function packTree(pack: tar.Pack, source: string, name: string): Promise<void> {
  const st = await fs.lstat(source).catch((e: unknown) => {
    throw new NotFoundError(`host path '${source}' not found`, { cause: e, field: "hostPath" });
  });
  if (st.isSymbolicLink()) return;
  if (st.isDirectory()) {
    pack.entry({ name: `${name}/`, type: "directory", mode: st.mode & 0o777 });
    for (const child of (await fs.readdir(source)).sort()) await packTree(pack, path.join(source, child), `${name}/${child}`);
  } else if (st.isFile()) {
    const data = await fs.readFile(source);
    await new Promise<void>((resolve, reject) => pack.entry({ name, mode: st.mode & 0o777, size: data.length }, data, (e) => (e ? reject(e) : resolve())));
  }
}

/** A host file or tree as a tar held in memory whose top entry is `name` (packTree's rules). */
export async function packArchive(source: string, name: string): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on("data", (c: unknown) => void chunks.push(c as Buffer));
  const done = new Promise<void>((resolve, reject) => {
    pack.on("end", resolve);
    pack.on("error", reject);
  });
  await packTree(pack, source, name);
  pack.finalize();
  await done;
  return Buffer.concat(chunks);
}
/** A path that must name something inside the root, not the root itself. */
export function nonRoot(rel: string): string {
  if (rel === "") throw new PathEscapeError(`path '${rel}' must name a file, not the workspace root`);
  return rel;
}

/** The most bytes of one file copyTreeFileByFile carries through the host (too_large beyond). */
export const MAX_COPY_FILE_BYTES = 256 * 1024 * 1024;

/** A workspace folder copied file by file through a sandbox's own calls (the fallback's copyTree: no runner to do it in one). */
export async function copyTreeFileByFile(
  sb: Pick<Sandbox, "stat" | "mkdir" | "list" | "readFile" | "writeFile">,
  from: string,
  to: string,
  options: { exclude?: (name: string) => boolean } = {},
): Promise<void> {
  const exclude = options.exclude ?? (() => false);
  if (await sb.stat(nonRoot(checkRelativePath(to, "to")))) throw new ConflictError(`${to} already exists`, { field: "to" });
  await sb.mkdir(to);
  const walk = async (a: string, b: string): Promise<void> => {
    const entries = await sb.list(a).catch((e: unknown) => {
      if (e instanceof NotFoundError) return [];
      throw e;
    });
    for (const e of entries) {
      if (exclude(e.name)) continue;
      if (e.type === "dir") {
        await sb.mkdir(`${b}/${e.name}`);
        await walk(`${a}/${e.name}`, `${b}/${e.name}`);
      } else if (e.type === "file") {
        const file = `${a}/${e.name}`;
        // Every byte passes through the host: capped, and checked on what came back.
        const data = await sb.readFile(file, { maxBytes: MAX_COPY_FILE_BYTES });
        if (data.length > MAX_COPY_FILE_BYTES)
          throw new TooLargeError(`${file} is over the ${MAX_COPY_FILE_BYTES}-byte cap of a file-by-file copy`, { field: "path" });
        await sb.writeFile(`${b}/${e.name}`, data, { mode: 0o644, exclusive: true });
      }
    }
  };
  await walk(checkRelativePath(from, "from"), checkRelativePath(to, "to"));
}

/**
 * list, stat, remove, mkdir and rename through the shared scripts, for a plain side that runs each
 * script as one command of its own and carries its bytes its own way (Docker, E2B).
 */
export abstract class ScriptFiles {
  /** Names the sandbox in error messages ("the container"). */
  protected abstract readonly where: string;
  /** Runs prelude + SHELL_SCRIPTS[name] with `args`; stdout and stderr byte-exact. */
  protected abstract script(name: "list" | "stat" | "remove" | "mkdir" | "rename", args: string[]): Promise<ExecResult>;

  async list(rel: string): Promise<FileInfo[]> {
    const clean = checkRelativePath(rel);
    const r = await this.script("list", [clean]);
    this.check(r, "list", clean);
    return parseFind(r.stdout);
  }

  async stat(rel: string): Promise<FileInfo | null> {
    const clean = checkRelativePath(rel);
    const r = await this.script("stat", [clean]);
    this.check(r, "stat", clean);
    const info = parseFind(r.stdout)[0];
    return info ? { ...info, name: path.posix.basename(clean) || "." } : null;
  }

  async remove(rel: string): Promise<void> {
    const clean = checkRelativePath(rel);
    if (clean === "") throw new PathEscapeError(`path '${rel}' cannot remove the workspace root`);
    this.check(await this.script("remove", [clean]), "remove", clean);
  }

  async mkdir(rel: string): Promise<void> {
    const clean = checkRelativePath(rel);
    this.check(await this.script("mkdir", [clean]), "create directory", clean);
  }

  async rename(from: string, to: string): Promise<void> {
    const a = nonRoot(checkRelativePath(from, "from"));
    const b = nonRoot(checkRelativePath(to, "to"));
    const r = await this.script("rename", [a, b]);
    if (r.exitCode === SHELL_EXIT.exists) throw new ConflictError(`${b} already exists`, { field: "to" });
    this.check(r, "rename", a);
  }

  protected check(r: ExecResult, verb: string, rel: string): void {
    const e = shellFileError(r, verb, rel, this.where);
    if (e) throw e;
  }
}

/** What a backend gives the fallback's file operations: how a script runs and how bytes travel. */
export interface ShellFilesBackend {
  /** Runs prelude + SHELL_SCRIPTS[name] with `args` (stdin when given); stdout and stderr byte-exact. */
  op(name: keyof typeof SHELL_SCRIPTS, args: string[], stdin?: Uint8Array): Promise<ExecResult>;
  /** Puts bytes at a fresh staging path outside the workspace, returned (a publish script moves them in). */
  stage(data: Uint8Array): Promise<string>;
  /** At most `limit` bytes (all when undefined) of a path a script resolved under the root. */
  fetch(realPath: string, limit: number | undefined, rel: string): Promise<Buffer>;
  /** Names the sandbox in error messages ("the OpenSandbox sandbox"). */
  readonly where: string;
}

/** The Sandbox file operations on the fallback, written once: every path decided by a script inside the sandbox. */
export class ShellFiles {
  constructor(private readonly b: ShellFilesBackend) {}

  async readFile(rel: string, options: { maxBytes?: number } = {}): Promise<Buffer> {
    const clean = checkRelativePath(rel);
    const r = await this.b.op("resolveRead", [clean, options.maxBytes === undefined ? "-" : String(options.maxBytes)]);
    if (r.exitCode === SHELL_EXIT.tooLarge)
      throw new TooLargeError(`${clean} is ${r.stderr.toString()} bytes, over the ${options.maxBytes}-byte cap`, { field: "path" });
    this.#check(r, "read", clean);
    const got = await this.b.fetch(r.stdout.toString(), options.maxBytes === undefined ? undefined : options.maxBytes + 1, clean);
    if (options.maxBytes !== undefined && got.length > options.maxBytes)
      throw new TooLargeError(`${clean} grew over the ${options.maxBytes}-byte cap while read`, { field: "path" });
    return got;
  }

  async writeFile(rel: string, data: Uint8Array | string, options: { mode?: number; exclusive?: boolean } = {}): Promise<void> {
    const clean = nonRoot(checkRelativePath(rel));
    const staged = await this.b.stage(typeof data === "string" ? Buffer.from(data) : data);
    const mode = options.mode === undefined ? "-" : (options.mode & 0o7777).toString(8);
    this.#check(await this.b.op("publish", [clean, mode, options.exclusive ? "x" : "-", staged]), "write", clean);
  }

  async appendFile(rel: string, data: Uint8Array | string): Promise<void> {
    const clean = nonRoot(checkRelativePath(rel));
    this.#check(await this.b.op("append", [clean], typeof data === "string" ? Buffer.from(data) : data), "append to", clean);
  }

  async list(rel: string): Promise<FileInfo[]> {
    const clean = checkRelativePath(rel);
    const r = await this.b.op("list", [clean]);
    this.#check(r, "list", clean);
    return parseFind(r.stdout);
  }

  async stat(rel: string): Promise<FileInfo | null> {
    const clean = checkRelativePath(rel);
    const r = await this.b.op("stat", [clean]);
    if (r.exitCode === SHELL_EXIT.missing || r.exitCode === SHELL_EXIT.notDir) return null;
    this.#check(r, "stat", clean);
    return parseFind(r.stdout)[0] ?? null;
  }

  async remove(rel: string): Promise<void> {
    const clean = nonRoot(checkRelativePath(rel));
    this.#check(await this.b.op("remove", [clean]), "remove", clean);
  }

  async mkdir(rel: string): Promise<void> {
    const clean = checkRelativePath(rel);
    this.#check(await this.b.op("mkdir", [clean]), "mkdir", clean);
  }

  async rename(from: string, to: string): Promise<void> {
    const a = nonRoot(checkRelativePath(from, "from"));
    const b = nonRoot(checkRelativePath(to, "to"));
    const r = await this.b.op("rename", [a, b]);
    if (r.exitCode === SHELL_EXIT.exists) throw new ConflictError(`${b} already exists`, { field: "to" });
    this.#check(r, "rename", a);
  }

  #check(r: ExecResult, verb: string, rel: string): void {
    const e = shellFileError(r, verb, rel, this.b.where);
    if (e) throw e;
  }
}
