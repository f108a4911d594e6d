// Size: the Sandbox over E2B's SDK: the runner path (one background command per sandbox handle), plus the
// fallback for sandboxes without python3 (one command per exec, files-API transfers and confined scripts).
import { randomBytes } from "node:crypto";
import path from "node:path";
import { PassThrough, Writable } from "node:stream";
import tar from "tar-stream";
import type { Sandbox as E2BSdkSandbox, CommandHandle } from "e2b";
import { ConflictError, NotFoundError, PathEscapeError, TooLargeError, UnavailableError, WorkspaceError, InvalidArgumentError, ExecFailedError } from "../../errors.js";
import { checkRelativePath } from "../../paths.js";
import { pageOfEntries, walkTreeByList } from "../../util/listing.js";
import type { DirEntry, ExecOptions, ExecResult, FileInfo, ListPage, ListPageOptions, Sandbox, SandboxProcess, SpawnOptions, WalkTreeOptions, WalkTreeResult } from "../../sandbox.js";
import { rangeOfWholeRead } from "../../sandbox.js";
import { DEFAULT_MAX_OUTPUT } from "../../util/process.js";
import { silentLogger, type Logger } from "../../logger.js";
import { RunnerFiles, runnerExec, RunnerSupervisor, spawnThroughRunner, type RemoteFiles, type RunnerLease } from "../../kit/runner/index.js";
import { copyTreeFileByFile, nonRoot, packTree, parseFind, shellFileError } from "../../kit/shell-files.js";
import { e2bError } from "./client.js";
import { startE2BRunner, type E2BRunnerTransport } from "./runner.js";
import { E2B_STAGING, E2B_WORKDIR, commandIn, quote, scriptCommand, type SCRIPTS } from "./scripts.js";

export { E2B_WORKDIR } from "./scripts.js";

/** Bound on a file read through the files API when the caller gave none (sandboxes without python3). */
const MAX_READ = 1024 ** 3;

export interface E2BSandboxOptions {
  /** Called as every operation starts: renews the sandbox's keep-alive (see E2BDriver). */
  touch?: () => void;
  /** The API key, scrubbed from any error text. */
  secret?: string;
  /** Told once when the sandbox has no python3 and falls back to one command per call. */
  logger?: Logger | undefined;
}

/**
 * A running E2B sandbox as a Sandbox. Commands, spawned processes and every file operation go through
 * one long-lived runner per handle (sdk/kit/runner), an E2B background command with stdin
 * whose paths are all resolved inside the sandbox, descriptor-relative with O_NOFOLLOW; its output
 * crosses as base64 text (E2B decodes command output as UTF-8), so bytes are exact both ways. A sandbox
 * without python3 falls back to one E2B command per exec and files-API transfers plus confined scripts
 * (scripts.ts), said once in the log.
 */
export class E2BSandbox implements Sandbox {
  readonly kind = "e2b";
  readonly workdir = E2B_WORKDIR;
  readonly persistent = true;
  readonly #sbx: E2BSdkSandbox;
  readonly #touch: () => void;
  readonly #secret: string | undefined;
  readonly #logger: Logger;
  readonly #live = new Set<CommandHandle>();
  readonly #runners: RunnerSupervisor;
  readonly #rf: RunnerFiles;
  /** "runner" once a runner answered, "plain" when the sandbox cannot run one (no python3). */
  #mode: "unknown" | "runner" | "plain" = "unknown";
  #probing: Promise<boolean> | undefined;
  #closed = false;
  /** The SDK error behind the last runner's end (a lost stream, a refused send): what a call it failed reports. */
  #apiError: unknown;
  #plainReady: Promise<void> | undefined;

