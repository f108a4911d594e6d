// Size: the runner path plus the plain-exec fallback (confined sh scripts) for images without python3.
import { randomBytes } from "node:crypto";
import { statSync } from "node:fs";
import path from "node:path";
import { PassThrough, Writable, type Duplex, type Readable } from "node:stream";
import type Docker from "dockerode";
import tar from "tar-stream";
import { ConflictError, PathEscapeError, TooLargeError, InvalidArgumentError } from "../../errors.js";
import { pageOfEntries, walkTreeByList } from "../../util/listing.js";
import type { DirEntry, ExecOptions, ExecResult, FileInfo, ListPage, ListPageOptions, Sandbox, SandboxProcess, SpawnOptions, WalkTreeOptions, WalkTreeResult } from "../../sandbox.js";
import { rangeOfWholeRead } from "../../sandbox.js";
import { checkRelativePath } from "../../paths.js";
import { DEFAULT_MAX_OUTPUT } from "../../util/process.js";
import { silentLogger, type Logger } from "../../logger.js";
import { copyTreeFileByFile, nonRoot, packTree, parseFind, shellFileError, shellKillScript, shellPrelude, SHELL_SCRIPTS } from "../../kit/shell-files.js";
import { RunnerFiles, runnerExec, RunnerSupervisor, spawnThroughRunner, type RunnerClient, type RunnerLease } from "../../kit/runner/index.js";
import { dockerError } from "./errors.js";
import { startDockerRunner, type DockerRunnerTransport } from "./runner.js";

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

export interface DockerSandboxOptions {
  persistent: boolean;
  env?: Record<string, string> | undefined;
  /**
   * Host folder that is bind-mounted at /workspace, when this process can see it (checked by the
   * driver with a probe file). Reported by `fileAccess`; file operations still run inside the
   * container (through the runner), never on this host side of the mount.
   */
  hostRoot?: string | undefined;
  /** Told once when the image has no python3 and the sandbox falls back to one exec per call. */
  logger?: Logger | undefined;
  /** One engine exec per call, no runner (a one-off probe that should leave no process behind). */
  plain?: boolean | undefined;
}

/**
 * Idle runners of closed handles, by container and runner environment. An idle eviction closes the
 * handle and pauses the container; the next handle on that container adopts the (thawed) runner
 * instead of paying a new `docker exec` and Python start. A parked runner dies with its container
 * (its exec ends) or with this process (its stdin closes); it holds no event-loop reference.
 */
const PARKED = new Map<string, RunnerClient>();
const MAX_PARKED = 256;

function park(key: string, client: RunnerClient): void {
  const old = PARKED.get(key);
  if (old && old !== client) void old.stop();
  PARKED.delete(key);
  if (PARKED.size >= MAX_PARKED) {
    const [oldestKey, oldest] = PARKED.entries().next().value as [string, RunnerClient];
    PARKED.delete(oldestKey);
    void oldest.stop();
  }
  PARKED.set(key, client);
  void client.exited.then(() => {
    if (PARKED.get(key) === client) PARKED.delete(key);
  });
}

/** How often a call in flight checks that the container has not been paused or stopped under it. */
const WATCH_MS = 1000;

/**
 * A running container as a Sandbox. Commands and file operations go through one long-lived runner
 * process inside the container (sdk/kit/runner), attached by one `docker exec`; an image
 * without python3 falls back to one engine exec per command and sh scripts for files.
 */
export class DockerSandbox implements Sandbox {
  readonly kind = "docker";
  readonly workdir = DOCKER_WORKDIR;
  readonly persistent: boolean;
  readonly #docker: Docker;
  readonly #container: Docker.Container;
  readonly #env: string[];
  readonly #live = new Map<string, { stream?: Duplex | undefined; done: Promise<unknown> }>();
  readonly #hostShared: boolean;
  readonly #logger: Logger;
  readonly #runners: RunnerSupervisor;
  readonly #rf: RunnerFiles;
  /** "runner" once a runner answered, "plain" when the image cannot run one (no python3). */
  #mode: "unknown" | "runner" | "plain" = "unknown";
  #probing: Promise<boolean> | undefined;
  #closed = false;
  #inflight = 0;
  /** Processes spawned through the runner and still running: a runner serving one is never parked. */
  #spawns = 0;
  #watch: NodeJS.Timeout | undefined;

