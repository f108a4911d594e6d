// The E2B fallback for sandboxes without python3 (no runner): one E2B command per exec, files-API
// transfers to a private staging folder plus confined scripts (scripts.ts), one background command per process.
import { randomBytes } from "node:crypto";
import { PassThrough, Writable } from "node:stream";
import type { Sandbox as E2BSdkSandbox, CommandHandle } from "e2b";
import { ConflictError, NotFoundError, PathEscapeError, TooLargeError, InvalidArgumentError, ExecFailedError } from "../../errors.js";
import { checkRelativePath } from "../../paths.js";
import type { ExecOptions, ExecResult, SandboxProcess, SpawnOptions } from "../../sandbox.js";
import { DEFAULT_MAX_OUTPUT } from "../../util/process.js";
import type { PlainFiles, PlainTransport } from "../../kit/runner-sandbox.js";
import { nonRoot, packArchive, ScriptFiles } from "../../kit/shell-files.js";
import { e2bError } from "./client.js";
import { E2B_STAGING, E2B_WORKDIR, commandIn, quote, scriptCommand, type SCRIPTS } from "./scripts.js";

/** Bound on a file read through the files API when the caller gave none. */
const MAX_READ = 1024 ** 3;

/** One E2B command per exec and file operation, in a sandbox that cannot run the runner. */
export class E2BPlain extends ScriptFiles implements PlainTransport, PlainFiles {
  readonly files: PlainFiles = this;
  protected readonly where = "the e2b sandbox";
  readonly #live = new Set<CommandHandle>();
  #plainReady: Promise<void> | undefined;

  constructor(
    private readonly sbx: E2BSdkSandbox,
    private readonly touch: () => void,
    private readonly secret: string | undefined,
  ) {
    super();
  }

  readFile(rel: string, options: { maxBytes?: number } = {}): Promise<Buffer> {
    return this.#plainReadFile(rel, options);
  }

  async writeFile(rel: string, data: Uint8Array | string, options: { mode?: number; exclusive?: boolean } = {}): Promise<void> {
    const clean = nonRoot(checkRelativePath(rel));
    const staged = await this.#stage(data, clean);
    const mode = options.mode === undefined ? "-" : (options.mode & 0o7777).toString(8);
    this.check(await this.#op("place", [clean, staged, mode, options.exclusive ? "x" : "-"]), "write", clean);
  }

  async appendFile(rel: string, data: Uint8Array | string): Promise<void> {
    const clean = nonRoot(checkRelativePath(rel));
    const staged = await this.#stage(data, clean);
    this.check(await this.#op("append", [clean, staged]), "append to", clean);
  }

  /** Through the runner, file by file; without python3, one tar uploaded and unpacked into place in one script. */
  async copyIn(hostSource: string, to: string): Promise<void> {
    const clean = nonRoot(checkRelativePath(to, "to"));
    const name = `c${randomBytes(6).toString("hex")}`;
    const staged = await this.#stage(await packArchive(hostSource, name), clean);
    const r = await this.#op("unpack", [clean, staged, name]);
    if (r.exitCode === 69) throw new ConflictError(`${clean} already exists`, { field: "path" });
    this.check(r, "copy into", clean);
  }

  protected script(name: "list" | "stat" | "remove" | "mkdir" | "rename", args: string[]): Promise<ExecResult> {
    return this.#op(name, args);
  }

  /** Kills what this transport spawned. */
  async close(): Promise<void> {
    await Promise.all([...this.#live].map((h) => h.kill().catch(() => false)));
    this.#live.clear();
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

  async exec(argv: string[], options: ExecOptions): Promise<ExecResult> {
    const cwd = checkRelativePath(options.cwd ?? "", "cwd");
    await this.#plainSetup();
    const r = await this.#command(commandIn(argv, cwd), options);
    if (r.exitCode === 213) {
      const why = r.stderr.toString();
      if (why.includes("agentws:cwd-escape"))
        throw new PathEscapeError(`path '${cwd}' (cwd) resolves outside the workspace (through a symlink)`, { field: "cwd" });
      if (why.includes("agentws:cwd-missing")) throw new NotFoundError(`working directory '${cwd}' not found`, { field: "cwd" });
      if (why.includes("agentws:cwd-notdir"))
        throw new InvalidArgumentError(`working directory '${cwd}' is not a directory`, { field: "cwd", fieldPrefix: false });
    }
    return r;
  }

  /** One background E2B command with stdin per process (sandboxes without python3). */
  spawn(argv: string[], cwd: string, options: SpawnOptions): SandboxProcess {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let handle: CommandHandle | undefined;
    let killed = false;
    // Each sendStdin is one unary call: chained so chunks arrive in order.
    let sending: Promise<unknown> = Promise.resolve();
    const started = this.#plainSetup().then(() =>
      this.sbx.commands.run(commandIn(argv, cwd), {
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
          this.touch();
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
        stderr.write(`spawn failed: ${String((e2bError(e, "spawn", this.secret) as Error).message)}\n`);
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
    this.check(r, "read", clean);
    const [size, resolved] = splitOnce(r.stdout.toString(), "\t");
    if (Number(size) > MAX_READ) throw new TooLargeError(`${clean} is ${size} bytes, over the ${MAX_READ}-byte read limit`, { field: "path" });
    const bytes = await this.#call("read", clean, () => this.sbx.files.read(resolved, { format: "bytes" }));
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
    await this.#call("write", rel, () => this.sbx.files.write(staged, body.buffer));
    return staged;
  }

  async #op(name: keyof typeof SCRIPTS, args: string[]): Promise<ExecResult> {
    await this.#plainSetup();
    return this.#command(scriptCommand(name, args), {});
  }

  async #call<T>(verb: string, rel: string, fn: () => Promise<T>): Promise<T> {
    this.touch();
    try {
      return await fn();
    } catch (e) {
      throw e2bError(e, `${verb} '${rel}' in the e2b sandbox`, this.secret);
    }
  }

  /** One E2B command with stdin, a timeout and capped output; non-zero exits are results, not errors. */
  async #command(cmd: string, o: ExecOptions): Promise<ExecResult> {
    this.touch();
    const max = o.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    const out = new Capped(max);
    const err = new Capped(max);
    const hasStdin = o.stdin !== undefined;
    let handle: CommandHandle;
    try {
      handle = await this.sbx.commands.run(cmd, {
        background: true,
        stdin: hasStdin,
        timeoutMs: 0,
        envs: o.env ?? {},
        onStdout: (s) => out.add(s),
        onStderr: (s) => err.add(s),
      });
    } catch (e) {
      throw e2bError(e, "run a command in the e2b sandbox", this.secret);
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
      if (timedOut)
        return {
          exitCode: -1,
          stdout: out.buffer(),
          stderr: err.length ? err.buffer() : Buffer.from("timed out"),
          timedOut: true,
          truncated: out.truncated || err.truncated,
        };
      if (typeof r.exitCode !== "number") throw e2bError(r.failed, "run a command in the e2b sandbox", this.secret);
      return { exitCode: r.exitCode, stdout: out.buffer(), stderr: err.buffer(), timedOut: false, truncated: out.truncated || err.truncated };
    } catch (e) {
      throw e2bError(e, "run a command in the e2b sandbox", this.secret);
    } finally {
      if (timer) clearTimeout(timer);
      o.signal?.removeEventListener("abort", stop);
    }
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