  constructor(sbx: E2BSdkSandbox, options: E2BSandboxOptions = {}) {
    this.#sbx = sbx;
    this.#touch = options.touch ?? (() => undefined);
    this.#secret = options.secret;
    this.#logger = options.logger ?? silentLogger;
    // Big files cross the files API at the runner's descriptors (see RemoteFiles); said once if that fails.
    let warned = false;
    const remote: RemoteFiles = {
      upload: async (p, data) => {
        const body = new Uint8Array(data.byteLength);
        body.set(data);
        await this.#sbx.files.write(p, body.buffer, { useOctetStream: true });
      },
      download: async (p) => {
        const bytes = await this.#sbx.files.read(p, { format: "bytes" });
        return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      },
      // envd's upload is a stat, a chown, an open for writing (O_TRUNC) and a copy: a pipe's end takes it as a file would.
      streams: true,
      fellBack: (e) => {
        if (warned) return;
        warned = true;
        this.#logger.warn("e2b files API could not transfer a file at the sandbox runner's descriptor; big files go through the runner's command streams instead", {
          sandboxId: this.#sbx.sandboxId,
          error: String((e2bError(e, "transfer a file", this.#secret) as Error)?.message ?? e),
        });
      },
    };
    this.#runners = new RunnerSupervisor(() => {
      this.#apiError = undefined;
      return startE2BRunner(this.#sbx, E2B_WORKDIR, (e) => (this.#apiError = e), remote);
    });
    this.#rf = new RunnerFiles(() => this.#lease());
  }

  get sandboxId(): string {
    return this.#sbx.sandboxId;
  }

  /** Whether calls go through the runner ("plain" after a sandbox without python3 refused it). */
  get runnerMode(): "unknown" | "runner" | "plain" {
    return this.#mode;
  }

  /** The live runner's envd pid (for tests), if one runs. */
  get runnerPid(): number | undefined {
    return this.#runners.current?.pid;
  }

  async exec(argv: string[], options: ExecOptions = {}): Promise<ExecResult> {
    if (argv.length === 0) return { exitCode: 127, stdout: Buffer.alloc(0), stderr: Buffer.from("empty command"), timedOut: false, truncated: false };
    this.#touch();
    if (await this.#useRunner()) {
      checkRelativePath(options.cwd ?? "", "cwd");
      const lease = await this.#lease();
      try {
        const r = await runnerExec(lease.client, argv, options, {});
        // Stopped under the call because the sandbox went away (or was paused): that, not "runner stopped".
        const api = (lease.client.transport as E2BRunnerTransport).apiError();
        if (r.exitCode === -1 && !r.timedOut && api !== undefined && !lease.client.alive) throw this.#lost(api);
        return r;
      } finally {
        lease.release?.();
      }
    }
    return this.#plainExec(argv, options);
  }

