// The Docker fallback for images without python3 (no runner): one engine exec per command, confined sh
// scripts for files (kit/shell-files.ts plus the two whose bytes travel on the exec's own stdin and stdout).
import { randomBytes } from "node:crypto";
import path from "node:path";
import { PassThrough, Writable, type Duplex, type Readable } from "node:stream";
import type Docker from "dockerode";
import tar from "tar-stream";
import { ConflictError, TooLargeError } from "../../errors.js";
import type { ExecOptions, ExecResult, SandboxProcess, SpawnOptions } from "../../sandbox.js";
import { checkRelativePath } from "../../paths.js";
import { DEFAULT_MAX_OUTPUT } from "../../util/process.js";
import { nonRoot, packTree, ScriptFiles, shellKillScript, shellPrelude, SHELL_SCRIPTS } from "../../kit/shell-files.js";
import type { PlainFiles, PlainTransport } from "../../kit/runner-sandbox.js";
import { dockerError } from "./errors.js";

export const DOCKER_WORKDIR = "/workspace";
/** Every process we start carries this env marker so it (and its children) can be killed from inside. */
const MARKER = "AGENTWS_EXEC";

/**
 * Fallback for images without python3 (no runner): the shared confined sh scripts (kit/shell-files.ts),
 * plus the two whose bytes travel on the exec's own stdin and stdout here.
 */
const PRELUDE = shellPrelude(DOCKER_WORKDIR);
const SCRIPTS = {
  ...SHELL_SCRIPTS,
  read: `res "$1"; [ -e "$p" ] || exit 66; [ -d "$p" ] && exit 67
if [ "$2" != "-" ]; then s=$(stat -c %s -- "$p"); [ "$s" -le "$2" ] || { printf %s "$s" >&2; exit 71; }; fi
exec cat -- "$p"`,
  write: `resp "$1"; [ -L "$p" ] && exit 70; [ -d "$p" ] && exit 67
mkdir -p -- "$d" 2>/dev/null || exit 68
t="$d/.$b.agentws-tmp-$$"
# Mode "-": a replaced regular file keeps its permission bits, a new one gets 644.
m=$2; [ "$m" = - ] && { m=644; [ -f "$p" ] && m=$(stat -c %a -- "$p"); }
cat > "$t" && chmod "$m" -- "$t" || { rm -f -- "$t"; exit 1; }
if [ "$3" = x ]; then
  # link() publishes the whole file and fails atomically when the name exists.
  if ln -T -- "$t" "$p" 2>/dev/null; then rm -f -- "$t"; exit 0; fi
  rm -f -- "$t"; exists "$p" && exit 69; exit 1
fi
mv -fT -- "$t" "$p" && exit 0
rm -f -- "$t"; exit 1`,
  copyPrepare: `resp "$1"; exists "$p" && exit 69
mkdir -p -- "$d" 2>/dev/null || exit 68
printf %s "$d"`,
  copyFinish: `resp "$1"; exists "$p" && { rm -rf -- "$2"; exit 69; }
mv -T -- "$2" "$p" || { rm -rf -- "$2"; exit 1; }`,
  kill: shellKillScript(MARKER),
} as const;

/** One engine exec per command and file operation, in a container whose image cannot run the runner. */
export class DockerPlain extends ScriptFiles implements PlainTransport, PlainFiles {
  readonly files: PlainFiles = this;
  protected readonly where = "the container";
  readonly #live = new Map<string, { stream?: Duplex | undefined; done: Promise<unknown> }>();

  constructor(
    private readonly docker: Docker,
    private readonly container: Docker.Container,
    private readonly env: string[],
  ) {
    super();
  }

  async exec(argv: string[], options: ExecOptions): Promise<ExecResult> {
    const cwd = options.cwd ? await this.#resolveCwd(options.cwd) : DOCKER_WORKDIR;
    const r = await this.#run(argv, { ...options, workdir: cwd });
    // The runtime reports a missing executable as 126; callers expect the shell's 127.
    if (r.exitCode === 126 && /executable file not found|no such file or directory/i.test(r.stdout.toString() + r.stderr.toString()))
      return { ...r, exitCode: 127 };
    return r;
  }

