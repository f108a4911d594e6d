import type { ExecOptions, Sandbox, SandboxProcess } from "../sandbox.js";

/** What the handle reports to its workspace. */
export interface ActivityTracker {
  /** Starts one operation (busy and active until the returned end runs); throws when the workspace takes none (closed). */
  begin(): () => void;
}

/** The Sandbox methods that do work; each runs as a tracked operation through the handle. */
const TRACKED = new Set<PropertyKey>(["exec", "readFile", "writeFile", "appendFile", "list", "stat", "remove", "mkdir", "rename", "copyIn", "readDirTyped", "copyTree", "createFile"]);

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
  readonly #running = new Set<{ settled: Promise<unknown>; stop: () => void }>();

  constructor(sandbox: Sandbox, tracker: ActivityTracker) {
    const running = this.#running;
    const wrappers = new Map<PropertyKey, unknown>();
    const wrap = (prop: PropertyKey, fn: (...args: unknown[]) => unknown): unknown => {
      if (prop === "spawn")
        return (...args: unknown[]): SandboxProcess => {
          const end = tracker.begin();
          let proc: SandboxProcess;
          try {
            proc = fn.apply(sandbox, args) as SandboxProcess;
          } catch (e) {
            end();
            throw e;
          }
          const entry = { settled: proc.exited.then(end, end), stop: () => proc.kill() };
          running.add(entry);
          void entry.settled.finally(() => running.delete(entry));
          return proc;
        };
      if (prop === "exec")
        return (argv: string[], options: ExecOptions = {}): Promise<unknown> => {
          let end: () => void;
          try {
            end = tracker.begin();
          } catch (e) {
            return Promise.reject(e);
          }
          // Our own signal, so a closing workspace can end the command; the caller's still works.
          const abort = new AbortController();
          const forward = () => abort.abort();
          if (options.signal?.aborted) abort.abort();
          options.signal?.addEventListener("abort", forward, { once: true });
          const done = () => {
            options.signal?.removeEventListener("abort", forward);
            end();
          };
          let started: unknown;
          try {
            started = fn.call(sandbox, argv, { ...options, signal: abort.signal });
          } catch (e) {
            done();
            return Promise.reject(e);
          }
          const result = Promise.resolve(started).finally(done);
          const entry = { settled: result.catch(() => undefined), stop: forward };
          running.add(entry);
          void entry.settled.finally(() => running.delete(entry));
          return result;
        };
      return (...args: unknown[]): Promise<unknown> => {
        let end: () => void;
        try {
          end = tracker.begin();
        } catch (e) {
          return Promise.reject(e);
        }
        let started: unknown;
        try {
          started = fn.apply(sandbox, args);
        } catch (e) {
          end();
          return Promise.reject(e);
        }
        const result = Promise.resolve(started).finally(end);
        const entry = { settled: result.catch(() => undefined), stop: () => undefined };
        running.add(entry);
        void entry.settled.finally(() => running.delete(entry));
        return result;
      };
    };
    this.handle = new Proxy(sandbox, {
      get(target, prop) {
        // The target as receiver: backends keep state in private fields, which a proxy receiver cannot reach.
        const value: unknown = Reflect.get(target, prop, target);
        if (typeof value !== "function") return value;
        let wrapper = wrappers.get(prop);
        if (wrapper === undefined) {
          const fn = value as (...args: unknown[]) => unknown;
          wrapper = TRACKED.has(prop) || prop === "spawn" ? wrap(prop, fn) : fn.bind(target);
          wrappers.set(prop, wrapper);
        }
        return wrapper;
      },
    });
  }

  /** Operations running through the handle now. */
  get running(): number {
    return this.#running.size;
  }

  /** Ends running commands and processes (abort, kill) and waits for every operation to settle, at most `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    if (this.#running.size === 0) return;
    const entries = [...this.#running];
    for (const e of entries) e.stop();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(entries.map((e) => e.settled)),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, graceMs);
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
  }
}
