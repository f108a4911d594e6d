import type { ChildProcess } from "node:child_process";
import { existsSync, lstatSync, readlinkSync, promises as fs } from "node:fs";
import { UnavailableError, InvalidArgumentError } from "../../errors.js";
import type { ExecOptions, ExecResult, SandboxProcess, SpawnOptions } from "../../sandbox.js";
import { checkRelativePath } from "../../paths.js";
import { collectOutput } from "../../util/process.js";
import { LocalSandbox } from "../../kit/host-sandbox.js";
import type { Logger } from "../../logger.js";
import { BwrapLauncher, bwrapSupports, resolveBwrap, type SandboxLimits } from "./launch.js";
import { runnerExec, RunnerSupervisor, spawnThroughRunner, type RunnerClient, type RunnerLease } from "../../kit/runner/index.js";
import { RunnerSandbox, type PlainTransport } from "../../kit/runner-sandbox.js";
import { startBwrapRunner } from "./runner.js";

export const BWRAP_WORKDIR = "/workspace";

export interface BubblewrapSandboxOptions {
  /** Host folder mounted read-write at /workspace. */
  hostRoot: string;
  /**
   * Host folder mounted read-write at /tmp, only where bwrap cannot size a tmpfs (before 0.5); otherwise
   * /tmp is a tmpfs of `tmpBytes` per bwrap (the runner's is the one every exec and spawn shares).
   */
  hostTmp: string;
  /** Size cap of the sandbox's /tmp tmpfs in bytes (default TMP_BYTES); counted in memoryBytes too. */
  tmpBytes?: number | undefined;
  /** Remove hostTmp on close (the driver makes a fresh one per handle). */
  ownsTmp?: boolean;
  /** Host folder holding extra packages, mounted read-only at /opt/agentws (optional). */
  hostEnvDir?: string | undefined;
  network: "none" | "host";
  env?: Record<string, string> | undefined;
  readOnlyPaths?: string[] | undefined;
  persistent: boolean;
  /** bwrap binary; default "bwrap" on PATH. */
  bwrap?: string;
  /** Caps for all of this handle's processes together (a cgroup per handle); none: no cgroup. */
  limits?: SandboxLimits | undefined;
  /** Told once per process when the machine cannot enforce a cap. */
  logger?: Logger | undefined;
}

/** Default size cap of a sandbox's /tmp (a tmpfs): 1 GiB. */
export const TMP_BYTES = 1 << 30;

/** Mount point of the per-workspace package folder (venv, npm prefix). */
export const BWRAP_ENV_MOUNT = "/opt/agentws";

const BASE_PATH = `${BWRAP_ENV_MOUNT}/venv/bin:${BWRAP_ENV_MOUNT}/npm/node_modules/.bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`;
const ETC_FILES = ["resolv.conf", "hosts", "nsswitch.conf", "passwd", "group", "alternatives", "ssl", "pki", "ca-certificates", "localtime"];
const ROOT_DIRS = ["/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"];
/** The runner is a Python script run from the host's /usr, which every sandbox mounts read-only. */
const HAS_PYTHON = existsSync("/usr/bin/python3");

/**
 * A host folder run through bubblewrap. Processes see the folder at /workspace, the host's /usr and
 * libraries read-only, a private /tmp, and no network unless `network: "host"`. Commands and file
 * operations go through one long-lived runner inside the sandbox (sdk/kit/runner), so the
 * host never opens a path the sandbox controls: a folder swapped for a symlink reaches only what the
 * sandbox already sees. (Without python3 on the host, files fall back to the host side of the mount.)
 */
export class BubblewrapSandbox extends RunnerSandbox {
  readonly kind = "bubblewrap";
  readonly workdir = BWRAP_WORKDIR;
  readonly persistent: boolean;
  readonly #opts: BubblewrapSandboxOptions;
  /** argv prefix up to (not including) --chdir; rebuilt only by the constructor. */
  readonly #mounts: string[];
  readonly #identity: { dev: number; ino: number };
  readonly #children = new Set<ChildProcess>();
  /** Starts every bwrap of this handle: minimal environment, inside the handle's cgroup. */
  readonly #launcher: BwrapLauncher;
  /** The long-lived bwrap running the runner; started on first use, restarted if it died. */
  readonly #runners: RunnerSupervisor;
  #closed = false;

