// Size: the whole Sandbox contract over Daytona's toolbox: the runner path, plus the fallback for sandboxes without python3 (exec wrapper, file API plus confining scripts, sessions for spawn).
import { randomBytes } from "node:crypto";
import { PassThrough, Writable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import type { Sandbox as DaytonaSdkSandbox } from "@daytonaio/sdk";
import { ClosedError, ConflictError, NotFoundError, PathEscapeError, TooLargeError, UnavailableError, WorkspaceError } from "../../errors.js";
import { InvalidArgumentError, ExecFailedError } from "../../errors.js";
import type { ExecOptions, ExecResult, SandboxProcess, SpawnOptions } from "../../sandbox.js";
import { checkRelativePath } from "../../paths.js";
import { DEFAULT_MAX_OUTPUT } from "../../util/process.js";
import { silentLogger, type Logger } from "../../logger.js";
import { RunnerSupervisor, type RunnerLease } from "../../kit/runner/index.js";
import { RunnerSandbox, type PlainTransport } from "../../kit/runner-sandbox.js";
import { daytonaError, daytonaFailure } from "./errors.js";
import { startDaytonaRunner, type DaytonaRunnerTransport } from "./runner.js";
import { toolboxFiles } from "./transfer.js";
import { nonRoot, packArchive, shellFileError, ShellFiles } from "../../kit/shell-files.js";
import { EXEC_WRAPPER, EXIT, SCRIPTS, prelude, q, shLine } from "./scripts.js";

/** Stdin up to this size travels inside the command (base64); more goes through the file API first. */
const INLINE_STDIN = 48 * 1024;
/** Seconds a file transfer may take. */
const TRANSFER_TIMEOUT_S = 600;
/** The most a read through the exec wrapper (non-ASCII paths) carries without a caller's cap. */
const MAX_EXEC_READ = 256 * 1024 * 1024;
/** How long a new runner may take to say hello before the sandbox is taken as unable to run one. */
const READY_TIMEOUT_MS = 60_000;

export interface DaytonaSandboxOptions {
  /** Told once when the sandbox cannot run the runner (no python3) and falls back to one toolbox call per operation. */
  logger?: Logger | undefined;
  /** The interpreter that runs the runner (tests point it at a missing one to exercise the fallback). */
  python?: string | undefined;
}

/**
 * A started Daytona sandbox as a Sandbox. Commands, spawned processes and every file operation go
 * through one long-lived runner per handle (sdk/kit/runner), a session command with
 * streamed input and logs (./runner.ts): every path is resolved descriptor-relative inside the
 * sandbox. A sandbox without python3 falls back to the toolbox's `process/execute` inside a wrapper
 * that keeps stdout, stderr and the exit code apart, the file API (exact bytes) with a confining
 * script per path, and a session command per spawned process.
 */
export class DaytonaSandbox extends RunnerSandbox {
  readonly kind = "daytona";
  readonly persistent = true;
  readonly workdir: string;
  readonly #sb: DaytonaSdkSandbox;
  readonly #spawned = new Set<SandboxProcess>();
  readonly #logger: Logger;
  readonly #runners: RunnerSupervisor;
  /** The runner started last: a new runner deletes its session if it ended, so no old one lingers. */
  #last: DaytonaRunnerTransport | undefined;
  /** Bumped when the live runner's log is spent: the supervisor then starts a fresh one. */
  #generation = 0;
  #closed = false;

  constructor(sb: DaytonaSdkSandbox, workdir: string, options: DaytonaSandboxOptions = {}) {
    super();
    this.#sb = sb;
    this.workdir = workdir;
    this.#logger = options.logger ?? silentLogger;
    const python = options.python ?? "python3";
    // Big files cross the toolbox's file routes at the runner's descriptors; said once if that fails.
    let warned = false;
    const remote = toolboxFiles(sb, TRANSFER_TIMEOUT_S, (e) => {
      if (warned) return;
      warned = true;
      this.#logger.warn("daytona toolbox could not transfer a file at the sandbox runner's descriptor; big files go through the runner's session instead", {
        sandboxId: this.#sb.id,
        error: daytonaFailure(e).message,
      });
    });
    this.#runners = new RunnerSupervisor(() => {
      // One that ended (its stream closed) is deleted again in case it lives on; a retired one (its log
      // spent) is left to finish its calls, then stopped by the supervisor.
      const old = this.#last;
      if (old?.ended()) void this.#sb.process.deleteSession(old.session).catch(() => undefined);
      const t = startDaytonaRunner(this.#sb, this.workdir, python, remote);
      this.#last = t;
      return t;
    });
  }

  get sandboxId(): string {
    return this.#sb.id;
  }

  /** The session the live runner runs in (for tests), undefined when none is live. */
  get runnerSession(): string | undefined {
    return (this.#runners.current?.transport as DaytonaRunnerTransport | undefined)?.session;
  }

  /** A command with an empty argv is refused (the toolbox has no shell's 127 for it). */
  protected override emptyCommand(): ExecResult {
    throw new InvalidArgumentError("must not be empty", { field: "argv" });
  }

  /** Runs as every operation starts: a closed handle refuses. */
  protected override enter(): void {
    this.#open();
  }

  /** Without python3: the toolbox's process/execute in a wrapper, the file API plus confining scripts, a session per process. */
  protected plain(): PlainTransport {
    const files = new ShellFiles({
      where: "the Daytona sandbox",
      op: (name, args, stdin) => this.#op(name, args, stdin ? Buffer.from(stdin) : undefined),
      stage: async (data) => {
        const upload = `/tmp/.agentws-up-${randomBytes(8).toString("hex")}`;
        await this.#upload(Buffer.from(data), upload);
        return upload;
      },
      fetch: (real, limit, rel) => this.#download(real, limit, rel),
    });
    return {
      exec: (argv, options) => this.#plainExec(argv, options),
      spawn: (argv, _cwd, options) => this.#plainSpawn(argv, options),
      copyIn: (hostPath, to) => this.#plainCopyIn(hostPath, to),
      files,
    };
  }

  /** The toolbox's process/execute inside a wrapper that keeps stdout, stderr and the exit code apart. */
  async #plainExec(argv: string[], options: ExecOptions): Promise<ExecResult> {
    const cwd = checkRelativePath(options.cwd ?? "", "cwd");
    const cap = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    const marker = randomBytes(8).toString("hex");
    const stdin = options.stdin === undefined ? undefined : Buffer.from(options.stdin);
    let stdinFile = "-";
    let inline = "";
    if (stdin && stdin.length > INLINE_STDIN) {
      stdinFile = `/tmp/.agentws-in-${marker}`;
      await this.#upload(stdin, stdinFile);
    } else if (stdin && stdin.length > 0) {
      stdinFile = `/tmp/.agentws-in-${marker}`;
      inline = `printf %s ${q(stdin.toString("base64"))} | base64 -d > ${q(stdinFile)} || exit 1\n`;
    }
    const envArgv = Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`);
    const full = envArgv.length ? ["env", "--", ...envArgv, ...argv] : argv;
    const timeoutS = options.timeoutMs !== undefined ? Math.max(1, Math.ceil(options.timeoutMs / 1000)) : undefined;
    const script = `W=${q(this.workdir)}\n${inline}${EXEC_WRAPPER}`;
    const line = shLine(script, [cwd, stdinFile, String(cap), timeoutS === undefined ? "-" : String(timeoutS), marker, ...full]);
    const onAbort = () => void this.#kill(marker);
    options.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      if (options.signal?.aborted) throw new ExecFailedError("exec aborted before it started");
      const r = await this.#execute(line, timeoutS === undefined ? undefined : timeoutS + 30, `exec ${argv[0]}`);
      return parseWrapped(r, cap, timeoutS !== undefined, cwd);
    } finally {
      options.signal?.removeEventListener("abort", onAbort);
    }
  }

  /**
   * Through the runner: the process's stdio streams over the runner's session (no session of its own),
   * its cwd resolved inside the sandbox; it dies with the runner at close(). Without python3, a session
   * command of its own.
   */
  /** Through the runner (see RunnerSandbox.spawn); every process is tracked, so close() ends it. */
  override spawn(argv: string[], options: SpawnOptions = {}): SandboxProcess {
    this.#open();
    const proc = super.spawn(argv, options);
    this.#spawned.add(proc);
    void proc.exited.finally(() => this.#spawned.delete(proc));
    return proc;
  }

  #plainSpawn(argv: string[], options: SpawnOptions): SandboxProcess {
    this.#open();
    return new SessionProcess(this.#sb, this.#spawnLine(argv, options));
  }

  /** A host file or tree as one tar uploaded and unpacked into place by one script. */
  async #plainCopyIn(hostPath: string, to: string): Promise<void> {
    const clean = nonRoot(checkRelativePath(to, "to"));
    const archive = await packArchive(hostPath, "x");
    const upload = `/tmp/.agentws-tar-${randomBytes(8).toString("hex")}`;
    await this.#upload(archive, upload);
    const r = await this.#op("unpack", [clean, upload]);
    if (r.exitCode === EXIT.exists) throw new ConflictError(`${clean} already exists`, { field: "path" });
    this.#check(r, "copy into", clean);
  }

  /** Ends the runner (and with it every process spawned through it) and any fallback session. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const p of this.#spawned) p.kill();
    await Promise.all([this.#runners.stop(), ...[...this.#spawned].map((p) => p.exited.catch(() => null))]);
  }

  protected async probe(): Promise<boolean> {
    const client = this.#runners.get(String(this.#generation));
    const transport = client.transport as DaytonaRunnerTransport;
    let timer: NodeJS.Timeout | undefined;
    const hung = new Promise<"hung">((resolve) => {
      timer = setTimeout(() => resolve("hung"), READY_TIMEOUT_MS);
      timer.unref();
    });
    try {
      const r = await Promise.race([client.ready, hung]);
      if (r !== "hung") return true;
      void client.stop();
    } catch {
      // The toolbox refused the session (stopped, gone sandbox): an error now, another try next call.
      const api = transport.apiError();
      if (api) throw this.#map(api, "start the sandbox runner");
    } finally {
      clearTimeout(timer);
    }
    if (this.#closed) throw new ClosedError("the Daytona sandbox handle is closed");
    const code = await transport.exitCode();
    // The runner's start would have made the workspace folder.
    await this.#execute(shLine('mkdir -p -- "$1"', [this.workdir]), undefined, "make the workspace folder");
    this.#logger.warn("daytona sandbox cannot run the sandbox runner (no python3?); falling back to one toolbox call per command and file operation", {
      sandboxId: this.#sb.id,
      exitCode: code,
    });
    return false;
  }

  /** The live runner for one call (a fresh one when the last died or its log is spent). */
  protected async lease(): Promise<RunnerLease> {
    this.#open();
    const live = this.#runners.current;
    if (live && (live.transport as DaytonaRunnerTransport).spent()) this.#generation++;
    const client = this.#runners.get(String(this.#generation));
    try {
      // Settled at once for a live runner; for a fresh one, the toolbox's refusal (a stopped or gone
      // sandbox) becomes its clear error rather than a "runner stopped".
      await client.ready;
    } catch (e) {
      const api = (client.transport as DaytonaRunnerTransport).apiError();
      throw api ? this.#map(api, "start the sandbox runner") : e;
    }
    return { client };
  }

  #open(): void {
    if (this.#closed) throw new ClosedError("the Daytona sandbox handle is closed");
  }

  #spawnLine(argv: string[], options: SpawnOptions): string {
    const cwd = checkRelativePath(options.cwd ?? "", "cwd");
    const env = Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`);
    const script = `W=${q(this.workdir)}
c=$(realpath -m -- "$W/$1"); case "$c" in "$W"|"$W"/*) ;; *) echo "cwd leaves the workspace" >&2; exit 65;; esac
shift; cd -- "$c" || exit 66
exec "$@"`;
    return shLine(script, [cwd, ...(env.length ? ["env", "--", ...env] : []), ...argv]);
  }

  /** A file the fallback's script resolved, at most `limit` bytes: through the toolbox, else (a path the SDK mangles) through exec. */
  async #download(real: string, limit: number | undefined, rel: string): Promise<Buffer> {
    // The SDK parses the download's part headers as latin1: a path beyond printable ASCII would not
    // match its own request, so those bytes come through the exec wrapper (base64, exact) instead.
    if (!/^[\x20-\x7e]*$/.test(real)) {
      const viaExec = await this.exec(["cat", "--", real], { maxOutputBytes: limit ?? MAX_EXEC_READ });
      if (viaExec.exitCode !== 0) throw new ExecFailedError(`read ${rel} failed: ${viaExec.stderr.toString().slice(0, 300)}`, { field: "path" });
      if (viaExec.truncated && limit === undefined)
        throw new TooLargeError(`${rel} is over the ${MAX_EXEC_READ}-byte limit of a read through exec`, { field: "path" });
      return viaExec.stdout;
    }
    try {
      return await this.#sb.fs.downloadFile(real, TRANSFER_TIMEOUT_S);
    } catch (e) {
      if (daytonaFailure(e).statusCode === 404 || /not found|no such file/i.test(daytonaFailure(e).message))
        throw new NotFoundError(`${rel} not found`, { field: "path" });
      throw this.#map(e, `read ${rel}`);
    }
  }

  async #upload(data: Buffer, dest: string): Promise<void> {
    this.#open();
    try {
      await this.#sb.fs.uploadFile(data, dest, TRANSFER_TIMEOUT_S);
    } catch (e) {
      throw this.#map(e, "upload a file");
    }
  }

  async #execute(line: string, timeoutS: number | undefined, what: string): Promise<string> {
    this.#open();
    try {
      const r = await this.#sb.process.executeCommand(line, undefined, undefined, timeoutS);
      return r.result ?? "";
    } catch (e) {
      throw this.#map(e, what);
    }
  }

  /** One confined file script, run through the exec wrapper (its output stays byte-exact). */
  #op(name: keyof typeof SCRIPTS, args: string[], stdin?: Buffer): Promise<ExecResult> {
    return this.exec(["sh", "-c", prelude(this.workdir) + SCRIPTS[name], "sh", ...args], stdin ? { stdin } : {});
  }

  async #kill(marker: string): Promise<void> {
    await this.#sb.process.executeCommand(shLine(SCRIPTS.kill, [marker])).catch(() => undefined);
  }

  #check(r: ExecResult, verb: string, rel: string): void {
    const e = shellFileError(r, verb, rel, "the Daytona sandbox");
    if (e) throw e;
  }

  /** Toolbox failures: a sandbox that is not started (stopped, gone) is `unavailable`, so the workspace resumes it. */
  #map(e: unknown, what: string): WorkspaceError {
    const f = daytonaFailure(e);
    if (f.statusCode === 409 || f.statusCode === 502 || f.statusCode === 503 || (f.statusCode === 404 && !/file|path|director/i.test(f.message)))
      return new UnavailableError(`${what}: the Daytona sandbox is not running (${f.statusCode}); initialize the workspace to start it`, {
        details: { statusCode: f.statusCode },
      });
    return daytonaError(e, what);
  }
}