  /** One attached engine exec per process. */
  spawn(argv: string[], rel: string, options: SpawnOptions): SandboxProcess {
    const stdin = new PassThrough();
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const marker = randomBytes(8).toString("hex");
    const entry: { stream?: Duplex | undefined; done: Promise<unknown> } = { done: Promise.resolve() };
    let killed = false;
    const exited = (async (): Promise<number | null> => {
      try {
        const exec = await this.container.exec({
          Cmd: argv,
          AttachStdin: true,
          AttachStdout: true,
          AttachStderr: true,
          Tty: false,
          Env: [...this.env, ...envList(options.env), `${MARKER}=${marker}`],
          WorkingDir: rel === "" ? DOCKER_WORKDIR : `${DOCKER_WORKDIR}/${rel}`,
        });
        const stream = (await exec.start({ hijack: true, stdin: true })) as unknown as Duplex;
        entry.stream = stream;
        if (killed) stream.destroy();
        this.docker.modem.demuxStream(stream, stdout, stderr);
        stdin.pipe(stream);
        stream.on("error", () => undefined);
        await ended(stream);
        stdout.end();
        stderr.end();
        if (killed) return null;
        return (await exitCodeOf(exec)) ?? null;
      } catch (e) {
        stderr.end(`spawn failed: ${describeDockerError(e)}\n`);
        stdout.end();
        return 127;
      } finally {
        this.#live.delete(marker);
      }
    })();
    entry.done = exited;
    this.#live.set(marker, entry);
    return {
      stdin,
      stdout,
      stderr,
      exited,
      kill: () => {
        killed = true;
        void this.#killMarker(marker)
          .catch(() => undefined)
          .finally(() => entry.stream?.destroy());
      },
    };
  }

  async readFile(rel: string, options: { maxBytes?: number } = {}): Promise<Buffer> {
    const clean = checkRelativePath(rel);
    const max = options.maxBytes;
    const r = await this.#op("read", [clean, max === undefined ? "-" : String(max)], { max: (max ?? 1024 * 1024 * 1024) + 1 });
    if (r.exitCode === 71) throw new TooLargeError(`${clean} is ${r.stderr.toString()} bytes, over the ${max}-byte limit`, { field: "path" });
    this.check(r, "read", clean);
    return r.stdout;
  }