  private constructor(opts: BubblewrapSandboxOptions, identity: { dev: number; ino: number }) {
    super();
    this.#opts = opts;
    this.persistent = opts.persistent;
    this.#identity = identity;
    this.#mounts = buildMounts(opts);
    this.#launcher = new BwrapLauncher({ bwrap: opts.bwrap, limits: opts.limits, logger: opts.logger });
    // The workspace folder's device from the host's own stat: what a handed-off descriptor must be on.
    this.#runners = new RunnerSupervisor(() => startBwrapRunner(this.#launcher, this.#runnerArgs(), BWRAP_WORKDIR, BigInt(identity.dev)));
    // Chosen once for every handle: the runner runs from the host's own python3.
    this.decide(HAS_PYTHON ? "runner" : "plain");
  }

  /** Opens a handle; the folders must exist. Records the root's identity to notice a swapped folder. */
  static async open(opts: BubblewrapSandboxOptions): Promise<BubblewrapSandbox> {
    const hostRoot = await fs.realpath(opts.hostRoot);
    const hostTmp = await fs.realpath(opts.hostTmp);
    for (const p of opts.readOnlyPaths ?? [])
      if (!existsSync(p)) throw new InvalidArgumentError(`'${p}' does not exist on the host`, { field: "readOnlyPaths" });
    const st = await fs.stat(hostRoot);
    if (!st.isDirectory()) throw new InvalidArgumentError(`workspace folder '${hostRoot}' is not a directory`, { field: "basedir", fieldPrefix: false });
    return new BubblewrapSandbox({ ...opts, hostRoot, hostTmp }, { dev: st.dev, ino: st.ino });
  }

  /** Host path of the workspace root (for drivers and tests). */
  get hostRoot(): string {
    return this.#opts.hostRoot;
  }

