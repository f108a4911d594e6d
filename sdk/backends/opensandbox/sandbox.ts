// Size: one handle over execd (commands, the file API) and the shared runner behind its HTTP gateway,
// plus the fallback for images without python3 and the keep-alive renewal every operation drives.
import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import type { Sandbox as OsbSandbox } from "@alibaba-group/opensandbox";
import { ClosedError, ConflictError, NotFoundError, PathEscapeError, UnavailableError, UnsupportedError } from "../../errors.js";
import { silentLogger, type Logger } from "../../logger.js";
import { checkRelativePath } from "../../paths.js";
import type { ExecOptions, ExecResult } from "../../sandbox.js";
import { DEFAULT_MAX_OUTPUT } from "../../util/process.js";
import { RunnerSupervisor, type RunnerLease } from "../../kit/runner/index.js";
import { RunnerSandbox, type PlainTransport } from "../../kit/runner-sandbox.js";
import { httpGatewayScript, startHttpRunner, type HttpRunnerEndpoint } from "../../kit/runner/http-channel.js";
import { nonRoot, shellPrelude, shQuote as q, ShellFiles, SHELL_SCRIPTS } from "../../kit/shell-files.js";
import { openSandboxError } from "./errors.js";

export const OPENSANDBOX_WORKDIR = "/workspace";
/** The port the runner's gateway listens on: the one the server publishes besides execd's. */
export const GATEWAY_PORT = 8080;
/** Where the gateway, its token and the runners live in the sandbox (0700). */
const GATEWAY_HOME = "/opt/agentws";
/** Markers our exec prelude prints before exiting when the cwd is unusable (never a program's output: the program has not started). */
const CWD_MISSING = "agentws: cwd is missing";
const CWD_ESCAPES = "agentws: cwd escapes the workspace";
/** The line our exec wrapper ends execd's stream with: whether the command's stdout and stderr files have bytes (1) or not (0). */
const SIZES = "agentws-exec-sizes";

export interface OpenSandboxSandboxOptions {
  persistent: boolean;
  /** Pushes the sandbox's expiry ahead; called at most every `renewEveryMs` while operations run. */
  renew?: () => Promise<void>;
  renewEveryMs?: number | undefined;
  logger?: Logger;
  /** The interpreter that runs the gateway and runner (tests point it at a missing one to exercise the fallback). */
  python?: string;
  /** A gateway start already under way (the driver starts it right after a create). */
  gateway?: Promise<GatewayStart>;
}

/** What starting the runner's gateway found: its endpoint, or a sandbox that cannot run it. */
export type GatewayStart = { mode: "runner"; endpoint: HttpRunnerEndpoint } | { mode: "plain" };

/**
 * Runs the gateway's start script through execd (it installs the gateway and runner and starts the
 * gateway unless one of this version runs; replicas share one) and learns its token and endpoint.
 */
export async function startGateway(sbx: OsbSandbox, python = "python3"): Promise<GatewayStart> {
  const script = httpGatewayScript({
    home: GATEWAY_HOME,
    port: GATEWAY_PORT,
    root: OPENSANDBOX_WORKDIR,
    python,
    stale: [{ pidFile: `${GATEWAY_HOME}/helper.pid`, names: `${GATEWAY_HOME}/helper.py` }],
  });
  let run: Awaited<ReturnType<OsbSandbox["commands"]["run"]>>;
  let endpoint: Awaited<ReturnType<OsbSandbox["getEndpoint"]>>;
  try {
    [run, endpoint] = await Promise.all([sbx.commands.run(script, { timeoutSeconds: 30 }), sbx.getEndpoint(GATEWAY_PORT)]);
  } catch (e) {
    throw openSandboxError(e, "start the sandbox runner's gateway");
  }
  const stderr = run.logs.stderr.map((m) => m.text).join("\n");
  if (run.exitCode === 127 && /agentws: no /.test(stderr)) return { mode: "plain" };
  const token = run.logs.stdout.map((m) => m.text.trim()).find((t) => /^[0-9a-f]{32}$/.test(t));
  if (run.exitCode !== 0 || !token)
    throw new UnavailableError(`opensandbox: could not start the sandbox runner's gateway (exit ${run.exitCode}): ${stderr.slice(0, 400)}`);
  return { mode: "runner", endpoint: { url: `${sbx.connectionConfig.protocol}://${endpoint.endpoint}`, headers: { ...endpoint.headers }, token } };
}

