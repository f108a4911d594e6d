import { forwardingSandbox, SANDBOX_OPERATIONS, type ExecOptions, type Sandbox, type SandboxProcess } from "../sandbox.js";

/** What the handle reports to its workspace. */
export interface ActivityTracker {
  /** Starts one operation (busy and active until the returned end runs); throws when the workspace takes none (closed). */
  begin(): () => void;
}

/** The Sandbox methods that do work (every operation, and spawn); each runs as a tracked operation through the handle. */
const TRACKED = new Set<PropertyKey>([...SANDBOX_OPERATIONS, "spawn"]);

/**
 * The handle `getBackend()` gives out: the backend's own Sandbox (same class, same extra
 * properties) whose every operation counts as activity while it runs, a spawned process for as
 * long as it lives, so an idle sweep never closes or pauses a workspace under a user's command.
 * Once the workspace is closed, operations fail at once with its `closed` error instead of
 * reaching a paused or released backend; `stop()` ends the commands and processes still running
 * (a paused container would freeze them forever) and waits for them, bounded.
 */
export class TrackedSandbox {
  readonly handle: Sandbox;
  /** Operations running through the handle now. */
  #active = 0;
  #drained: (() => void) | undefined;
  /** How to end each running command or process (abort, kill). */
  readonly #stops = new Set<() => void>();

  constructor(sandbox: Sandbox, tracker: ActivityTracker) {
    /** Starts one operation; the returned function ends it (exactly once). */
    const begin = (stop?: () => void): (() => void) => {
      const end = tracker.begin();
      this.#active++;
      if (stop) this.#stops.add(stop);
      return () => {
        if (stop) this.#stops.delete(stop);
        end();
        if (--this.#active === 0 && this.#drained) this.#drained();
      };
    };
    /** Runs one asynchronous operation: a rejected promise (never a throw) when refused. */
    const run = (call: () => unknown, stop?: () => void, after?: () => void): Promise<unknown> => {
      let finish: () => void;
      try {
        finish = begin(stop);
      } catch (e) {
        after?.();
        return Promise.reject(e);
      }
      const done = () => {
        after?.();
        finish();
      };
      let started: unknown;
      try {
        started = call();
      } catch (e) {
        done();
        return Promise.reject(e);
      }
      const result = started instanceof Promise ? started : Promise.resolve(started);
      // Bookkeeping on a side branch, registered first so it runs before the caller resumes; the
      // caller awaits the backend's own promise (no extra hop on every file operation).
      result.then(done, done);
      return result;
    };
    const wrap = (prop: PropertyKey, fn: (...args: unknown[]) => unknown): ((...args: never[]) => unknown) => {
      if (prop === "spawn")
        return (...args: unknown[]): SandboxProcess => {
          let proc: SandboxProcess | undefined;
          const finish = begin(() => proc?.kill());
          try {
            proc = fn(...args) as SandboxProcess;
          } catch (e) {
            finish();
            throw e;
          }
          // Busy for as long as the process lives.
          proc.exited.then(finish, finish);
          return proc;
        };
      if (prop === "exec")
        return (argv: string[], options: ExecOptions = {}): Promise<unknown> => {
          // Our own signal, so a closing workspace can end the command; the caller's still works.
          const abort = new AbortController();
          const forward = () => abort.abort();
          if (options.signal?.aborted) abort.abort();
          options.signal?.addEventListener("abort", forward, { once: true });
          return run(
            () => fn(argv, { ...options, signal: abort.signal }),
            forward,
            () => options.signal?.removeEventListener("abort", forward),
          );
        };
      return (...args: unknown[]): Promise<unknown> => run(() => fn(...args));
    };
    this.handle = forwardingSandbox(sandbox, (prop, fn) => (TRACKED.has(prop) ? (wrap(prop, fn) as (...args: unknown[]) => unknown) : undefined));
  }

  /** Operations running through the handle now. */
  get running(): number {
    return this.#active;
  }

  /** Ends running commands and processes (abort, kill) and waits for every operation to settle, at most `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    if (this.#active === 0) return;
    for (const stop of [...this.#stops]) stop();
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.#drained = resolve;
      timer = setTimeout(resolve, graceMs);
      timer.unref();
    });
    this.#drained = undefined;
    clearTimeout(timer);
  }
}