  /**
   * Through the runner: the process's stdio streams over the runner's channel (no E2B command of its
   * own), its cwd resolved inside the sandbox; it dies with the runner at close(). Without python3, one
   * background E2B command per process.
   */
  spawn(argv: string[], options: SpawnOptions = {}): SandboxProcess {
    if (argv.length === 0) throw new InvalidArgumentError("spawn: argv must not be empty", { field: "argv", fieldPrefix: false });
    const rel = checkRelativePath(options.cwd ?? "", "cwd");
    this.#touch();
    const open = async (): Promise<RunnerLease | SandboxProcess> => {
      if (!(await this.#useRunner())) return this.#plainSpawn(argv, rel, options);
      return this.#lease();
    };
    return spawnThroughRunner(open(), { argv, cwd: rel, env: { ...options.env } });
  }

  async readFile(rel: string, options: { maxBytes?: number } = {}): Promise<Buffer> {
    this.#touch();
    if (await this.#useRunner()) return this.#files(() => this.#rf.readFile(rel, options), true);
    return this.#plainReadFile(rel, options);
  }

  async writeFile(rel: string, data: Uint8Array | string, options: { mode?: number; exclusive?: boolean } = {}): Promise<void> {
    this.#touch();
    if (await this.#useRunner()) return this.#files(() => this.#rf.writeFile(rel, data, options));
    const clean = nonRoot(checkRelativePath(rel));
    const staged = await this.#stage(data, clean);
    const mode = options.mode === undefined ? "-" : (options.mode & 0o7777).toString(8);
    this.#check(await this.#op("place", [clean, staged, mode, options.exclusive ? "x" : "-"]), "write", clean);
  }

  async appendFile(rel: string, data: Uint8Array | string): Promise<void> {
    this.#touch();
    if (await this.#useRunner()) return this.#files(() => this.#rf.appendFile(rel, data));
    const clean = nonRoot(checkRelativePath(rel));
    const staged = await this.#stage(data, clean);
    this.#check(await this.#op("append", [clean, staged]), "append to", clean);
  }

  async list(rel: string): Promise<FileInfo[]> {
    this.#touch();
    if (await this.#useRunner()) return this.#files(() => this.#rf.list(rel), true);
    const clean = checkRelativePath(rel);
    const r = await this.#op("list", [clean]);
    this.#check(r, "list", clean);
    return parseFind(r.stdout);
  }

  async stat(rel: string): Promise<FileInfo | null> {
    this.#touch();
    if (await this.#useRunner()) return this.#files(() => this.#rf.stat(rel), true);
    const clean = checkRelativePath(rel);
    const r = await this.#op("stat", [clean]);
    this.#check(r, "stat", clean);
    const info = parseFind(r.stdout)[0];
    return info ? { ...info, name: path.posix.basename(clean) || "." } : null;
  }

  async remove(rel: string): Promise<void> {
    this.#touch();
    if (await this.#useRunner()) return this.#files(() => this.#rf.remove(rel), true);
    const clean = checkRelativePath(rel);
    if (clean === "") throw new PathEscapeError(`path '${rel}' cannot remove the workspace root`);
    this.#check(await this.#op("remove", [clean]), "remove", clean);
  }

  async mkdir(rel: string): Promise<void> {
    this.#touch();
    if (await this.#useRunner()) return this.#files(() => this.#rf.mkdir(rel), true);
    const clean = checkRelativePath(rel);
    this.#check(await this.#op("mkdir", [clean]), "create directory", clean);
  }

  async rename(from: string, to: string): Promise<void> {
    this.#touch();
    if (await this.#useRunner()) return this.#files(() => this.#rf.rename(from, to));
    const a = nonRoot(checkRelativePath(from, "from"));
    const b = nonRoot(checkRelativePath(to, "to"));
    const r = await this.#op("rename", [a, b]);
    if (r.exitCode === 69) throw new ConflictError(`${b} already exists`, { field: "to" });
    this.#check(r, "rename", a);
  }

  /** Through the runner, file by file; without python3, one tar uploaded and unpacked into place in one script. */
  async copyIn(hostSource: string, to: string): Promise<void> {
    this.#touch();
    if (await this.#useRunner()) return this.#files(() => this.#rf.copyIn(hostSource, to));
    const clean = nonRoot(checkRelativePath(to, "to"));
    const name = `c${randomBytes(6).toString("hex")}`;
    const pack = tar.pack();
    const chunks: Buffer[] = [];
    pack.on("data", (c: unknown) => void chunks.push(c as Buffer));
    const done = new Promise<void>((resolve, reject) => {
      pack.on("end", resolve);
      pack.on("error", reject);
    });
    await packTree(pack, hostSource, name);
    pack.finalize();
    await done;
    const staged = await this.#stage(Buffer.concat(chunks), clean);
    const r = await this.#op("unpack", [clean, staged, name]);
    if (r.exitCode === 69) throw new ConflictError(`${clean} already exists`, { field: "path" });
    this.#check(r, "copy into", clean);
  }

  /** A piece of a file of any size: read from its offset by the runner (without python3: cut from a capped whole read). */
  async readRange(rel: string, offset: number, length: number): Promise<Buffer> {
    this.#touch();
    if (await this.#useRunner()) return this.#files(() => this.#rf.readRange(rel, offset, length), true);
    return rangeOfWholeRead(this, rel, offset, length);
  }

  /** One page of a folder: cut inside the sandbox by the runner (without python3: from a full listing). */
  async listPage(rel: string, options?: ListPageOptions): Promise<ListPage> {
    this.#touch();
    if (await this.#useRunner()) return this.#files(() => this.#rf.listPage(rel, options), true);
    return pageOfEntries(await this.list(rel), options);
  }

  /** The tree below a folder: one runner call (without python3: a listing per folder). */
  async walkTree(rel: string, options: WalkTreeOptions): Promise<WalkTreeResult> {
    this.#touch();
    if (await this.#useRunner()) return this.#files(() => this.#rf.walkTree(rel, options), true);
    return walkTreeByList(this, rel, options);
  }

  /** Names and types of a folder's entries in one runner call (a list without the per-entry stat). */
  async readDirTyped(rel: string): Promise<DirEntry[]> {
    this.#touch();
    if (await this.#useRunner()) return this.#files(() => this.#rf.readDirTyped(rel), true);
    return (await this.list(rel)).map((e) => ({ name: e.name, type: e.type }));
  }

  /** Copies a workspace folder in two runner calls (without python3: file by file). */
  async copyTree(from: string, to: string, options: { exclude?: (name: string) => boolean } = {}): Promise<void> {
    this.#touch();
    if (await this.#useRunner()) return this.#files(() => this.#rf.copyTree(from, to, options));
    return copyTreeFileByFile(this, from, to, options);
  }

  /** Exclusive create without writeFile's temp file, in one runner call. */
  async createFile(rel: string, data: Uint8Array | string): Promise<void> {
    this.#touch();
    if (await this.#useRunner()) return this.#files(() => this.#rf.createFile(rel, data));
    return this.writeFile(rel, data, { exclusive: true });
  }

  /** Ends the runner (and with it every command and process it runs) and what this handle spawned without it; the sandbox itself is the driver's. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([this.#runners.stop(), ...[...this.#live].map((h) => h.kill().catch(() => false))]);
    this.#live.clear();
  }

  /** Whether calls go through the runner; the first call finds out (and says so once when it cannot). */
  async #useRunner(): Promise<boolean> {
    if (this.#mode !== "unknown") return this.#mode === "runner";
    this.#probing ??= this.#probe().finally(() => (this.#probing = undefined));
    return this.#probing;
  }

  async #probe(): Promise<boolean> {
    const lease: RunnerLease = this.#closed ? this.#runners.oneShot() : { client: this.#runners.get() };
    const transport = lease.client.transport as E2BRunnerTransport;
    try {
      await lease.client.ready;
      this.#mode = "runner";
      return true;
    } catch (e) {
      // E2B refused the command itself (a paused or gone sandbox): an error now, another try next call.
      const code = await transport.exitCode();
      const api = transport.apiError();
      if (code === null) throw api !== undefined ? e2bError(api, "start the sandbox runner", this.#secret) : e;
      this.#mode = "plain";
      this.#logger.warn("e2b sandbox cannot run the sandbox runner (no python3?); falling back to one command per exec and file operation", {
        sandboxId: this.#sbx.sandboxId,
        exitCode: code,
      });
      return false;
    } finally {
      if (this.#closed) lease.release?.();
    }
  }

  /** The live runner for one call (started when there is none); after close() a runner of its own, stopped when the call is done. */
  async #lease(): Promise<RunnerLease> {
    const lease: RunnerLease = this.#closed ? this.#runners.oneShot() : { client: this.#runners.get() };
    try {
      await lease.client.ready;
    } catch (e) {
      lease.release?.();
      const api = (lease.client.transport as E2BRunnerTransport).apiError();
      throw api !== undefined ? e2bError(api, "start the sandbox runner", this.#secret) : e;
    }
    return lease;
  }

  /** A file call through the runner: one the runner's end failed reports why it ended (the sandbox gone or paused). */
  async #files<T>(fn: () => Promise<T>, idempotent = false, again = true): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      const api = this.#apiError;
      if (!(e instanceof UnavailableError) || api === undefined || !/sandbox runner stopped/.test(e.message)) throw e;
      const mapped = this.#lost(api);
      // A call that only reads (or whose repeat changes nothing) is sent once more, to a fresh runner.
      if (idempotent && again && mapped instanceof UnavailableError && !this.#closed) return this.#files(fn, idempotent, false);
      throw mapped;
    }
  }

  /**
   * Why the runner's end failed a call: the sandbox gone is not_found; a lost stream (a pause drops every
   * connection, and a call sent before the loss showed may have run or not) is unavailable, for a retry.
   */
  #lost(api: unknown): unknown {
    const mapped = e2bError(api, "use the e2b sandbox", this.#secret);
    if (mapped instanceof WorkspaceError && mapped.code === "internal")
      return new UnavailableError(`the connection to the e2b sandbox's runner was lost (the sandbox paused?); the next call starts a new runner: ${mapped.message}`, {
        cause: api,
      });
    return mapped;
  }

  /** Without python3: the workspace and staging folders, made once (the runner makes the root itself). */
  #plainSetup(): Promise<void> {
    this.#plainReady ??= this.#command(`mkdir -p ${quote(E2B_WORKDIR)} ${quote(E2B_STAGING)} && chmod 700 ${quote(E2B_STAGING)}`, {}).then(
      () => undefined,
      (e: unknown) => {
        this.#plainReady = undefined;
        throw e;
      },
    );
    return this.#plainReady;
  }

  async #plainExec(argv: string[], options: ExecOptions): Promise<ExecResult> {
    const cwd = checkRelativePath(options.cwd ?? "", "cwd");
    await this.#plainSetup();
    const r = await this.#command(commandIn(argv, cwd), options);
    if (r.exitCode === 213) {
      const why = r.stderr.toString();
      if (why.includes("agentws:cwd-escape")) throw new PathEscapeError(`path '${cwd}' (cwd) resolves outside the workspace (through a symlink)`, { field: "cwd" });
      if (why.includes("agentws:cwd-missing")) throw new NotFoundError(`working directory '${cwd}' not found`, { field: "cwd" });
      if (why.includes("agentws:cwd-notdir")) throw new InvalidArgumentError(`working directory '${cwd}' is not a directory`, { field: "cwd", fieldPrefix: false });
    }
    return r;
  }

  /** One background E2B command with stdin per process (sandboxes without python3). */
  #plainSpawn(argv: string[], cwd: string, options: SpawnOptions): SandboxProcess {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let handle: CommandHandle | undefined;
    let killed = false;
    // Each sendStdin is one unary call: chained so chunks arrive in order.
    let sending: Promise<unknown> = Promise.resolve();
    const started = this.#plainSetup().then(() =>
      this.#sbx.commands.run(commandIn(argv, cwd), {
        background: true,
        stdin: true,
        timeoutMs: 0,
        envs: options.env ?? {},
        onStdout: (s) => void stdout.write(s),
        onStderr: (s) => void stderr.write(s),
      }),
    );
    started.catch(() => undefined);
    const stdin = new Writable({
      write: (chunk: Buffer, _enc, cb) => {
        sending = sending.then(async () => {
          const h = await started;
          this.#touch();
          await h.sendStdin(new Uint8Array(chunk));
        });
        sending.then(
          () => cb(),
          (e: unknown) => cb(e instanceof Error ? e : new ExecFailedError(String(e))),
        );
      },
      final: (cb) => {
        sending = sending.then(async () => (await started).closeStdin());
        sending.then(
          () => cb(),
          () => cb(),
        );
      },
    });
    stdin.on("error", () => undefined);
    const exited = (async (): Promise<number | null> => {
      try {
        handle = await started;
        this.#live.add(handle);
        if (killed) await handle.kill().catch(() => false);
        const r = await handle.wait().catch((e: unknown) => e as { exitCode?: number });
        return killed ? null : typeof r.exitCode === "number" ? r.exitCode : null;
      } catch (e) {
        stderr.write(`spawn failed: ${String((e2bError(e, "spawn", this.#secret) as Error).message)}\n`);
        return 127;
      } finally {
        if (handle) this.#live.delete(handle);
        stdout.end();
        stderr.end();
      }
    })();
    return {
      stdin,
      stdout,
      stderr,
      exited,
      kill: () => {
        killed = true;
        void handle?.kill().catch(() => false);
      },
    };
  }

  async #plainReadFile(rel: string, options: { maxBytes?: number }): Promise<Buffer> {
    const clean = checkRelativePath(rel);
    const max = options.maxBytes;
    const r = await this.#op("locate", [clean, max === undefined ? "-" : String(max)]);
    if (r.exitCode === 71) throw new TooLargeError(`${clean} is ${r.stderr.toString()} bytes, over the ${max}-byte limit`, { field: "path" });
    this.#check(r, "read", clean);
    const [size, resolved] = splitOnce(r.stdout.toString(), "\t");
    if (Number(size) > MAX_READ) throw new TooLargeError(`${clean} is ${size} bytes, over the ${MAX_READ}-byte read limit`, { field: "path" });
    const bytes = await this.#call("read", clean, () => this.#sbx.files.read(resolved, { format: "bytes" }));
    const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    // Grown between the check and the read: still bounded.
    if (max !== undefined && buf.length > max) throw new TooLargeError(`${clean} is over the ${max}-byte limit`, { field: "path" });
    return buf;
  }

  /** Uploads bytes to a fresh name in the staging folder (exact bytes, through the files API). */
  async #stage(data: Uint8Array | string, rel: string): Promise<string> {
    await this.#plainSetup();
    const staged = `${E2B_STAGING}/${randomBytes(8).toString("hex")}`;
    // An ArrayBuffer of exactly these bytes (a Buffer may be a view of a shared pool).
    const bytes = typeof data === "string" ? Buffer.from(data) : data;
    const body = new Uint8Array(bytes.byteLength);
    body.set(bytes);
    await this.#call("write", rel, () => this.#sbx.files.write(staged, body.buffer));
    return staged;
  }

  async #op(name: keyof typeof SCRIPTS, args: string[]): Promise<ExecResult> {
    await this.#plainSetup();
    return this.#command(scriptCommand(name, args), {});
  }

  async #call<T>(verb: string, rel: string, fn: () => Promise<T>): Promise<T> {
    this.#touch();
    try {
      return await fn();
    } catch (e) {
      throw e2bError(e, `${verb} '${rel}' in the e2b sandbox`, this.#secret);
    }
  }

  /** One E2B command with stdin, a timeout and capped output; non-zero exits are results, not errors. */
  async #command(cmd: string, o: ExecOptions): Promise<ExecResult> {
    this.#touch();
    const max = o.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    const out = new Capped(max);
    const err = new Capped(max);
    const hasStdin = o.stdin !== undefined;
    let handle: CommandHandle;
    try {
      handle = await this.#sbx.commands.run(cmd, {
        background: true,
        stdin: hasStdin,
        timeoutMs: 0,
        envs: o.env ?? {},
        onStdout: (s) => out.add(s),
        onStderr: (s) => err.add(s),
      });
    } catch (e) {
      throw e2bError(e, "run a command in the e2b sandbox", this.#secret);
    }
    let timedOut = false;
    const stop = () => {
      timedOut = true;
      void handle.kill().catch(() => false);
    };
    const timer = o.timeoutMs !== undefined && o.timeoutMs > 0 ? setTimeout(stop, o.timeoutMs) : undefined;
    if (o.signal?.aborted) stop();
    o.signal?.addEventListener("abort", stop, { once: true });
    try {
      if (hasStdin) {
        const data = typeof o.stdin === "string" ? Buffer.from(o.stdin) : o.stdin!;
        if (data.length) await handle.sendStdin(new Uint8Array(data));
        await handle.closeStdin();
      }
      const r = await handle.wait().then(
        (v) => ({ exitCode: v.exitCode, failed: undefined }),
        (e: unknown) => ({ exitCode: (e as { exitCode?: number }).exitCode, failed: e }),
      );
      if (timedOut) return { exitCode: -1, stdout: out.buffer(), stderr: err.length ? err.buffer() : Buffer.from("timed out"), timedOut: true, truncated: out.truncated || err.truncated };
      if (typeof r.exitCode !== "number") throw e2bError(r.failed, "run a command in the e2b sandbox", this.#secret);
      return { exitCode: r.exitCode, stdout: out.buffer(), stderr: err.buffer(), timedOut: false, truncated: out.truncated || err.truncated };
    } catch (e) {
      throw e2bError(e, "run a command in the e2b sandbox", this.#secret);
    } finally {
      if (timer) clearTimeout(timer);
      o.signal?.removeEventListener("abort", stop);
    }
  }

  #check(r: ExecResult, verb: string, rel: string): void {
    const e = shellFileError(r, verb, rel, "the e2b sandbox");
    if (e) throw e;
  }

}

/** Text chunks kept up to `max` bytes. */
class Capped {
  readonly #chunks: Buffer[] = [];
  length = 0;
  truncated = false;
  constructor(private readonly max: number) {}
  add(s: string): void {
    const b = Buffer.from(s);
    const room = this.max - this.length;
    if (b.length > room) this.truncated = true;
    if (room <= 0) return;
    const part = b.length > room ? b.subarray(0, room) : b;
    this.#chunks.push(part);
    this.length += part.length;
  }
  buffer(): Buffer {
    return Buffer.concat(this.#chunks, this.length);
  }
}

function splitOnce(s: string, sep: string): [string, string] {
  const i = s.indexOf(sep);
  return i < 0 ? [s, ""] : [s.slice(0, i), s.slice(i + 1)];
}