/** A session command as a process: stdin through `sendSessionCommandInput`, stdout and stderr from the followed logs. */
class SessionProcess implements SandboxProcess {
  readonly stdin: Writable;
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  readonly exited: Promise<number | null>;
  readonly #sb: DaytonaSdkSandbox;
  readonly #session = `agentws-${randomBytes(8).toString("hex")}`;
  readonly #started: Promise<string>;
  #killed = false;

  constructor(sb: DaytonaSdkSandbox, line: string) {
    this.#sb = sb;
    const p = sb.process;
    const session = this.#session;
    const started = (async () => {
      await p.createSession(session);
      const { cmdId } = await p.executeSessionCommand(session, { command: line, runAsync: true, suppressInputEcho: true });
      if (!cmdId) throw new ExecFailedError("the toolbox gave no command id");
      return cmdId;
    })();
    started.catch(() => undefined);
    this.#started = started;
    const decoder = new StringDecoder("utf8");
    this.stdin = new Writable({
      write: (chunk: Buffer, _enc, done) => {
        const text = decoder.write(chunk);
        if (!text) return done();
        started
          .then((cmd) => p.sendSessionCommandInput(session, cmd, text))
          .then(
            () => done(),
            (e: unknown) => done(new UnavailableError(`stdin of a Daytona session command: ${daytonaFailure(e).message}`)),
          );
      },
    });
    this.stdin.on("error", () => undefined);
    this.exited = (async () => {
      let cmd: string;
      try {
        cmd = await started;
      } catch (e) {
        this.stderr.end(`could not start the command in a Daytona session: ${daytonaFailure(e).message}\n`);
        this.stdout.end();
        return 127;
      }
      await p
        .getSessionCommandLogs(
          session,
          cmd,
          (s) => void this.stdout.write(s),
          (s) => void this.stderr.write(s),
        )
        .catch(() => undefined);
      const code = this.#killed
        ? null
        : await p.getSessionCommand(session, cmd).then(
            (c) => c.exitCode ?? null,
            () => null,
          );
      this.stdout.end();
      this.stderr.end();
      if (!this.#killed) await p.deleteSession(session).catch(() => undefined);
      return code;
    })();
  }

  kill(): void {
    if (this.#killed) return;
    this.#killed = true;
    void this.#started.then(
      () => this.#sb.process.deleteSession(this.#session).catch(() => undefined),
      () => undefined,
    );
  }
}

function parseWrapped(out: string, cap: number, timed: boolean, cwd: string): ExecResult {
  const at = out.lastIndexOf("AGENTWS-RESULT ");
  if (at < 0) throw new ExecFailedError(`the sandbox gave no result for the command: ${out.slice(0, 300)}`);
  const lines = out.slice(at).split("\n");
  const head = (lines[0] ?? "").split(" ");
  if (head[1] === "escape") throw new PathEscapeError(`path '${cwd}' (cwd) resolves outside the workspace`, { field: "cwd" });
  if (head[1] === "nocwd") throw new NotFoundError(`cwd '${cwd}' not found`, { field: "cwd" });
  const rc = Number(head[1]);
  const stdout = Buffer.from(lines[1] ?? "", "base64");
  const stderr = Buffer.from(lines[2] ?? "", "base64");
  const timedOut = timed && (rc === 124 || rc === 137);
  const truncated = stdout.length > cap || stderr.length > cap;
  return { exitCode: timedOut ? -1 : rc, stdout: stdout.subarray(0, cap), stderr: stderr.subarray(0, cap), timedOut, truncated };
}