  constructor(docker: Docker, containerId: string, options: DockerSandboxOptions) {
    this.#docker = docker;
    this.#hostShared = !!options.hostRoot;
    this.#logger = options.logger ?? silentLogger;
    this.#container = docker.getContainer(containerId);
    this.persistent = options.persistent;
    this.#env = Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`);
    const device = hostDevice(options.hostRoot);
    this.#runners = new RunnerSupervisor(() => startDockerRunner(this.#docker, this.#container, this.#env, DOCKER_WORKDIR, this.#hostShared, device));
    this.#rf = new RunnerFiles(() => this.#lease());
    if (options.plain) this.#mode = "plain";
    const parked = PARKED.get(this.#parkKey);
    if (parked && !options.plain) {
      PARKED.delete(this.#parkKey);
      if (this.#runners.adopt(parked)) this.#mode = "runner";
      else void parked.stop();
    }
  }

  get #parkKey(): string {
    return [this.#container.id, this.#hostShared ? "host" : "exec", ...this.#env].join("\0");
  }

  get containerId(): string {
    return this.#container.id;
  }

  /** "host" when the workspace folder is bind-mounted from this host, "exec" when it lives only in the container. */
  get fileAccess(): "host" | "exec" {
    return this.#hostShared ? "host" : "exec";
  }

  /** Whether calls go through the runner ("plain" after an image without python3 refused it). */
  get runnerMode(): "unknown" | "runner" | "plain" {
    return this.#mode;
  }

  /** Whether the live runner's calls skip dockerd over its private pipe pair (for tests). */
  get runnerChannel(): "transport" | "private" | undefined {
    return this.#runners.current?.channel;
  }

  /** pid (inside the container) is not known here; the runner's liveness is, for tests. */
  get runnerAlive(): boolean {
    return this.#runners.current !== undefined;
  }

  async exec(argv: string[], options: ExecOptions = {}): Promise<ExecResult> {
    if (argv.length === 0) return { exitCode: 127, stdout: Buffer.alloc(0), stderr: Buffer.from("empty command"), timedOut: false, truncated: false };
    if (await this.#useRunner()) {
      checkRelativePath(options.cwd ?? "", "cwd");
      const lease = await this.#lease();
      try {
        return await runnerExec(lease.client, argv, options, {});
      } finally {
        lease.release?.();
      }
    }
    const cwd = options.cwd ? await this.#resolveCwd(options.cwd) : DOCKER_WORKDIR;
    const r = await this.#run(argv, { ...options, workdir: cwd });
    // The runtime reports a missing executable as 126; callers expect the shell's 127.
    if (r.exitCode === 126 && /executable file not found|no such file or directory/i.test(r.stdout.toString() + r.stderr.toString())) return { ...r, exitCode: 127 };
    return r;
  }

  /**
   * Through the runner: the process's stdio streams over the runner's one attached exec (no exec of its
   * own), its cwd resolved inside the container; it dies with the runner at close(). An image without
   * python3 gets one attached engine exec per process.
   */
  spawn(argv: string[], options: SpawnOptions = {}): SandboxProcess {
    if (argv.length === 0) throw new InvalidArgumentError("spawn: argv must not be empty", { field: "argv", fieldPrefix: false });
    const rel = checkRelativePath(options.cwd ?? "", "cwd");
    const open = async (): Promise<RunnerLease | SandboxProcess> => {
      if (!(await this.#useRunner())) return this.#plainSpawn(argv, rel, options);
      // Not watched like a call: a server may live as long as the handle; it only keeps the runner from parking.
      const lease = await this.#lease(false);
      this.#spawns++;
      let released = false;
      return {
        client: lease.client,
        release: () => {
          if (released) return;
          released = true;
          this.#spawns--;
          lease.release?.();
        },
      };
    };
    return spawnThroughRunner(open(), { argv, cwd: rel, env: { ...options.env } });
  }

  /** One attached engine exec per process (images without python3). */
  #plainSpawn(argv: string[], rel: string, options: SpawnOptions): SandboxProcess {
    const stdin = new PassThrough();
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const marker = randomBytes(8).toString("hex");
    const entry: { stream?: Duplex | undefined; done: Promise<unknown> } = { done: Promise.resolve() };
    let killed = false;
    const exited = (async (): Promise<number | null> => {
      try {
        const exec = await this.#container.exec({
          Cmd: argv,
          AttachStdin: true,
          AttachStdout: true,
          AttachStderr: true,
          Tty: false,
          Env: [...this.#env, ...envList(options.env), `${MARKER}=${marker}`],
          WorkingDir: rel === "" ? DOCKER_WORKDIR : `${DOCKER_WORKDIR}/${rel}`,
        });
        const stream = (await exec.start({ hijack: true, stdin: true })) as unknown as Duplex;
        entry.stream = stream;
        if (killed) stream.destroy();
        this.#docker.modem.demuxStream(stream, stdout, stderr);
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
    if (await this.#useRunner()) return this.#rf.readFile(rel, options);
    const clean = checkRelativePath(rel);
    const max = options.maxBytes;
    const r = await this.#op("read", [clean, max === undefined ? "-" : String(max)], { max: (max ?? 1024 * 1024 * 1024) + 1 });
    if (r.exitCode === 71) throw new TooLargeError(`${clean} is ${r.stderr.toString()} bytes, over the ${max}-byte limit`, { field: "path" });
    this.#check(r, "read", clean);
    return r.stdout;
  }

  async writeFile(rel: string, data: Uint8Array | string, options: { mode?: number; exclusive?: boolean } = {}): Promise<void> {
    if (await this.#useRunner()) return this.#rf.writeFile(rel, data, options);
    const clean = nonRoot(checkRelativePath(rel));
    const mode = options.mode === undefined ? "-" : options.mode.toString(8);
    this.#check(await this.#op("write", [clean, mode, options.exclusive ? "x" : "-"], { stdin: data }), "write", clean);
  }

  async appendFile(rel: string, data: Uint8Array | string): Promise<void> {
    if (await this.#useRunner()) return this.#rf.appendFile(rel, data);
    const clean = nonRoot(checkRelativePath(rel));
    this.#check(await this.#op("append", [clean], { stdin: data }), "append to", clean);
  }

  async list(rel: string): Promise<FileInfo[]> {
    if (await this.#useRunner()) return this.#rf.list(rel);
    const clean = checkRelativePath(rel);
    const r = await this.#op("list", [clean]);
    this.#check(r, "list", clean);
    return parseFind(r.stdout);
  }

  async stat(rel: string): Promise<FileInfo | null> {
    if (await this.#useRunner()) return this.#rf.stat(rel);
    const clean = checkRelativePath(rel);
    const r = await this.#op("stat", [clean]);
    this.#check(r, "stat", clean);
    const info = parseFind(r.stdout)[0];
    return info ? { ...info, name: path.posix.basename(clean) || "." } : null;
  }

  async remove(rel: string): Promise<void> {
    if (await this.#useRunner()) return this.#rf.remove(rel);
    const clean = checkRelativePath(rel);
    if (clean === "") throw new PathEscapeError(`path '${rel}' cannot remove the workspace root`);
    this.#check(await this.#op("remove", [clean]), "remove", clean);
  }

  async mkdir(rel: string): Promise<void> {
    if (await this.#useRunner()) return this.#rf.mkdir(rel);
    const clean = checkRelativePath(rel);
    this.#check(await this.#op("mkdir", [clean]), "create directory", clean);
  }

  async rename(from: string, to: string): Promise<void> {
    if (await this.#useRunner()) return this.#rf.rename(from, to);
    const a = nonRoot(checkRelativePath(from, "from"));
    const b = nonRoot(checkRelativePath(to, "to"));
    const r = await this.#op("rename", [a, b]);
    if (r.exitCode === 69) throw new ConflictError(`${b} already exists`, { field: "to" });
    this.#check(r, "rename", a);
  }

  /** Streams a host file or tree (symlinks skipped) as a tar archive into a temp name, then moves it into place. */
  async copyIn(hostSource: string, to: string): Promise<void> {
    if (await this.#useRunner()) return this.#rf.copyIn(hostSource, to);
    const clean = nonRoot(checkRelativePath(to, "to"));
    const prep = await this.#op("copyPrepare", [clean]);
    if (prep.exitCode === 69) throw new ConflictError(`${clean} already exists`, { field: "path" });
    this.#check(prep, "copy into", clean);
    const parent = prep.stdout.toString();
    const tmpName = `.agentws-copy-${randomBytes(6).toString("hex")}`;
    const pack = tar.pack();
    const packing = packTree(pack, hostSource, tmpName).then(
      () => pack.finalize(),
      (e: unknown) => pack.destroy(e as Error),
    );
    try {
      await this.#container.putArchive(pack as unknown as NodeJS.ReadableStream, { path: parent });
      await packing;
    } catch (e) {
      await this.#op("remove", [path.posix.join(path.posix.relative(DOCKER_WORKDIR, parent), tmpName)]).catch(() => undefined);
      throw mapDockerError(e, `copy '${hostSource}' into ${clean}`);
    }
    const fin = await this.#op("copyFinish", [clean, `${parent}/${tmpName}`]);
    if (fin.exitCode === 69) throw new ConflictError(`${clean} already exists`, { field: "path" });
    this.#check(fin, "copy into", clean);
  }

  /** A piece of a file of any size: read from its offset by the runner (without python3: cut from a capped whole read). */
  async readRange(rel: string, offset: number, length: number): Promise<Buffer> {
    if (await this.#useRunner()) return this.#rf.readRange(rel, offset, length);
    return rangeOfWholeRead(this, rel, offset, length);
  }

  /** One page of a folder: cut inside the sandbox by the runner (without python3: from a full listing). */
  async listPage(rel: string, options?: ListPageOptions): Promise<ListPage> {
    if (await this.#useRunner()) return this.#rf.listPage(rel, options);
    return pageOfEntries(await this.list(rel), options);
  }

  /** The tree below a folder: one runner call (without python3: a listing per folder). */
  async walkTree(rel: string, options: WalkTreeOptions): Promise<WalkTreeResult> {
    if (await this.#useRunner()) return this.#rf.walkTree(rel, options);
    return walkTreeByList(this, rel, options);
  }

  /** Names and types of a folder's entries in one runner call (a list without the per-entry stat). */
  async readDirTyped(rel: string): Promise<DirEntry[]> {
    if (await this.#useRunner()) return this.#rf.readDirTyped(rel);
    return (await this.list(rel)).map((e) => ({ name: e.name, type: e.type }));
  }

  /** Copies a workspace folder in one runner call (plain mode: file by file through exec). */
  async copyTree(from: string, to: string, options: { exclude?: (name: string) => boolean } = {}): Promise<void> {
    if (await this.#useRunner()) return this.#rf.copyTree(from, to, options);
    return copyTreeFileByFile(this, from, to, options);
  }

  /** Exclusive create without writeFile's temp file, in one runner call. */
  async createFile(rel: string, data: Uint8Array | string): Promise<void> {
    if (await this.#useRunner()) return this.#rf.createFile(rel, data);
    return this.writeFile(rel, data, { exclusive: true });
  }

  /** Whether calls go through the runner; the first call finds out (and says so once when it cannot). */
  async #useRunner(): Promise<boolean> {
    if (this.#mode !== "unknown") return this.#mode === "runner";
    this.#probing ??= this.#probe().finally(() => (this.#probing = undefined));
    return this.#probing;
  }

  async #probe(): Promise<boolean> {
    const lease: RunnerLease = this.#closed ? this.#runners.oneShot() : { client: this.#runners.get() };
    const transport = lease.client.transport as DockerRunnerTransport;
    try {
      await lease.client.ready;
      this.#mode = "runner";
      return true;
    } catch {
      // The engine refused the exec itself (paused, stopped, gone): an error now, another try next call.
      const api = transport.apiError();
      if (api) throw mapDockerError(api, "start the sandbox runner");
      const code = await transport.exitCode();
      this.#mode = "plain";
      this.#logger.warn("docker image cannot run the sandbox runner (no python3?); falling back to one exec per command and file operation", {
        container: this.#container.id.slice(0, 12),
        exitCode: code,
      });
      return false;
    } finally {
      if (this.#closed) lease.release?.();
    }
  }

  /**
   * The live runner for one call; after close() a runner of its own, stopped when the call is done.
   * A frozen (paused) container would leave a call waiting forever on the runner's stream: while calls
   * are in flight, every WATCH_MS checks that the container still runs, and ends the runner if not.
   */
  async #lease(watch = true): Promise<RunnerLease> {
    const lease: RunnerLease = this.#closed ? this.#runners.oneShot() : { client: this.#runners.get() };
    try {
      // Settled at once for a live runner; for a fresh one, the engine's refusal (a paused or gone
      // container) becomes its clear error rather than a "runner stopped".
      await lease.client.ready;
    } catch (e) {
      lease.release?.();
      const api = (lease.client.transport as DockerRunnerTransport).apiError();
      throw api ? mapDockerError(api, "exec") : e;
    }
    if (!watch) return lease;
    if (this.#inflight++ === 0) {
      this.#watch = setInterval(() => void this.#checkRunning(), WATCH_MS);
      this.#watch.unref();
    }
    let released = false;
    return {
      client: lease.client,
      release: () => {
        if (released) return;
        released = true;
        if (--this.#inflight === 0) clearInterval(this.#watch);
        lease.release?.();
      },
    };
  }

  async #checkRunning(): Promise<void> {
    const info = await this.#container.inspect().catch(() => null);
    if (info?.State?.Paused && !this.#closed) {
      // Paused under calls in flight (another replica, an operator): they are frozen, not lost, so
      // thawing the container lets them finish; only when that fails do they end with an error.
      // A racing unpause answers "is not paused", which is the state we want.
      const thawed = await this.#container.unpause().then(
        () => true,
        (e: unknown) => /not paused/i.test(String((e as Error).message)),
      );
      if (thawed) {
        this.#logger.warn("the workspace container was paused under calls in flight; unpaused it", { container: this.#container.id.slice(0, 12) });
        return;
      }
    }
    if (!info || info.State?.Paused || !info.State?.Running)
      (this.#runners.current?.transport as DockerRunnerTransport | undefined)?.end(
        !info ? "the workspace container is gone" : info.State?.Paused ? "the workspace container was paused; initialize the workspace to resume it" : "the workspace container stopped",
      );
  }

  /** Kills every process this handle spawned (e.g. MCP servers) and drops their streams. */
  async close(): Promise<void> {
    this.#closed = true;
    // An idle runner is parked for the next handle on this container (see PARKED); a busy one stops.
    const idle = this.#inflight === 0 && this.#spawns === 0 ? this.#runners.detach() : undefined;
    if (idle) park(this.#parkKey, idle);
    await this.#runners.stop();
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
    this.#check(r, "use as working directory", clean);
    return r.stdout.toString();
  }

  #op(name: keyof typeof SCRIPTS, args: string[], o: { stdin?: Uint8Array | string; max?: number } = {}): Promise<ExecResult> {
    return this.#run(["sh", "-c", PRELUDE + SCRIPTS[name], "sh", ...args], {
      workdir: "/",
      ...(o.stdin !== undefined ? { stdin: o.stdin } : {}),
      maxOutputBytes: o.max ?? DEFAULT_MAX_OUTPUT,
    });
  }

  #check(r: ExecResult, verb: string, rel: string): void {
    const e = shellFileError(r, verb, rel, "the container");
    if (e) throw e;
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
      exec = await this.#container.exec({
        Cmd: argv,
        AttachStdin: hasStdin,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        Env: [...this.#env, ...envList(o.env), ...(o.noMarker ? [] : [`${MARKER}=${marker}`])],
        WorkingDir: o.workdir,
      });
      stream = (await exec.start(hasStdin ? { hijack: true, stdin: true } : {})) as unknown as Duplex;
    } catch (e) {
      throw mapDockerError(e, `exec ${argv[0]}`);
    }
    const max = o.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    const out = new Capped(max);
    const err = new Capped(max);
    this.#docker.modem.demuxStream(stream, out, err);
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

/** The device of the shared host folder from this host's own stat (see startDockerRunner), if it is one. */
function hostDevice(hostRoot: string | undefined): bigint | undefined {
  if (!hostRoot) return undefined;
  try {
    return statSync(hostRoot, { bigint: true }).dev;
  } catch {
    return undefined;
  }
}
