// Size: one handle over two in-sandbox services (execd for commands and file bytes, our helper for
// spawn and confined file metadata), plus the keep-alive renewal every operation drives.
import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import { PassThrough, Writable } from "node:stream";
import type { Sandbox as OsbSandbox } from "@alibaba-group/opensandbox";
import { ConflictError, NotFoundError, PathEscapeError, TooLargeError, UnavailableError, WorkspaceError } from "../../errors.js";
import { silentLogger, type Logger } from "../../logger.js";
import { checkRelativePath } from "../../paths.js";
import type { DirEntry, ExecOptions, ExecResult, FileInfo, Sandbox, SandboxProcess, SpawnOptions } from "../../sandbox.js";
import { DEFAULT_MAX_OUTPUT } from "../../util/process.js";
import { openSandboxError } from "./errors.js";
import { HELPER_PATH, HELPER_PORT, HELPER_SOURCE, HELPER_TOKEN_PATH, HELPER_VERSION } from "./helper-source.js";

export const OPENSANDBOX_WORKDIR = "/workspace";
/** Markers our exec prelude prints before exiting when the cwd is unusable (never a program's output: the program has not started). */
const CWD_MISSING = "agentws: cwd is missing";
const CWD_ESCAPES = "agentws: cwd escapes the workspace";
/** The line our exec wrapper ends execd's stream with: whether the command's stdout and stderr files have bytes (1) or not (0). */
const SIZES = "agentws-exec-sizes";
/** Reads up to this size are fetched alongside their confinement check (one round trip instead of two). */
const OPTIMISTIC_READ = 1024 * 1024;
/** Largest helper answer we parse (a directory listing of 100 000 entries fits). */
const MAX_HELPER_ANSWER = 32 * 1024 * 1024;

export interface OpenSandboxSandboxOptions {
  persistent: boolean;
  /** Pushes the sandbox's expiry ahead; called at most every `renewEveryMs` while operations run. */
  renew?: () => Promise<void>;
  renewEveryMs?: number | undefined;
  logger?: Logger;
}

/** Starts the helper once per sandbox, under a lock: concurrent connects from several replicas share one. */
const START_HELPER = `set -e
mkdir -p /opt/agentws; chmod 700 /opt/agentws
exec 9>/opt/agentws/lock; flock 9 2>/dev/null || true
if [ -s ${HELPER_TOKEN_PATH} ] && [ -f /opt/agentws/helper.pid ] && kill -0 "$(cat /opt/agentws/helper.pid)" 2>/dev/null && [ "$(cat /opt/agentws/helper.version 2>/dev/null)" = "${HELPER_VERSION}" ]; then exit 0; fi
[ -f /opt/agentws/helper.pid ] && kill "$(cat /opt/agentws/helper.pid)" 2>/dev/null || true
umask 077
od -An -N16 -tx1 /dev/urandom | tr -d ' \\n' > ${HELPER_TOKEN_PATH}.new && mv ${HELPER_TOKEN_PATH}.new ${HELPER_TOKEN_PATH}
mkdir -p ${OPENSANDBOX_WORKDIR}
nohup python3 ${HELPER_PATH} ${HELPER_PORT} </dev/null >/tmp/agentws-helper.log 2>&1 9>&- &
echo $! > /opt/agentws/helper.pid
echo ${HELPER_VERSION} > /opt/agentws/helper.version`;

/**
 * A running OpenSandbox sandbox as a Sandbox. Commands run through execd (`commands.run`), whose
 * stream delivers output as lines with the newline stripped; so exec sends the command's stdout
 * and stderr to files and reads them back through the file API, byte for byte (stdin likewise
 * goes up as a file). File bytes go through execd's upload and download, exactly; file metadata
 * and spawned processes go through the in-sandbox helper (see helper-source.ts).
 */
export class OpenSandboxSandbox implements Sandbox {
  readonly kind = "opensandbox";
  readonly workdir = OPENSANDBOX_WORKDIR;
  readonly persistent: boolean;
  readonly sbx: OsbSandbox;
  readonly #logger: Logger;
  readonly #renew: (() => Promise<void>) | undefined;
  readonly #renewEveryMs: number;
  #lastRenew = Date.now();
  #renewing: Promise<void> | undefined;
  #helper: { url: string; headers: Record<string, string> } | undefined;
  readonly #live = new Set<SandboxProcess>();
  #closed = false;