  async writeFile(rel: string, data: Uint8Array | string, options: { mode?: number; exclusive?: boolean } = {}): Promise<void> {
    const clean = nonRoot(checkRelativePath(rel));
    const mode = options.mode === undefined ? "-" : options.mode.toString(8);
    this.check(await this.#op("write", [clean, mode, options.exclusive ? "x" : "-"], { stdin: data }), "write", clean);
  }

  async appendFile(rel: string, data: Uint8Array | string): Promise<void> {
    const clean = nonRoot(checkRelativePath(rel));
    this.check(await this.#op("append", [clean], { stdin: data }), "append to", clean);
  }

  /** Streams a host file or tree (symlinks skipped) as a tar archive into a temp name, then moves it into place. */
  async copyIn(hostSource: string, to: string): Promise<void> {
    const clean = nonRoot(checkRelativePath(to, "to"));
    const prep = await this.#op("copyPrepare", [clean]);
    if (prep.exitCode === 69) throw new ConflictError(`${clean} already exists`, { field: "path" });
    this.check(prep, "copy into", clean);
    const parent = prep.stdout.toString();
    const tmpName = `.agentws-copy-${randomBytes(6).toString("hex")}`;
    const pack = tar.pack();
    const packing = packTree(pack, hostSource, tmpName).then(
      () => pack.finalize(),
      (e: unknown) => pack.destroy(e as Error),
    );
    try {
      await this.container.putArchive(pack as unknown as NodeJS.ReadableStream, { path: parent });
      await packing;
    } catch (e) {
      await this.#op("remove", [path.posix.join(path.posix.relative(DOCKER_WORKDIR, parent), tmpName)]).catch(() => undefined);
      throw mapDockerError(e, `copy '${hostSource}' into ${clean}`);
    }
    const fin = await this.#op("copyFinish", [clean, `${parent}/${tmpName}`]);
    if (fin.exitCode === 69) throw new ConflictError(`${clean} already exists`, { field: "path" });
    this.check(fin, "copy into", clean);
  }

  /** A piece of a file of any size: read from its offset by the runner (without python3: cut from a capped whole read). */
  protected script(name: "list" | "stat" | "remove" | "mkdir" | "rename", args: string[]): Promise<ExecResult> {
    return this.#op(name, args);
  }

  /** Kills every process this transport spawned and drops their streams. */
  async close(): Promise<void> {
    const live = [...this.#live.entries()];
    await Promise.all(
      live.map(async ([marker, entry]) => {
        await this.#killMarker(marker).catch(() => undefined);
        entry.stream?.destroy();
        await Promise.race([entry.done, sleep(2000)]);
      }),
    );
  }

  async #resolveCwd(cwd: string): Promise<string> {
    const clean = checkRelativePath(cwd, "cwd");
    if (clean === "") return DOCKER_WORKDIR;
    const r = await this.#run(["sh", "-c", PRELUDE + SCRIPTS.cwd, "sh", clean], { workdir: "/" });
    this.check(r, "use as working directory", clean);
    return r.stdout.toString();
  }

  #op(name: keyof typeof SCRIPTS, args: string[], o: { stdin?: Uint8Array | string; max?: number } = {}): Promise<ExecResult> {
    return this.#run(["sh", "-c", PRELUDE + SCRIPTS[name], "sh", ...args], {
      workdir: "/",
      ...(o.stdin !== undefined ? { stdin: o.stdin } : {}),
      maxOutputBytes: o.max ?? DEFAULT_MAX_OUTPUT,
    });
  }

  async #killMarker(marker: string): Promise<void> {
    await this.#run(["sh", "-c", SCRIPTS.kill, "sh", marker], { workdir: "/", noMarker: true });
  }

  /** One exec: create, start (hijacked when there is stdin), demux into capped buffers, read the exit code. */
  async #run(argv: string[], o: ExecOptions & { workdir: string; noMarker?: boolean }): Promise<ExecResult> {
    const marker = randomBytes(8).toString("hex");
    const hasStdin = o.stdin !== undefined;
    let exec: Docker.Exec;
    let stream: Duplex;
    try {
      exec = await this.container.exec({
        Cmd: argv,
        AttachStdin: hasStdin,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        Env: [...this.env, ...envList(o.env), ...(o.noMarker ? [] : [`${MARKER}=${marker}`])],
        WorkingDir: o.workdir,
      });
      stream = (await exec.start(hasStdin ? { hijack: true, stdin: true } : {})) as unknown as Duplex;
    } catch (e) {
      throw mapDockerError(e, `exec ${argv[0]}`);
    }
    const max = o.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    const out = new Capped(max);
    const err = new Capped(max);
    this.docker.modem.demuxStream(stream, out, err);
    stream.on("error", () => undefined);
    if (hasStdin) stream.end(typeof o.stdin === "string" ? Buffer.from(o.stdin) : o.stdin);

    let timedOut = false;
    const stop = () => {
      if (timedOut) return;
      timedOut = true;
      void this.#killMarker(marker)
        .catch(() => undefined)
        .finally(() => setTimeout(() => stream.destroy(), 2000).unref());
    };
    const timer = o.timeoutMs !== undefined && o.timeoutMs > 0 ? setTimeout(stop, o.timeoutMs) : undefined;
    if (o.signal?.aborted) stop();
    o.signal?.addEventListener("abort", stop, { once: true });
    try {
      await ended(stream);
    } finally {
      if (timer) clearTimeout(timer);
      o.signal?.removeEventListener("abort", stop);
    }
    const truncated = out.truncated || err.truncated;
    if (timedOut) {
      const stderr = err.buffer();
      return { exitCode: -1, stdout: out.buffer(), stderr: stderr.length ? stderr : Buffer.from("timed out"), timedOut: true, truncated };
    }
    const code = await exitCodeOf(exec).catch((e: unknown) => {
      throw mapDockerError(e, `exec ${argv[0]}`);
    });
    return { exitCode: code ?? -1, stdout: out.buffer(), stderr: err.buffer(), timedOut: false, truncated };
  }
}

/** A Writable keeping the first `max` bytes. */
class Capped extends Writable {
  readonly #chunks: Buffer[] = [];
  #len = 0;
  truncated = false;
  constructor(private readonly max: number) {
    super();
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    const room = this.max - this.#len;
    if (chunk.length > room) this.truncated = true;
    if (room > 0) {
      const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
      this.#chunks.push(part);
      this.#len += part.length;
    }
    cb();
  }
  buffer(): Buffer {
    return Buffer.concat(this.#chunks, this.#len);
  }
}

function ended(stream: Readable | Duplex): Promise<void> {
  return new Promise((resolve) => {
    if (stream.readableEnded || stream.destroyed) return resolve();
    stream.once("end", resolve);
    stream.once("close", resolve);
    stream.once("error", () => resolve());
  });
}

/** The exit code once the exec has stopped (the stream can end a moment before the engine records it). */
async function exitCodeOf(exec: Docker.Exec): Promise<number | null> {
  for (let i = 0; i < 50; i++) {
    const info = await exec.inspect();
    if (!info.Running) return info.ExitCode ?? null;
    await sleep(i < 10 ? 2 : 20);
  }
  return null;
}

function envList(env: Record<string, string> | undefined): string[] {
  return Object.entries(env ?? {}).map(([k, v]) => `${k}=${v}`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function describeDockerError(e: unknown): string {
  const json = (e as { json?: { message?: string } })?.json;
  return json?.message ?? (e instanceof Error ? e.message : String(e));
}

/** The workspace's own container answered: docker/errors.ts holds the one table (paused, stopped, gone first). */
export function mapDockerError(e: unknown, what: string): unknown {
  return dockerError(e, what, "container");
}