  /** The full bwrap argv for one command (exported for the benchmark and tests). */
  async argvFor(argv: string[], options: { cwd?: string | undefined; env?: Record<string, string> | undefined } = {}): Promise<string[]> {
    await this.#checkIdentity();
    // Resolved by bwrap --chdir inside the sandbox's view, never on the host.
    const cwd = sandboxCwd(options.cwd ?? "");
    const env = { ...baseEnv(), ...this.#opts.env, ...options.env, PWD: cwd };
    const out = [...this.#mounts, "--clearenv"];
    for (const [k, v] of Object.entries(env)) out.push("--setenv", k, v);
    out.push("--chdir", cwd, "--", ...argv);
    return out;
  }

  override async exec(argv: string[], options: ExecOptions = {}): Promise<ExecResult> {
    if (argv.length === 0) return { exitCode: 127, stdout: Buffer.alloc(0), stderr: Buffer.from("empty command"), timedOut: false, truncated: false };
    if (!this.#closed && HAS_PYTHON) {
      try {
        await this.#checkIdentity();
      } catch (e) {
        // The runner's bind mount still shows the old folder: it must not serve another command.
        await this.#stopRunner();
        throw e;
      }
      checkRelativePath(options.cwd ?? "", "cwd");
      const runner = await this.#liveRunner();
      // PWD is what the runner resolved the cwd to: it sets it for the command.
      if (runner) return runnerExec(runner, argv, options, this.#env());
    }
    // After close() (no process may outlive it) or without python3 on the host: one bwrap per command.
    const full = await this.argvFor(argv, options);
    const child = this.#launcher.spawn(full);
    this.#track(child);
    return collectOutput(child, options);
  }

  /**
   * Through the runner: the process's stdio streams over its channel, the cwd is resolved inside the
   * sandbox (a missing one fails the process: exit 127 and the reason on stderr), and the process dies
   * with the runner at close(). Without python3 on the host: one bwrap of its own.
   */
  override spawn(argv: string[], options: SpawnOptions = {}): SandboxProcess {
    if (argv.length === 0) throw new InvalidArgumentError("spawn: argv must not be empty", { field: "argv", fieldPrefix: false });
    // spawn is synchronous by contract: the cwd is checked lexically and the folder's identity here.
    const rel = checkRelativePath(options.cwd ?? "", "cwd");
    this.#checkIdentitySync();
    if (HAS_PYTHON) return spawnThroughRunner(this.lease("spawn"), { argv, cwd: rel, env: { ...this.#env(), ...options.env } });
    const cwd = rel === "" ? BWRAP_WORKDIR : `${BWRAP_WORKDIR}/${rel}`;
    const env = { ...baseEnv(), ...this.#opts.env, ...options.env, PWD: cwd };
    const full = [...this.#mounts, "--clearenv"];
    for (const [k, v] of Object.entries(env)) full.push("--setenv", k, v);
    full.push("--chdir", cwd, "--", ...argv);
    const child = this.#launcher.spawn(full);
    this.#track(child);
    const exited = new Promise<number | null>((resolve) => {
      child.once("error", () => resolve(127));
      child.once("exit", (code) => resolve(code));
    });
    child.stdin.on("error", () => undefined);
    return { stdin: child.stdin, stdout: child.stdout, stderr: child.stderr, exited, kill: () => killGroup(child) };
  }

  protected probe(): Promise<boolean> {
    return Promise.resolve(HAS_PYTHON);
  }

  /** Without python3 on the host: files on the host side of the mount (LocalSandbox's descriptor walk), a bwrap per command. */
  protected plain(): PlainTransport {
    const local = new LocalSandbox(this.#opts.hostRoot);
    return {
      exec: (argv, options) => this.exec(argv, options),
      spawn: (argv, _cwd, options) => this.spawn(argv, options),
      copyIn: (hostPath, to) => local.copyIn(hostPath, to),
      files: local,
      capabilities: local,
    };
  }

  /** Kills every process this handle started (MCP servers included). */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#runners.stop();
    const waits = [...this.#children].map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          c.once("exit", () => resolve());
          killGroup(c);
        }),
    );
    await Promise.all(waits);
    // Whatever left its process group (setsid) is still in the cgroup: killed here.
    await this.#launcher.close();
    if (this.#opts.ownsTmp) await fs.rm(this.#opts.hostTmp, { recursive: true, force: true });
  }

  /** The runner for the next exec; null once close() has begun (that exec then takes the per-command path). */
  async #liveRunner(): Promise<RunnerClient | null> {
    const key = await this.#envKey();
    if (this.#closed) return null;
    // Synchronous from here, so concurrent first calls share one new runner; a replaced one finishes its calls.
    return this.#runners.get(key);
  }

  /**
   * The runner for one file operation. After close() no runner may outlive the handle, so a late call
   * gets one of its own, stopped when the call is done. For a spawn, once close() has begun, a runner
   * already ending: a one-shot runner lasts as long as its call, and a spawn's call as long as its
   * process, which must not outlive the handle. The process then ends as one close() killed.
   */
  protected async lease(use: "call" | "spawn"): Promise<RunnerLease> {
    await this.#checkIdentity();
    const runner = await this.#liveRunner();
    const lease = runner ? { client: runner } : this.#runners.oneShot();
    if (use === "spawn" && this.#closed) void lease.client.stop();
    return lease;
  }

  /** Identity of hostEnvDir: a package reinstall swaps the folder, and only a fresh bwrap sees the new one. */
  async #envKey(): Promise<string> {
    if (!this.#opts.hostEnvDir) return "";
    const st = await fs.stat(this.#opts.hostEnvDir).catch(() => null);
    return st ? `${st.dev}:${st.ino}` : "missing";
  }

  /** What every process of this handle gets under its own variables. */
  #env(): Record<string, string> {
    return { ...baseEnv(), ...this.#opts.env };
  }

  /** pid of the runner's bwrap, if one is running (for tests). */
  get runnerPid(): number | undefined {
    return this.#runners.current?.pid;
  }

  async #stopRunner(): Promise<void> {
    await this.#runners.stop();
  }

  /** bwrap argv for the runner: the same mounts and base environment as a per-command bwrap. */
  #runnerArgs(): string[] {
    const env = { ...baseEnv(), ...this.#opts.env, PWD: BWRAP_WORKDIR };
    // The runner is the sandbox's init: the kernel drops every signal its own namespace sends it that it
    // has no handler for, SIGKILL included, and kill(-1) passes over it; orphans come to it (it reaps them).
    const out = [...this.#mounts, "--as-pid-1", "--clearenv"];
    for (const [k, v] of Object.entries(env)) out.push("--setenv", k, v);
    out.push("--chdir", BWRAP_WORKDIR, "--");
    return out;
  }

  #track(child: ChildProcess): void {
    this.#children.add(child);
    child.once("exit", () => this.#children.delete(child));
    child.once("error", () => this.#children.delete(child));
  }

  async #checkIdentity(): Promise<void> {
    const st = await fs.stat(this.#opts.hostRoot).catch(() => null);
    this.#assertSame(st);
  }
  #checkIdentitySync(): void {
    let st: { dev: number; ino: number } | null = null;
    try {
      st = lstatSync(this.#opts.hostRoot);
    } catch {
      st = null;
    }
    this.#assertSame(st);
  }
  #assertSame(st: { dev: number; ino: number } | null): void {
    if (!st || st.dev !== this.#identity.dev || st.ino !== this.#identity.ino)
      throw new UnavailableError(
        `workspace folder '${this.#opts.hostRoot}' was removed or replaced since the sandbox was opened; initialize the workspace again`,
      );
  }
}

/** The cwd as the sandbox names it, lexically (bwrap --chdir resolves it inside the sandbox). */
function sandboxCwd(rel: string): string {
  const clean = checkRelativePath(rel, "cwd");
  return clean === "" ? BWRAP_WORKDIR : `${BWRAP_WORKDIR}/${clean}`;
}

function baseEnv(): Record<string, string> {
  return {
    HOME: BWRAP_WORKDIR,
    TMPDIR: "/tmp",
    PATH: BASE_PATH,
    LANG: "C.UTF-8",
    LC_ALL: "C.UTF-8",
    PYTHONUNBUFFERED: "1",
    PYTHONPATH: `${BWRAP_ENV_MOUNT}/python`,
    NODE_PATH: `${BWRAP_ENV_MOUNT}/npm/node_modules`,
  };
}

/** Mount table shared by every command: built once per handle. */
function buildMounts(opts: BubblewrapSandboxOptions): string[] {
  // No capability in the sandbox's user namespace, for the runner and every command (bwrap also sets
  // no_new_privs): the runner is not dumpable, so without CAP_SYS_PTRACE no agent process can trace it,
  // open its /proc/<pid>/mem or fd/*, or take its descriptors with pidfd_getfd.
  const a = ["--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"];
  if (opts.network === "host") a.push("--share-net");
  a.push("--proc", "/proc", "--dev", "/dev");
  a.push("--bind", opts.hostRoot, BWRAP_WORKDIR);
  // A sized tmpfs: a host folder would let the sandbox fill the host's disk.
  if (bwrapSupports(resolveBwrap(opts.bwrap ?? "bwrap"), "--size")) a.push("--perms", "1777", "--size", String(opts.tmpBytes ?? TMP_BYTES), "--tmpfs", "/tmp");
  else a.push("--bind", opts.hostTmp, "/tmp");
  a.push("--tmpfs", "/run", "--dir", "/var", "--tmpfs", "/var/tmp");
  if (existsSync("/usr")) a.push("--ro-bind", "/usr", "/usr");
  a.push("--dir", "/etc");
  for (const name of ETC_FILES) {
    const p = `/etc/${name}`;
    if (existsSync(p)) a.push("--ro-bind", p, p);
  }
  for (const p of ROOT_DIRS) {
    let st;
    try {
      st = lstatSync(p);
    } catch {
      continue;
    }
    if (st.isSymbolicLink()) a.push("--symlink", readlinkSync(p), p);
    else a.push("--ro-bind", p, p);
  }
  if (opts.hostEnvDir) a.push("--ro-bind", opts.hostEnvDir, BWRAP_ENV_MOUNT);
  for (const p of opts.readOnlyPaths ?? []) a.push("--ro-bind", p, p);
  // The sandbox's own root (a tmpfs holding the mount points) becomes read-only; the binds keep their modes.
  a.push("--remount-ro", "/");
  return a;
}

function killGroup(child: ChildProcess): void {
  try {
    if (child.pid) process.kill(-child.pid, "SIGKILL");
  } catch {
    child.kill("SIGKILL");
  }
}