/**
 * A running OpenSandbox sandbox as a Sandbox. execd runs commands without stdin and delivers their
 * output as lines, so commands, files and spawned processes go through the shared runner
 * (sdk/kit/runner) behind its HTTP gateway (http-channel.ts): a small stdlib daemon on port
 * 8080 that the first handle starts through execd, reached through the sandbox's endpoint API with a
 * per-sandbox token, one runner per handle. Every path resolves descriptor-relative inside the sandbox.
 * An image without python3 falls back to execd: commands with their output through files read back by
 * the file API (byte-exact), files through the file API plus confining sh scripts; no stdio processes.
 */
export class OpenSandboxSandbox extends RunnerSandbox {
  readonly kind = "opensandbox";
  readonly workdir = OPENSANDBOX_WORKDIR;
  readonly persistent: boolean;
  readonly sbx: OsbSandbox;
  readonly #logger: Logger;
  readonly #renew: (() => Promise<void>) | undefined;
  readonly #renewEveryMs: number;
  readonly #python: string;
  #lastRenew = Date.now();
  #renewing: Promise<void> | undefined;
  #gateway: HttpRunnerEndpoint | undefined;
  #pre: Promise<GatewayStart> | undefined;
  readonly #runners: RunnerSupervisor;
  #closed = false;

  constructor(sbx: OsbSandbox, options: OpenSandboxSandboxOptions) {
    super();
    this.sbx = sbx;
    this.persistent = options.persistent;
    this.#logger = options.logger ?? silentLogger;
    this.#renew = options.renew;
    this.#renewEveryMs = options.renewEveryMs ?? Number.POSITIVE_INFINITY;
    this.#python = options.python ?? "python3";
    this.#pre = options.gateway;
    this.#runners = new RunnerSupervisor(() => startHttpRunner(this.#gateway!));
  }

  get sandboxId(): string {
    return this.sbx.id;
  }

