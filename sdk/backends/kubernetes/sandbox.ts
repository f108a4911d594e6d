import { randomBytes } from "node:crypto";
import { PassThrough } from "node:stream";
import { InternalError, InvalidArgumentError } from "../../errors.js";
import type { SandboxProcess, SpawnOptions } from "../../sandbox.js";
import { checkRelativePath } from "../../paths.js";
import { RunnerSupervisor, type RunnerLease } from "../../kit/runner/index.js";
import { RunnerSandbox } from "../../kit/runner-sandbox.js";
import { exitCodeOf, openExec, startK8sRunner, type K8sRunnerTransport, type PodRef } from "./exec.js";
import { WORKDIR } from "./names.js";

/** How long starting the runner waits out an API server that does not answer (a restart takes seconds). */
const RUNNER_RETRY_MS = 60_000;
/** Every process `spawn` starts carries this marker in its environment, so it (and its children) can be killed from inside. */
const MARKER = "AGENTWS_SPAWN";
const KILL_SCRIPT = `for d in /proc/[0-9]*; do
  if grep -qsxz "${MARKER}=$1" "$d/environ" 2>/dev/null; then kill -9 "\${d#/proc/}" 2>/dev/null; fi
done; exit 0`;
/**
 * spawn's wrapper: the cwd is resolved inside the Pod and must stay in the workspace, then the
 * command runs with the given environment added (an exec over the API has no cwd or env of its own).
 */
const SPAWN_SCRIPT = `p=$(realpath -e -- "$1") || { echo "spawn: no such directory: $1" >&2; exit 127; }
case "$p" in ${WORKDIR}|${WORKDIR}/*) ;; *) echo "spawn: cwd leaves the workspace" >&2; exit 126;; esac
cd "$p" || exit 127; shift; exec env "$@"`;

/**
 * A running workspace Pod as a Sandbox. Commands and file operations go through ONE long-lived
 * runner process in the Pod (sdk/kit/runner), attached by one exec websocket: a
 * command is a frame on it, not an exec of its own, and every path is resolved inside the Pod's
 * own view (no host-side file access). `spawn` (stdio MCP servers) has an exec of its own, its
 * stdin attached.
 */
export class K8sSandbox extends RunnerSandbox {
  readonly kind = "kubernetes";
  readonly workdir = WORKDIR;
  readonly persistent = true;
  readonly #target: PodRef;
  readonly #runners: RunnerSupervisor;
  readonly #live = new Map<string, { close(): void; done: Promise<unknown> }>();
  #closed = false;

  constructor(target: PodRef) {
    super();
    this.#target = target;
    this.#runners = new RunnerSupervisor(() => startK8sRunner(this.#target));
    // Every Pod runs the runner (the image is ours): there is no plain side to choose.
    this.decide("runner");
  }

  get podName(): string {
    return this.#target.pod;
  }

  /** Whether a runner is connected (for tests). */
  get runnerAlive(): boolean {
    return this.#runners.current !== undefined;
  }

  protected probe(): Promise<boolean> {
    return Promise.resolve(true);
  }

  protected plain(): never {
    throw new InternalError("a Kubernetes workspace always runs the sandbox runner");
  }

  /** Commands and files go through the runner (RunnerSandbox); a spawned process has an exec of its own, its stdin attached. */
  override spawn(argv: string[], options: SpawnOptions = {}): SandboxProcess {
    if (argv.length === 0) throw new InvalidArgumentError("spawn: argv must not be empty", { field: "argv", fieldPrefix: false });
    const rel = checkRelativePath(options.cwd ?? "", "cwd");
    const marker = randomBytes(8).toString("hex");
    const env = Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`);
    const x = openExec(this.#target, ["/bin/sh", "-c", SPAWN_SCRIPT, "sh", rel ? `${WORKDIR}/${rel}` : WORKDIR, `${MARKER}=${marker}`, ...env, ...argv]);
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    x.stdout.pipe(stdout);
    x.stderr.pipe(stderr);
    let killed = false;
    const exited = x.done.then(({ status, error }) => {
      this.#live.delete(marker);
      if (error) {
        stderr.write(`spawn failed: ${String((error as Error).message ?? error).slice(0, 300)}\n`);
        return 127;
      }
      return killed ? null : exitCodeOf(status);
    });
    const entry = { close: () => x.close(), done: exited };
    this.#live.set(marker, entry);
    return {
      stdin: x.stdin,
      stdout,
      stderr,
      exited,
      kill: () => {
        killed = true;
        void this.#killMarker(marker).finally(() => x.close());
      },
    };
  }

  /**
   * The live runner for one call; after close() a runner of its own, stopped when the call is done.
   * An API server that is restarting is waited for (RUNNER_RETRY_MS); a refusal is the caller's error.
   */
  protected async lease(): Promise<RunnerLease> {
    const until = Date.now() + RUNNER_RETRY_MS;
    for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
      const lease: RunnerLease = this.#closed ? this.#runners.oneShot() : { client: this.#runners.get() };
      try {
        await lease.client.ready;
        return lease;
      } catch (e) {
        lease.release?.();
        const t = lease.client.transport as K8sRunnerTransport;
        if (t.transientError() && Date.now() + delay < until) {
          await new Promise((r) => setTimeout(r, delay));
          continue;
        }
        // The API refused the exec (the Pod is gone or not running, RBAC): its clear error, not "runner stopped".
        throw t.apiError() ?? e;
      }
    }
  }

  async #killMarker(marker: string): Promise<void> {
    const lease = await this.lease().catch(() => undefined);
    if (!lease) return;
    try {
      await lease.client.exec({ argv: ["sh", "-c", KILL_SCRIPT, "sh", marker], cwd: "", env: {}, maxOutputBytes: 4096, timeoutMs: 10_000 });
    } finally {
      lease.release?.();
    }
  }

  /** Kills every process this handle spawned (MCP servers), then ends the runner's exec. */
  async close(): Promise<void> {
    const live = [...this.#live.entries()];
    await Promise.all(
      live.map(async ([marker, entry]) => {
        await this.#killMarker(marker).catch(() => undefined);
        entry.close();
        await Promise.race([entry.done, new Promise((r) => setTimeout(r, 2000).unref())]);
      }),
    );
    this.#closed = true;
    await this.#runners.stop();
  }
}
