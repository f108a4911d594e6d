import { spawn as spawnChild } from "node:child_process";
import { randomBytes } from "node:crypto";
import { promises as fs, constants as fsc } from "node:fs";
import path from "node:path";
import { ConflictError, NotFoundError, PathEscapeError, TooLargeError, WorkspaceError } from "../../errors.js";
import type { ExecOptions, ExecResult, FileInfo, Sandbox, SandboxProcess, SpawnOptions } from "../../sandbox.js";
import { checkRelativePath } from "../../paths.js";
import { collectOutput } from "../../util/process.js";

/**
 * A host folder as a Sandbox. Processes run on the host with the workspace root as cwd (no
 * isolation: that is what Bubblewrap and Docker are for); file operations are confined to the root,
 * with symlinks resolved against it.
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
    const clean = checkRelativePath(rel);
    const root = await this.#root();
    if (clean === "") return root;
    const parts = clean.split("/");
    // Resolve every existing ancestor through realpath; the remainder does not exist yet.
    let current = root;
    for (let i = 0; i < parts.length; i++) {
      const next = path.join(current, parts[i]!);
      const isLast = i === parts.length - 1;
      let st;
      try {
        st = await fs.lstat(next);
      } catch {
        return path.join(next, ...parts.slice(i + 1));
      }
      if (st.isSymbolicLink() && (!isLast || opts.followFinal)) {
        const real = await fs.realpath(next).catch(() => {
          throw new PathEscapeError(rel, "goes through a dangling symlink");
        });
        if (real !== root && !real.startsWith(root + path.sep)) throw new PathEscapeError(rel, "resolves through a symlink outside the workspace");
        current = real;
      } else {
        current = next;
      }
    }
    return current;
  }

  async #root(): Promise<string> {
    if (this.#realRoot) return this.#realRoot;
    await fs.mkdir(this.workdir, { recursive: true });
    this.#realRoot = await fs.realpath(this.workdir);
    return this.#realRoot;
  }

  async exec(argv: string[], options: ExecOptions = {}): Promise<ExecResult> {
    if (argv.length === 0) return { exitCode: 127, stdout: Buffer.alloc(0), stderr: Buffer.from("empty command"), timedOut: false, truncated: false };
    const cwd = await this.hostPath(options.cwd ?? "", { followFinal: true });
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
    const p = await this.hostPath(rel, { followFinal: true });
    try {
      if (options.maxBytes !== undefined) {
        const st = await fs.stat(p);
        if (st.size > options.maxBytes) throw new TooLargeError(`${rel} is ${st.size} bytes, over the ${options.maxBytes}-byte limit`);
      }
      return await fs.readFile(p);
    } catch (e) {
      throw mapFsError(e, rel);
    }
  }

  async writeFile(rel: string, data: Uint8Array | string, options: { mode?: number; exclusive?: boolean } = {}): Promise<void> {
    const p = await this.hostPath(rel);
    // link() neither follows nor replaces an existing name, so only the replacing write needs this check.
    if (!options.exclusive) await this.#refuseSymlink(p, rel);
    const tmp = `${p}.tmp-${randomBytes(6).toString("hex")}`;
    // A Buffer write is several times faster than Node's string write path for large text.
    const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data;
    const writeTmp = () => fs.writeFile(tmp, bytes, { mode: options.mode ?? 0o644, flag: "wx" });
    try {
      try {
        await writeTmp();
      } catch (e) {
        // Parents are usually there already: create them only when the first attempt says so.
        if ((e as NodeJS.ErrnoException)?.code !== "ENOENT") throw e;
        await fs.mkdir(path.dirname(p), { recursive: true });
        await writeTmp();
      }
      if (options.exclusive) {
        // link() publishes the complete file and fails with EEXIST atomically, unlike rename().
        await fs.link(tmp, p);
        await fs.unlink(tmp);
      } else {
        await fs.rename(tmp, p);
      }
    } catch (e) {
      await fs.rm(tmp, { force: true });
      if ((e as NodeJS.ErrnoException)?.code === "EEXIST") throw new ConflictError(`${rel} already exists`, { field: rel, cause: e });
      throw mapFsError(e, rel);
    }
  }

  async appendFile(rel: string, data: Uint8Array | string): Promise<void> {
    const p = await this.hostPath(rel);
    await this.#refuseSymlink(p, rel);
    await fs.mkdir(path.dirname(p), { recursive: true });
    // O_APPEND with one write call: concurrent appenders never interleave or lose lines.
    const fh = await fs.open(p, fsc.O_WRONLY | fsc.O_APPEND | fsc.O_CREAT | fsc.O_NOFOLLOW, 0o644);
    try {
      await fh.write(typeof data === "string" ? Buffer.from(data) : data);
    } finally {
      await fh.close();
    }
  }

  async list(rel: string): Promise<FileInfo[]> {
    const p = await this.hostPath(rel, { followFinal: true });
    let names: string[];
    try {
      names = await fs.readdir(p);
    } catch (e) {
      throw mapFsError(e, rel);
    }
    const out = await Promise.all(names.map((name) => lstatInfo(path.join(p, name), name)));
    return out.filter((x): x is FileInfo => x !== null);
  }

  async stat(rel: string): Promise<FileInfo | null> {
    const p = await this.hostPath(rel);
    return lstatInfo(p, path.posix.basename(rel) || ".");
  }

  async remove(rel: string): Promise<void> {
    const clean = checkRelativePath(rel);
    if (clean === "") throw new PathEscapeError(rel, "cannot remove the workspace root");
    await fs.rm(await this.hostPath(clean), { recursive: true, force: true });
  }

  async mkdir(rel: string): Promise<void> {
    const p = await this.hostPath(rel, { followFinal: true });
    try {
      await fs.mkdir(p, { recursive: true });
    } catch (e) {
      throw mapFsError(e, rel);
    }
  }

  async rename(from: string, to: string): Promise<void> {
    const src = await this.hostPath(from);
    const dst = await this.hostPath(to);
    if (await exists(dst)) throw new ConflictError(`${to} already exists`, { field: to });
    await fs.mkdir(path.dirname(dst), { recursive: true });
    try {
      await fs.rename(src, dst);
    } catch (e) {
      throw mapFsError(e, from);
    }
  }

  async copyIn(hostSource: string, to: string): Promise<void> {
    const dst = await this.hostPath(to);
    if (await exists(dst)) throw new ConflictError(`${to} already exists`, { field: to });
    await fs.mkdir(path.dirname(dst), { recursive: true });
    // Symlinks in the source are skipped: a skill must not smuggle a link out of the workspace.
    await fs.cp(hostSource, dst, {
      recursive: true,
      errorOnExist: true,
      force: false,
      filter: async (src) => !(await fs.lstat(src)).isSymbolicLink(),
    });
  }

  async #refuseSymlink(p: string, rel: string): Promise<void> {
    const st = await fs.lstat(p).catch(() => null);
    if (st?.isSymbolicLink()) throw new PathEscapeError(rel, "is a symlink; refusing to write through it");
  }
}

async function exists(p: string): Promise<boolean> {
  return fs.lstat(p).then(
    () => true,
    () => false,
  );
}

async function lstatInfo(p: string, name: string): Promise<FileInfo | null> {
  const st = await fs.lstat(p).catch(() => null);
  if (!st) return null;
  const type = st.isSymbolicLink() ? "symlink" : st.isDirectory() ? "dir" : st.isFile() ? "file" : "other";
  return { name, type, size: st.size, mtimeMs: st.mtimeMs };
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
