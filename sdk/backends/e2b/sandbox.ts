// The Sandbox over E2B's SDK: the runner path (one background command per sandbox handle); the fallback
// for sandboxes without python3 is plain.ts.
import type { Sandbox as E2BSdkSandbox } from "e2b";
import { UnavailableError, WorkspaceError } from "../../errors.js";
import type { ExecResult } from "../../sandbox.js";
import { silentLogger, type Logger } from "../../logger.js";
import { RunnerSupervisor, type RemoteFiles, type RunnerClient, type RunnerLease } from "../../kit/runner/index.js";
import { RunnerSandbox } from "../../kit/runner-sandbox.js";
import { e2bError } from "./client.js";
import { E2BPlain } from "./plain.js";
import { startE2BRunner, type E2BRunnerTransport } from "./runner.js";
import { E2B_WORKDIR } from "./scripts.js";

export { E2B_WORKDIR } from "./scripts.js";

export interface E2BSandboxOptions {
  /** Called as every operation starts: renews the sandbox's keep-alive (see E2BDriver). */
  touch?: () => void;
  /** The API key, scrubbed from any error text. */
  secret?: string;
  /** Told once when the sandbox has no python3 and falls back to one command per call. */
  logger?: Logger | undefined;
}

/**
 * A running E2B sandbox as a Sandbox. Commands, spawned processes and every file operation go through
 * one long-lived runner per handle (sdk/kit/runner), an E2B background command with stdin
 * whose paths are all resolved inside the sandbox, descriptor-relative with O_NOFOLLOW; its output
 * crosses as base64 text (E2B decodes command output as UTF-8), so bytes are exact both ways. A sandbox
 * without python3 falls back to one E2B command per exec and files-API transfers plus confined scripts
 * (plain.ts), said once in the log.
 */
export class E2BSandbox extends RunnerSandbox {
  readonly kind = "e2b";
  readonly workdir = E2B_WORKDIR;
  readonly persistent = true;
  readonly #sbx: E2BSdkSandbox;
  readonly #touch: () => void;
  readonly #secret: string | undefined;
  readonly #logger: Logger;
  readonly #runners: RunnerSupervisor;
  #plain: E2BPlain | undefined;
  #closed = false;
  /** The SDK error behind the last runner's end (a lost stream, a refused send): what a call it failed reports. */
  #apiError: unknown;

  constructor(sbx: E2BSdkSandbox, options: E2BSandboxOptions = {}) {
    super();
    this.#sbx = sbx;
    this.#touch = options.touch ?? (() => undefined);
    this.#secret = options.secret;
    this.#logger = options.logger ?? silentLogger;
    // Big files cross the files API at the runner's descriptors (see RemoteFiles); said once if that fails.
    let warned = false;
    const remote: RemoteFiles = {
      upload: async (p, data) => {
        const body = new Uint8Array(data.byteLength);
        body.set(data);
        await this.#sbx.files.write(p, body.buffer, { useOctetStream: true });
      },
      download: async (p) => {
        const bytes = await this.#sbx.files.read(p, { format: "bytes" });
        return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      },
      // envd's upload is a stat, a chown, an open for writing (O_TRUNC) and a copy: a pipe's end takes it as a file would.
      streams: true,
      fellBack: (e) => {
        if (warned) return;
        warned = true;
        this.#logger.warn(
          "e2b files API could not transfer a file at the sandbox runner's descriptor; big files go through the runner's command streams instead",
          {
            sandboxId: this.#sbx.sandboxId,
            error: String((e2bError(e, "transfer a file", this.#secret) as Error)?.message ?? e),
          },
        );
      },
    };
    this.#runners = new RunnerSupervisor(() => {
      this.#apiError = undefined;
      return startE2BRunner(this.#sbx, E2B_WORKDIR, (e) => (this.#apiError = e), remote);
    });
  }

  get sandboxId(): string {
    return this.#sbx.sandboxId;
  }

  /** The live runner's envd pid (for tests), if one runs. */
  get runnerPid(): number | undefined {
    return this.#runners.current?.pid;
  }

  /** Every operation renews the sandbox's keep-alive. */
  protected override enter(): void {
    this.#touch();
  }

  /** Sandboxes without python3: one E2B command per exec, files-API transfers plus confined scripts. */
  protected plain(): E2BPlain {
    return (this.#plain ??= new E2BPlain(this.#sbx, this.#touch, this.#secret));
  }

  /** Stopped under the call because the sandbox went away (or was paused): that, not "runner stopped". */
  protected override checkRunnerExec(r: ExecResult, client: RunnerClient): void {
    const api = (client.transport as E2BRunnerTransport).apiError();
    if (r.exitCode === -1 && !r.timedOut && api !== undefined && !client.alive) throw this.#lost(api);
  }

  /** Ends the runner (and with it every command and process it runs) and what this handle spawned without it; the sandbox itself is the driver's. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([this.#runners.stop(), this.#plain?.close()]);
  }

  protected async probe(): Promise<boolean> {
    const lease: RunnerLease = this.#closed ? this.#runners.oneShot() : { client: this.#runners.get() };
    const transport = lease.client.transport as E2BRunnerTransport;
    try {
      await lease.client.ready;
      return true;
    } catch (e) {
      // E2B refused the command itself (a paused or gone sandbox): an error now, another try next call.
      const code = await transport.exitCode();
      const api = transport.apiError();
      if (code === null) throw api !== undefined ? e2bError(api, "start the sandbox runner", this.#secret) : e;
      this.#logger.warn("e2b sandbox cannot run the sandbox runner (no python3?); falling back to one command per exec and file operation", {
        sandboxId: this.#sbx.sandboxId,
        exitCode: code,
      });
      return false;
    } finally {
      if (this.#closed) lease.release?.();
    }
  }

  /** The live runner for one call (started when there is none); after close() a runner of its own, stopped when the call is done. */
  protected async lease(): Promise<RunnerLease> {
    const lease: RunnerLease = this.#closed ? this.#runners.oneShot() : { client: this.#runners.get() };
    try {
      await lease.client.ready;
    } catch (e) {
      lease.release?.();
      const api = (lease.client.transport as E2BRunnerTransport).apiError();
      throw api !== undefined ? e2bError(api, "start the sandbox runner", this.#secret) : e;
    }
    return lease;
  }

  /** A file call through the runner: one the runner's end failed reports why it ended (the sandbox gone or paused). */
  protected override async guard<T>(fn: () => Promise<T>, idempotent: boolean, again = true): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      const api = this.#apiError;
      if (!(e instanceof UnavailableError) || api === undefined || !/sandbox runner stopped/.test(e.message)) throw e;
      const mapped = this.#lost(api);
      // A call that only reads (or whose repeat changes nothing) is sent once more, to a fresh runner.
      if (idempotent && again && mapped instanceof UnavailableError && !this.#closed) return this.guard(fn, idempotent, false);
      throw mapped;
    }
  }

  /**
   * Why the runner's end failed a call: the sandbox gone is not_found; a lost stream (a pause drops every
   * connection, and a call sent before the loss showed may have run or not) is unavailable, for a retry.
   */
  #lost(api: unknown): unknown {
    const mapped = e2bError(api, "use the e2b sandbox", this.#secret);
    if (mapped instanceof WorkspaceError && mapped.code === "internal")
      return new UnavailableError(
        `the connection to the e2b sandbox's runner was lost (the sandbox paused?); the next call starts a new runner: ${mapped.message}`,
        {
          cause: api,
        },
      );
    return mapped;
  }
}
