import { statSync } from "node:fs";
import type Docker from "dockerode";
import { silentLogger, type Logger } from "../../logger.js";
import { RunnerSandbox } from "../../kit/runner-sandbox.js";
import { RunnerSupervisor, type RunnerClient, type RunnerLease } from "../../kit/runner/index.js";
import { DockerPlain, DOCKER_WORKDIR, mapDockerError } from "./plain.js";
import { startDockerRunner, type DockerRunnerTransport } from "./runner.js";

export { DOCKER_WORKDIR, mapDockerError } from "./plain.js";

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
export class DockerSandbox extends RunnerSandbox {
  readonly kind = "docker";
  readonly workdir = DOCKER_WORKDIR;
  readonly persistent: boolean;
  readonly #docker: Docker;
  readonly #container: Docker.Container;
  readonly #env: string[];
  readonly #hostShared: boolean;
  readonly #logger: Logger;
  readonly #runners: RunnerSupervisor;
  #plain: DockerPlain | undefined;
  #closed = false;
  #inflight = 0;
  /** Processes spawned through the runner and still running: a runner serving one is never parked. */
  #spawns = 0;
  #watch: NodeJS.Timeout | undefined;

  constructor(docker: Docker, containerId: string, options: DockerSandboxOptions) {
    super();
    this.#docker = docker;
    this.#hostShared = !!options.hostRoot;
    this.#logger = options.logger ?? silentLogger;
    this.#container = docker.getContainer(containerId);
    this.persistent = options.persistent;
    this.#env = Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`);
    const device = hostDevice(options.hostRoot);
    this.#runners = new RunnerSupervisor(() => startDockerRunner(this.#docker, this.#container, this.#env, DOCKER_WORKDIR, this.#hostShared, device));
    if (options.plain) this.decide("plain");
    const parked = PARKED.get(this.#parkKey);
    if (parked && !options.plain) {
      PARKED.delete(this.#parkKey);
      if (this.#runners.adopt(parked)) this.decide("runner");
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

  /** Whether the live runner's calls skip dockerd over its private pipe pair (for tests). */
  get runnerChannel(): "transport" | "private" | undefined {
    return this.#runners.current?.channel;
  }

  /** pid (inside the container) is not known here; the runner's liveness is, for tests. */
  get runnerAlive(): boolean {
    return this.#runners.current !== undefined;
  }

  /** Images without python3: one engine exec per command, sh scripts for files. */
  protected plain(): DockerPlain {
    return (this.#plain ??= new DockerPlain(this.#docker, this.#container, this.#env));
  }

  protected async probe(): Promise<boolean> {
    const lease: RunnerLease = this.#closed ? this.#runners.oneShot() : { client: this.#runners.get() };
    const transport = lease.client.transport as DockerRunnerTransport;
    try {
      await lease.client.ready;
      return true;
    } catch {
      // The engine refused the exec itself (paused, stopped, gone): an error now, another try next call.
      const api = transport.apiError();
      if (api) throw mapDockerError(api, "start the sandbox runner");
      const code = await transport.exitCode();
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
   * A spawned process's lease is not watched like a call (a server may live as long as the handle);
   * it only keeps the runner from parking.
   */
  protected async lease(use: "call" | "spawn"): Promise<RunnerLease> {
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
    if (use === "spawn") this.#spawns++;
    else if (this.#inflight++ === 0) {
      this.#watch = setInterval(() => void this.#checkRunning(), WATCH_MS);
      this.#watch.unref();
    }
    let released = false;
    return {
      client: lease.client,
      release: () => {
        if (released) return;
        released = true;
        if (use === "spawn") this.#spawns--;
        else if (--this.#inflight === 0) clearInterval(this.#watch);
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
        !info
          ? "the workspace container is gone"
          : info.State?.Paused
            ? "the workspace container was paused; initialize the workspace to resume it"
            : "the workspace container stopped",
      );
  }

  /** Kills every process this handle spawned (e.g. MCP servers) and drops their streams. */
  async close(): Promise<void> {
    this.#closed = true;
    // An idle runner is parked for the next handle on this container (see PARKED); a busy one stops.
    const idle = this.#inflight === 0 && this.#spawns === 0 ? this.#runners.detach() : undefined;
    if (idle) park(this.#parkKey, idle);
    await this.#runners.stop();
    await this.#plain?.close();
  }
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