  /** Starts (or finds) the runner's gateway and opens this handle's runner; without python3, says so once and falls back. */
  async start(): Promise<void> {
    if (!(await this.#startGateway())) return;
    await this.lease();
  }

  /** The gateway's start decides: a sandbox without python3 cannot run it. */
  protected probe(): Promise<boolean> {
    return this.#startGateway();
  }

  /** Runs as every operation starts: a closed handle refuses; the keep-alive is renewed when due. */
  protected override enter(): void {
    this.#open();
    this.#touch();
  }

  /** Without python3: execd for commands (output through files), the file API plus confining scripts; no stdio processes. */
  protected plain(): PlainTransport {
    const files = new ShellFiles({
      where: "the OpenSandbox sandbox",
      op: (name, args, stdin) =>
        this.#plainExec(["sh", "-c", shellPrelude(OPENSANDBOX_WORKDIR) + SHELL_SCRIPTS[name], "sh", ...args], stdin ? { stdin } : {}, ""),
      // An unguessable name in the sandbox's /tmp, through execd's upload; the publish script moves it in.
      stage: async (data) => {
        const src = `/tmp/.agentws-up-${randomBytes(16).toString("hex")}`;
        await this.#files("upload a file", () => this.sbx.files.writeFiles([{ path: src, data, mode: 600 }]));
        return src;
      },
      fetch: async (real, limit, rel) =>
        Buffer.from(await this.#files(`read '${rel}'`, () => this.sbx.files.readBytes(real, limit === undefined ? undefined : { offset: 0, limit }))),
    });
    return {
      exec: (argv, options) => this.#plainExec(argv, options, checkRelativePath(options.cwd ?? "", "cwd")),
      spawn: () => {
        throw new UnsupportedError("opensandbox: stdio processes (MCP servers) need python3 in the sandbox image; execd gives commands no stdin");
      },
      copyIn: (hostSource, to) => this.#plainCopyIn(hostSource, to),
      files,
    };
  }

  /** Starts (or finds) the gateway; false when the sandbox has no python3 (the handle then uses the fallback). */
  async #startGateway(): Promise<boolean> {
    this.#open();
    const pre = this.#pre;
    this.#pre = undefined;
    // A start begun by the driver that failed is tried again here, once.
    const g = await (pre ? pre.catch(() => startGateway(this.sbx, this.#python)) : startGateway(this.sbx, this.#python));
    if (g.mode === "plain") {
      if (this.runnerMode !== "plain") {
        this.#logger.warn(
          "opensandbox sandbox cannot run the sandbox runner (no python3); falling back to one execd call per command and file operation, without stdio processes",
          { sandboxId: this.sbx.id },
        );
        // The gateway's script would have made the workspace folder.
        await this.#plainExec(["mkdir", "-p", "--", OPENSANDBOX_WORKDIR], {}, "").catch(() => undefined);
      }
      this.decide("plain");
      return false;
    }
    this.#gateway = g.endpoint;
    this.decide("runner");
    return true;
  }

  /** The live runner for one call; when its gateway is gone (killed in the sandbox), the gateway is started again once. */
  protected async lease(): Promise<RunnerLease> {
    this.#open();
    this.#touch();
    if (this.runnerMode === "unknown") await this.#startGateway();
    let client = this.#runners.get();
    try {
      await client.ready;
    } catch (e) {
      if (this.#closed) throw new ClosedError("the OpenSandbox sandbox handle is closed");
      if (!(await this.#startGateway().catch(() => false))) throw e;
      client = this.#runners.get();
      await client.ready;
    }
    return { client };
  }

  /** Activity: renews the keep-alive when it is due (one renewal in flight at a time, failures logged). */
  #touch(): void {
    if (!this.#renew || this.#renewing || Date.now() - this.#lastRenew < this.#renewEveryMs) return;
    this.#lastRenew = Date.now();
    this.#renewing = this.#renew()
      .catch((e: unknown) => this.#logger.warn("renewing the sandbox keep-alive failed", { sandboxId: this.sbx.id, error: String((e as Error).message ?? e) }))
      .finally(() => (this.#renewing = undefined));
  }

  /** The fallback's exec: execd's stream for the exit code, the bytes through files read back by the file API. */
  async #plainExec(argv: string[], options: ExecOptions, rel: string): Promise<ExecResult> {
    const cwd = rel === "" ? OPENSANDBOX_WORKDIR : `${OPENSANDBOX_WORKDIR}/${rel}`;
    const base = `/tmp/.agentws-exec-${randomBytes(8).toString("hex")}`;
    const [inFile, outFile, errFile] = [`${base}.in`, `${base}.out`, `${base}.err`];
    if (options.stdin !== undefined)
      await this.#files("pass stdin", () => this.sbx.files.writeFiles([{ path: inFile, data: toBytes(options.stdin!), mode: 600 }]));
    const script = [
      `cd -P -- ${q(cwd)} 2>/dev/null || { echo ${q(CWD_MISSING)} >&2; exit 66; }`,
      `case "$(pwd -P)" in ${OPENSANDBOX_WORKDIR}|${OPENSANDBOX_WORKDIR}/*) ;; *) echo ${q(CWD_ESCAPES)} >&2; exit 65;; esac`,
      // Opened, then unlinked: the stdin file never outlives the command.
      options.stdin !== undefined ? `exec 0<${q(inFile)}; rm -f -- ${q(inFile)}` : "exec 0</dev/null",
      // execd turns a command's output into lines (newlines stripped): the bytes go to files, read
      // back through the file API; only the sizes travel on execd's stream (empty files are not fetched).
      `umask 077; exec 3>&1 1>${q(outFile)} 2>${q(errFile)}`,
      `${argv.map(q).join(" ")} 3>&-`,
      // Shell builtins only (no fork): 1 when the file has bytes; empty files are removed here.
      `c=$?; o=0; e=0; if [ -s ${q(outFile)} ]; then o=1; else rm -f -- ${q(outFile)}; fi; if [ -s ${q(errFile)} ]; then e=1; else rm -f -- ${q(errFile)}; fi`,
      `printf '\\n${SIZES} %s %s\\n' "$o" "$e" >&3; exit $c`,
    ].join("\n");
    const max = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    // Only our own prelude's refusals reach execd's stream (the program's output goes to the files).
    const prelude = new LineCollector(4096);
    let sizes: [number, number] | undefined;
    const controller = new AbortController();
    let commandId: string | undefined;
    const abort = () => {
      controller.abort();
      if (commandId) void this.sbx.commands.interrupt(commandId).catch(() => undefined);
    };
    if (options.signal?.aborted) abort();
    options.signal?.addEventListener("abort", abort, { once: true });
    let exitCode: number | null = null;
    let ename = "";
    try {
      const stream = this.sbx.commands.runStream(
        script,
        {
          ...(options.env ? { envs: options.env } : {}),
          ...(options.timeoutMs !== undefined && options.timeoutMs > 0 ? { timeoutSeconds: options.timeoutMs / 1000 } : {}),
        },
        controller.signal,
      );
      for await (const ev of stream) {
        const e = ev as { type?: string; text?: string; error?: { ename?: string; evalue?: string } };
        if (e.type === "init") commandId = e.text;
        else if (e.type === "stderr") prelude.line(e.text ?? "");
        else if (e.type === "stdout" && e.text?.startsWith(`${SIZES} `)) {
          const [o, r] = e.text
            .slice(SIZES.length + 1)
            .split(" ")
            .map(Number);
          if (Number.isSafeInteger(o) && Number.isSafeInteger(r)) sizes = [o!, r!];
        } else if (e.type === "execution_complete") exitCode = 0;
        else if (e.type === "error") {
          ename = String(e.error?.ename ?? "");
          const v = Number(String(e.error?.evalue ?? "").trim());
          exitCode = Number.isInteger(v) ? v : 1;
        }
      }
    } catch (e) {
      if (!controller.signal.aborted) {
        this.#discard([inFile, outFile, errFile]);
        throw openSandboxError(e, `run ${argv[0]}`);
      }
    } finally {
      options.signal?.removeEventListener("abort", abort);
    }
    const said = prelude.buffer().toString();
    if (exitCode === 65 && said === `${CWD_ESCAPES}\n`)
      throw new PathEscapeError(`path '${rel}' the working directory resolves outside the workspace`, { field: "cwd" });
    if (exitCode === 66 && said === `${CWD_MISSING}\n`) throw new NotFoundError(`working directory '${rel}' not found`, { field: "cwd" });
    // Which files have bytes, from the stream when the command ran to its end; otherwise (killed, timed out) whatever the files hold.
    const [stdout, stderr] = await Promise.all([this.#output(outFile, max, sizes?.[0] === 0), this.#output(errFile, max, sizes?.[1] === 0)]);
    if (!sizes || sizes[0] > 0 || sizes[1] > 0 || options.stdin !== undefined) this.#discard([inFile, outFile, errFile]);
    const timedOut = controller.signal.aborted || (exitCode === -1 && (options.timeoutMs !== undefined || /timeout/i.test(ename)));
    const truncated = stdout.truncated || stderr.truncated;
    if (timedOut)
      return { exitCode: -1, stdout: stdout.bytes, stderr: stderr.bytes.length ? stderr.bytes : Buffer.from("timed out"), timedOut: true, truncated };
    return { exitCode: exitCode ?? -1, stdout: stdout.bytes, stderr: stderr.bytes, timedOut: false, truncated };
  }

  /** A command's output file, its first `max` bytes through the file API; missing (the command never started) or known empty is empty. */
  async #output(file: string, max: number, empty: boolean): Promise<{ bytes: Buffer; truncated: boolean }> {
    if (empty) return { bytes: Buffer.alloc(0), truncated: false };
    const got = await this.sbx.files.readBytes(file, { offset: 0, limit: max + 1 }).then(
      (b) => Buffer.from(b),
      () => Buffer.alloc(0),
    );
    return { bytes: got.length > max ? got.subarray(0, max) : got, truncated: got.length > max };
  }

  #discard(files: string[]): void {
    void this.sbx.files.deleteFiles(files).catch(() => undefined);
  }

  /** Without python3: a host file or tree (symlinks skipped) file by file into a temp folder renamed into place. */
  async #plainCopyIn(hostSource: string, to: string): Promise<void> {
    const clean = nonRoot(checkRelativePath(to, "to"));
    if (await this.stat(clean)) throw new ConflictError(`${clean} already exists`, { field: "path" });
    const st = await fs.lstat(hostSource).catch((e: unknown) => {
      throw new NotFoundError(`host path '${hostSource}' not found`, { cause: e, field: "hostPath" });
    });
    const tmp = path.posix.join(path.posix.dirname(clean) === "." ? "" : path.posix.dirname(clean), `.agentws-copy-${randomBytes(6).toString("hex")}`);
    const walk = async (src: string, dst: string, s: Awaited<ReturnType<typeof fs.lstat>>): Promise<void> => {
      if (s.isDirectory()) {
        await this.mkdir(dst);
        for (const child of (await fs.readdir(src)).sort()) await walk(path.join(src, child), `${dst}/${child}`, await fs.lstat(path.join(src, child)));
      } else if (s.isFile()) await this.writeFile(dst, await fs.readFile(src), { mode: Number(s.mode) & 0o777 });
    };
    try {
      await walk(hostSource, tmp, st);
      await this.rename(tmp, clean);
    } catch (e) {
      await this.remove(tmp).catch(() => undefined);
      throw e;
    }
  }

  /** Ends this handle's runner (and with it every process spawned through it) and releases the SDK's HTTP agent (not the sandbox). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.race([this.#runners.stop(), sleep(5000)]);
    await this.sbx.close().catch(() => undefined);
  }

  #open(): void {
    if (this.#closed) throw new ClosedError("the OpenSandbox sandbox handle is closed");
  }

  async #files<T>(what: string, fn: () => Promise<T>): Promise<T> {
    this.#touch();
    try {
      return await fn();
    } catch (e) {
      throw openSandboxError(e, what);
    }
  }
}

/** Lines as execd's stream sends them ("\n" stands for an empty line), joined back with newlines, capped. */
class LineCollector {
  readonly #chunks: Buffer[] = [];
  #len = 0;
  truncated = false;
  constructor(readonly max: number) {}
  line(text: string): void {
    const b = Buffer.from(`${text === "\n" ? "" : text}\n`);
    const room = this.max - this.#len;
    if (b.length > room) this.truncated = true;
    if (room <= 0) return;
    const part = b.length > room ? b.subarray(0, room) : b;
    this.#chunks.push(part);
    this.#len += part.length;
  }
  buffer(): Buffer {
    return Buffer.concat(this.#chunks, this.#len);
  }
}

function toBytes(data: Uint8Array | string): Uint8Array {
  return typeof data === "string" ? Buffer.from(data) : data;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