  constructor(sbx: OsbSandbox, options: OpenSandboxSandboxOptions) {
    this.sbx = sbx;
    this.persistent = options.persistent;
    this.#logger = options.logger ?? silentLogger;
    this.#renew = options.renew;
    this.#renewEveryMs = options.renewEveryMs ?? Number.POSITIVE_INFINITY;
  }

  get sandboxId(): string {
    return this.sbx.id;
  }

  /** Makes sure /workspace and the helper are there (uploaded through the file API, started once per sandbox). */
  async start(): Promise<void> {
    try {
      await this.sbx.files.writeFiles([{ path: HELPER_PATH, data: HELPER_SOURCE, mode: 700 }]);
      const r = await this.sbx.commands.run(START_HELPER, { timeoutSeconds: 30 });
      if (r.exitCode !== 0) throw new UnavailableError(`opensandbox: could not start the in-sandbox helper (exit ${r.exitCode}): ${r.logs.stderr.map((m) => m.text).join("\n").slice(0, 400)}`);
      const token = new TextDecoder().decode(await this.sbx.files.readBytes(HELPER_TOKEN_PATH)).trim();
      const ep = await this.sbx.getEndpoint(HELPER_PORT);
      this.#helper = { url: `${this.sbx.connectionConfig.protocol}://${ep.endpoint}`, headers: { ...ep.headers, "x-agentws-token": token } };
    } catch (e) {
      throw openSandboxError(e, "prepare the sandbox (helper)");
    }
    for (let i = 0; ; i++) {
      const ok = await fetch(`${this.#helper.url}/ping`, { headers: this.#helper.headers, signal: AbortSignal.timeout(2000) }).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return;
      if (i >= 100) throw new UnavailableError("opensandbox: the in-sandbox helper did not answer (does the image have python3?); see /tmp/agentws-helper.log in the sandbox");
      await sleep(50);
    }
  }

  /** Activity: renews the keep-alive when it is due (one renewal in flight at a time, failures logged). */
  #touch(): void {
    if (!this.#renew || this.#renewing || Date.now() - this.#lastRenew < this.#renewEveryMs) return;
    this.#lastRenew = Date.now();
    this.#renewing = this.#renew()
      .catch((e: unknown) => this.#logger.warn("renewing the sandbox keep-alive failed", { sandboxId: this.sbx.id, error: String((e as Error).message ?? e) }))
      .finally(() => (this.#renewing = undefined));
  }

  async exec(argv: string[], options: ExecOptions = {}): Promise<ExecResult> {
    if (argv.length === 0) return { exitCode: 127, stdout: Buffer.alloc(0), stderr: Buffer.from("empty command"), timedOut: false, truncated: false };
    const rel = checkRelativePath(options.cwd ?? "", "cwd");
    this.#touch();
    const cwd = rel === "" ? OPENSANDBOX_WORKDIR : `${OPENSANDBOX_WORKDIR}/${rel}`;
    const base = `/tmp/.agentws-exec-${randomBytes(8).toString("hex")}`;
    const [inFile, outFile, errFile] = [`${base}.in`, `${base}.out`, `${base}.err`];
    if (options.stdin !== undefined) await this.#files("pass stdin", () => this.sbx.files.writeFiles([{ path: inFile, data: toBytes(options.stdin!), mode: 600 }]));
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
        { ...(options.env ? { envs: options.env } : {}), ...(options.timeoutMs !== undefined && options.timeoutMs > 0 ? { timeoutSeconds: options.timeoutMs / 1000 } : {}) },
        controller.signal,
      );
      for await (const ev of stream) {
        const e = ev as { type?: string; text?: string; error?: { ename?: string; evalue?: string } };
        if (e.type === "init") commandId = e.text;
        else if (e.type === "stderr") prelude.line(e.text ?? "");
        else if (e.type === "stdout" && e.text?.startsWith(`${SIZES} `)) {
          const [o, r] = e.text.slice(SIZES.length + 1).split(" ").map(Number);
          if (Number.isSafeInteger(o) && Number.isSafeInteger(r)) sizes = [o!, r!];
        }
        else if (e.type === "execution_complete") exitCode = 0;
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
    if (exitCode === 65 && said === `${CWD_ESCAPES}\n`) throw new PathEscapeError(rel, "the working directory resolves outside the workspace");
    if (exitCode === 66 && said === `${CWD_MISSING}\n`) throw new NotFoundError(`working directory '${rel}'`, { field: "cwd" });
    // Which files have bytes, from the stream when the command ran to its end; otherwise (killed, timed out) whatever the files hold.
    const [stdout, stderr] = await Promise.all([this.#output(outFile, max, sizes?.[0] === 0), this.#output(errFile, max, sizes?.[1] === 0)]);
    if (!sizes || sizes[0] > 0 || sizes[1] > 0 || options.stdin !== undefined) this.#discard([inFile, outFile, errFile]);
    const timedOut = controller.signal.aborted || (exitCode === -1 && (options.timeoutMs !== undefined || /timeout/i.test(ename)));
    const truncated = stdout.truncated || stderr.truncated;
    if (timedOut) return { exitCode: -1, stdout: stdout.bytes, stderr: stderr.bytes.length ? stderr.bytes : Buffer.from("timed out"), timedOut: true, truncated };
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

  spawn(argv: string[], options: SpawnOptions = {}): SandboxProcess {
    if (argv.length === 0) throw new WorkspaceError("invalid_argument", "spawn: argv must not be empty", { field: "argv" });
    const rel = checkRelativePath(options.cwd ?? "", "cwd");
    this.#touch();
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const idReady = this.#helperJson<{ id: string }>("/spawn", { argv, cwd: rel, env: options.env ?? {} });
    let chain: Promise<unknown> = idReady;
    const send = (suffix: string, body?: Buffer) =>
      (chain = chain.then(async () => {
        const { id } = await idReady;
        await this.#helperRaw(`/p/${id}/${suffix}`, { method: "POST", ...(body ? { body } : {}) });
      }));
    const stdin = new Writable({
      write: (chunk: Buffer, _enc, cb) => {
        this.#touch();
        send("in", chunk).then(
          () => cb(),
          (e: unknown) => cb(e as Error),
        );
      },
      final: (cb) => {
        send("eof").then(
          () => cb(),
          () => cb(),
        );
      },
    });
    stdin.on("error", () => undefined);
    const pump = async (which: "out" | "err", into: PassThrough) => {
      try {
        const { id } = await idReady;
        const res = await this.#helperRaw(`/p/${id}/${which}`, { method: "GET", stream: true });
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) into.write(Buffer.from(chunk));
      } catch (e) {
        if (which === "err") into.write(`spawn failed: ${(e as Error).message ?? String(e)}\n`);
      } finally {
        into.end();
      }
    };
    const pumps = Promise.all([pump("out", stdout), pump("err", stderr)]);
    let killed = false;
    const exited = (async (): Promise<number | null> => {
      try {
        const { id } = await idReady;
        const { code } = await this.#helperJson<{ code: number | null }>(`/p/${id}/wait`, undefined, { method: "GET", timeoutMs: 0 });
        await pumps;
        return killed ? null : code;
      } catch {
        await pumps;
        return killed ? null : 127;
      }
    })();
    const proc: SandboxProcess = {
      stdin,
      stdout,
      stderr,
      exited,
      kill: () => {
        killed = true;
        void idReady.then(({ id }) => this.#helperRaw(`/p/${id}/kill`, { method: "POST" })).catch(() => undefined);
      },
    };
    this.#live.add(proc);
    void exited.finally(() => this.#live.delete(proc));
    return proc;
  }

  async readFile(rel: string, options: { maxBytes?: number } = {}): Promise<Buffer> {
    const clean = checkRelativePath(rel);
    const direct = clean === "" ? OPENSANDBOX_WORKDIR : `${OPENSANDBOX_WORKDIR}/${clean}`;
    // The confinement check and an optimistic download of up to OPTIMISTIC_READ bytes go out together;
    // the bytes are used only when the helper says the name is a file of that size at that very path.
    const optimistic = Math.min(options.maxBytes ?? OPTIMISTIC_READ, OPTIMISTIC_READ);
    const early = this.sbx.files.readBytes(direct, { offset: 0, limit: optimistic + 1 }).then(
      (b) => Buffer.from(b),
      () => null,
    );
    const { real, size } = await this.#fs<{ real: string; size: number }>("read", clean, { ...(options.maxBytes !== undefined ? { maxBytes: options.maxBytes } : {}) }).catch(async (e: unknown) => {
      await early;
      throw e;
    });
    const got = await early;
    if (got && real === direct && got.length === size && size <= optimistic) return got;
    if (size === 0) return Buffer.alloc(0);
    const limit = options.maxBytes === undefined ? size : Math.min(size, options.maxBytes);
    return Buffer.from(await this.#files(`read '${clean}'`, () => this.sbx.files.readBytes(real, { offset: 0, limit })));
  }

  async writeFile(rel: string, data: Uint8Array | string, options: { mode?: number; exclusive?: boolean } = {}): Promise<void> {
    const clean = nonRoot(checkRelativePath(rel));
    const src = await this.#upload(`write '${clean}'`, data);
    await this.#fs("commit", clean, { src, exclusive: options.exclusive ?? false, ...(options.mode !== undefined ? { mode: options.mode } : {}) });
  }

  async appendFile(rel: string, data: Uint8Array | string): Promise<void> {
    const clean = nonRoot(checkRelativePath(rel));
    const src = await this.#upload(`append to '${clean}'`, data);
    await this.#fs("append", clean, { src });
  }

  /** Uploads bytes through execd to an unguessable name in the sandbox's /tmp; the helper moves them into place. */
  async #upload(what: string, data: Uint8Array | string): Promise<string> {
    const src = `/tmp/.agentws-up-${randomBytes(16).toString("hex")}`;
    await this.#files(what, () => this.sbx.files.writeFiles([{ path: src, data: toBytes(data), mode: 600 }]));
    return src;
  }

  async createFile(rel: string, data: Uint8Array | string): Promise<void> {
    return this.writeFile(rel, data, { exclusive: true });
  }

  async list(rel: string): Promise<FileInfo[]> {
    return (await this.#fs<{ entries: FileInfo[] }>("list", checkRelativePath(rel), {})).entries;
  }

  async readDirTyped(rel: string): Promise<DirEntry[]> {
    return (await this.#fs<{ entries: DirEntry[] }>("list", checkRelativePath(rel), { typed: true })).entries;
  }

  async stat(rel: string): Promise<FileInfo | null> {
    return (await this.#fs<{ info: FileInfo | null }>("stat", checkRelativePath(rel), {})).info;
  }

  async remove(rel: string): Promise<void> {
    const clean = checkRelativePath(rel);
    if (clean === "") throw new PathEscapeError(rel, "cannot remove the workspace root");
    await this.#fs("remove", clean, {});
  }

  async mkdir(rel: string): Promise<void> {
    await this.#fs("mkdir", checkRelativePath(rel), {});
  }

  async rename(from: string, to: string): Promise<void> {
    const a = nonRoot(checkRelativePath(from, "from"));
    const b = nonRoot(checkRelativePath(to, "to"));
    await this.#fs("rename", a, { from: a, to: b });
  }

  /** Copies a host file or tree (symlinks skipped) into a temp folder, then renames it into place (refused when `to` exists). */
  async copyIn(hostSource: string, to: string): Promise<void> {
    const clean = nonRoot(checkRelativePath(to, "to"));
    if (await this.stat(clean)) throw new ConflictError(`${clean} already exists`, { field: clean });
    const st = await fs.lstat(hostSource).catch((e: unknown) => {
      throw new NotFoundError(`host path '${hostSource}'`, { cause: e, field: "hostPath" });
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

  /** Kills what this handle spawned and releases the SDK's HTTP agent (not the sandbox). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const p of this.#live) p.kill();
    await Promise.race([Promise.all([...this.#live].map((p) => p.exited.catch(() => null))), sleep(2000)]);
    await this.sbx.close().catch(() => undefined);
  }

  async #files<T>(what: string, fn: () => Promise<T>): Promise<T> {
    this.#touch();
    try {
      return await fn();
    } catch (e) {
      throw openSandboxError(e, what);
    }
  }

  /** One confined file-metadata operation in the helper; its refusal codes become our error family. */
  async #fs<T = Record<string, never>>(op: string, rel: string, args: Record<string, unknown>): Promise<T> {
    this.#touch();
    try {
      return await this.#helperJson<T>("/fs", { op, path: rel, ...args });
    } catch (e) {
      throw fsError(e, rel);
    }
  }

  async #helperJson<T>(route: string, body?: unknown, o: { method?: string; timeoutMs?: number } = {}): Promise<T> {
    const res = await this.#helperRaw(route, { method: o.method ?? "POST", ...(body !== undefined ? { body: Buffer.from(JSON.stringify(body)) } : {}), ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}) });
    const text = await boundedText(res, MAX_HELPER_ANSWER);
    return JSON.parse(text) as T;
  }

  async #helperRaw(route: string, o: { method: string; body?: Buffer; stream?: boolean; timeoutMs?: number }): Promise<Response> {
    const h = this.#helper;
    if (!h) throw new UnavailableError("opensandbox: the sandbox handle was not started");
    const timeoutMs = o.stream ? 0 : (o.timeoutMs ?? 60_000);
    let res: Response;
    try {
      res = await fetch(`${h.url}${route}`, {
        method: o.method,
        headers: { ...h.headers, "content-type": "application/json" },
        ...(o.body ? { body: o.body } : {}),
        ...(timeoutMs > 0 ? { signal: AbortSignal.timeout(timeoutMs) } : {}),
      });
    } catch (e) {
      throw new UnavailableError(`opensandbox: the in-sandbox helper did not answer (paused or gone sandbox?): ${(e as Error).message ?? String(e)}`, { cause: e });
    }
    if (!res.ok) {
      const text = await boundedText(res, 64 * 1024).catch(() => "");
      let parsed: { code?: string; message?: string } = {};
      try {
        parsed = JSON.parse(text) as typeof parsed;
      } catch {
        // not JSON: reported as is
      }
      throw new HelperRefusal(res.status, parsed.code ?? "http", parsed.message ?? text.slice(0, 300));
    }
    return res;
  }
}

class HelperRefusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function fsError(e: unknown, rel: string): unknown {
  if (!(e instanceof HelperRefusal)) return e;
  switch (e.code) {
    case "path_escape":
      return new PathEscapeError(rel, e.message);
    case "not_found":
      return new NotFoundError(`'${rel}'`, { field: rel });
    case "exists":
      return new ConflictError(`${rel} already exists`, { field: rel });
    case "is_dir":
      return new WorkspaceError("invalid_argument", `'${rel}' is a directory`, { field: rel });
    case "not_dir":
      return new WorkspaceError("invalid_argument", `'${rel}' (or a parent) is not a directory`, { field: rel });
    case "too_large":
      return new TooLargeError(`${rel} is ${e.message} bytes, over the limit`, { field: rel });
    case "invalid_argument":
      return new WorkspaceError("invalid_argument", `'${rel}': ${e.message}`, { field: rel });
  }
  return new WorkspaceError("exec_failed", `opensandbox: file operation on '${rel}' failed (${e.status} ${e.code}): ${e.message}`, { field: rel });
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

async function boundedText(res: Response, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of res.body as unknown as AsyncIterable<Uint8Array>) {
    n += c.length;
    if (n > max) throw new TooLargeError(`opensandbox: helper answer over ${max} bytes`);
    chunks.push(Buffer.from(c));
  }
  return Buffer.concat(chunks).toString("utf8");
}

function toBytes(data: Uint8Array | string): Uint8Array {
  return typeof data === "string" ? Buffer.from(data) : data;
}

/** Single-quoted for sh. */
function q(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

function nonRoot(rel: string): string {
  if (rel === "") throw new PathEscapeError(rel, "must name a file, not the workspace root");
  return rel;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
