/**
 * The in-sandbox runner, written once for every sandboxed backend: its Python source, the host-side
 * client and the file operations over it. A backend only says how to start the process with stdin and
 * stdout (a RunnerTransport); the supervisor starts it on first use and again after it died.
 */
import type { ExecOptions, ExecResult } from "../../sandbox.js";
import { checkRelativePath } from "../../paths.js";
import { DEFAULT_MAX_OUTPUT } from "../../util/process.js";
import { RunnerClient, type RunnerClientOptions, type RunnerTransport } from "./client.js";
import { cwdError } from "./files.js";

export { RUNNER_SOURCE } from "./source.js";
export { CALL_TIMEOUT_MS, KILL_GRACE_MS, MAX_DATA_FRAME, MAX_HEADER_BYTES, MAX_LIST_BYTES, MAX_READ_BYTES, RunnerClient } from "./client.js";
export { RunnerFailure, runnerGone, type RemoteFiles, type RunnerClientOptions, type RunnerExec, type RunnerSpawn } from "./client.js";
export { type RunnerTransport } from "./client.js";
export { RunnerFiles, cwdError, mapRunnerError, type RunnerLease } from "./files.js";
export { spawnThroughRunner, SPAWN_WINDOW } from "./spawn.js";

/**
 * `Sandbox.exec` through a runner: `env` is what the backend puts under the caller's variables (the
 * runner adds them over its own environment); a cwd the runner refused becomes LocalSandbox's error.
 */
export async function runnerExec(client: RunnerClient, argv: string[], options: ExecOptions, env: Record<string, string>): Promise<ExecResult> {
  const rel = checkRelativePath(options.cwd ?? "", "cwd");
  try {
    return await client.exec({
      argv,
      cwd: rel,
      env: { ...env, ...options.env },
      stdin: options.stdin,
      maxOutputBytes: options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT,
      timeoutMs: options.timeoutMs,
      signal: options.signal,
    });
  } catch (e) {
    throw cwdError(e, rel);
  }
}

/** argv that runs the runner with a given interpreter; `root` is the workspace root as the sandbox sees it. */
export function runnerArgv(python: string, root: string, source: string): string[] {
  return [python, "-I", "-S", "-c", source, root];
}

/** Where systemPythonArgv looks for python3, in order: image folders, never the caller's PATH. */
export const SYSTEM_PYTHON_DIRS = ["/usr/local/bin", "/usr/bin", "/bin"] as const;
const FIND_PYTHON = `for d in ${SYSTEM_PYTHON_DIRS.join(" ")}; do [ -x "$d/python3" ] && exec "$d/python3" "$@"; done; echo "python3: not found in ${SYSTEM_PYTHON_DIRS.join(" ")}" >&2; exit 127`;

/**
 * runnerArgv with python3 taken from the image's own folders rather than the sandbox's PATH, which may
 * name a folder the agent writes (a venv in the workspace): the next runner must not start from what the
 * agent put there. With a read-only root filesystem those folders are out of the agent's reach too.
 * Exits 127 like a missing interpreter when none is there.
 */
export function systemPythonArgv(root: string, source: string): string[] {
  return ["/bin/sh", "-c", FIND_PYTHON, "python3", ...runnerArgv("python3", root, source).slice(1)];
}

/**
 * One live runner per sandbox handle: `get` hands it out, starting a fresh one when there is none or the
 * last one died (synchronously, so concurrent first calls share one). A different `key` (say, a swapped
 * package folder the runner has mounted) retires the old runner once its calls are done.
 */
export class RunnerSupervisor {
  readonly #start: () => RunnerTransport;
  readonly #options: RunnerClientOptions;
  #current: RunnerClient | undefined;
  #key = "";
  readonly #retired = new Set<RunnerClient>();

  /** `options` tune every runner it starts (deadlines, the read cap); the defaults suit every backend. */
  constructor(start: () => RunnerTransport, options: RunnerClientOptions = {}) {
    this.#start = start;
    this.#options = options;
  }

  get current(): RunnerClient | undefined {
    return this.#current?.alive ? this.#current : undefined;
  }

  get(key = ""): RunnerClient {
    if (this.#current?.alive && key === this.#key) return this.#current;
    const old = this.#current;
    if (old) {
      this.#retired.add(old);
      void old.exited.then(() => this.#retired.delete(old));
      old.retire();
    }
    this.#key = key;
    this.#current = new RunnerClient(this.#start(), this.#options);
    return this.#current;
  }

  /** Hands the live runner over without stopping it (see DockerSandbox's parking); the supervisor forgets it. */
  detach(): RunnerClient | undefined {
    const r = this.current;
    if (r) this.#current = undefined;
    return r;
  }

  /** Takes over a live runner another supervisor detached, when this one has none yet. */
  adopt(client: RunnerClient, key = ""): boolean {
    if (this.#current || !client.alive) return false;
    this.#current = client;
    this.#key = key;
    return true;
  }

  /** A runner for one call only, stopped when `release` is called (used after the handle closed). */
  oneShot(): { client: RunnerClient; release: () => void } {
    const client = new RunnerClient(this.#start(), this.#options);
    return { client, release: () => void client.stop() };
  }

  /** Stops the live runner and any retired one still finishing. */
  async stop(): Promise<void> {
    const r = this.#current;
    this.#current = undefined;
    await Promise.all([r?.stop(), ...[...this.#retired].map((x) => x.stop())]);
  }
}
