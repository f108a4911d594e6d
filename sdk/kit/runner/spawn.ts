import { Readable, Writable } from "node:stream";
import type { SandboxProcess } from "../../sandbox.js";
import type { RunnerSpawn, RunnerSpawnChannel } from "./client.js";
import { cwdError, type RunnerLease } from "./files.js";

/** Unacknowledged bytes per stream, each way: what a flooding process can have in flight (then its pipe fills). */
export const SPAWN_WINDOW = 1 << 20;
/** Consumed output is acknowledged in batches of at least this much (the window is far larger, so nothing stalls). */
const ACK_MIN = 64 << 10;

/**
 * `Sandbox.spawn` through the runner: a process whose stdio is streamed over the runner's channel, with
 * the backpressure of a real pipe both ways. Output is acknowledged only once the caller consumed it, so a
 * process flooding stdout to a slow reader waits on its own pipe inside the sandbox; stdin writes wait
 * for the process to take them. `open` lends the runner (asynchronously: a backend may have to start it)
 * or, where there is none (no python3), hands a process started some other way, whose streams are piped
 * through. The lease is released when the process is gone.
 */
export function spawnThroughRunner(open: Promise<RunnerLease | SandboxProcess>, req: RunnerSpawn): SandboxProcess {
  return new RunnerProcess(open, req);
}

/** Where the stdin side goes: the runner's channel, or the fallback's own process. */
interface Target {
  write(chunk: Buffer, cb: () => void): void;
  end(): void;
  kill(): void;
  /** The reader of stream 1 or 2 wants more. */
  more(stream: 1 | 2): void;
}

class RunnerProcess implements SandboxProcess {
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly stderr: Readable;
  readonly exited: Promise<number | null>;
  #target: Target | undefined;
  #killed = false;
  #ended = false;
  #resolveExit!: (code: number | null) => void;
  /** stdin bytes sent but not yet written to the process; the write callback waiting for room. */
  #inFlight = 0;
  #blocked: (() => void) | undefined;
  readonly #received = { 1: 0, 2: 0 };
  readonly #acked = { 1: 0, 2: 0 };

  constructor(open: Promise<RunnerLease | SandboxProcess>, req: RunnerSpawn) {
    this.exited = new Promise((resolve) => (this.#resolveExit = resolve));
    this.stdout = new Readable({ highWaterMark: ACK_MIN, read: () => this.#target?.more(1) });
    this.stderr = new Readable({ highWaterMark: ACK_MIN, read: () => this.#target?.more(2) });
    const target = open.then(
      (got) => (this.#target = "exited" in got ? this.#adopt(got) : this.#start(got, req)),
      (e: unknown) => this.#end(127, `spawn failed: ${e instanceof Error ? e.message : String(e)}\n`),
    );
    this.stdin = new Writable({
      // A write after the end is dropped, as bytes into a pipe nobody reads any more.
      write: (chunk: Buffer, _enc, cb) => void target.then((t) => (t && !this.#ended ? t.write(chunk, cb) : cb())),
      final: (cb) => void target.then((t) => (t?.end(), cb())),
    });
    this.stdin.on("error", () => undefined);
  }

  kill(): void {
    this.#killed = true;
    this.#target?.kill();
  }

  #start(lease: RunnerLease, req: RunnerSpawn): Target | undefined {
    if (this.#killed) {
      lease.release?.();
      return this.#end(null);
    }
    void this.exited.then(() => lease.release?.());
    const ch = lease.client.spawn(req, SPAWN_WINDOW, {
      output: (stream, data) => {
        this.#received[stream] += data.length;
        (stream === 1 ? this.stdout : this.stderr).push(data);
      },
      written: (n) => {
        this.#inFlight -= n;
        if (this.#inFlight < SPAWN_WINDOW) this.#unblock();
      },
      exit: (code) => this.#end(code < 0 ? null : code),
      // A refused cwd reads as LocalSandbox's error for it; the runner's death as itself.
      failed: (e, code) => this.#end(code, `spawn ${req.argv[0] ?? ""}: ${(cwdError(e, req.cwd) as Error).message}\n`),
    });
    return {
      write: (chunk, cb) => {
        ch.write(chunk);
        this.#inFlight += chunk.length;
        if (this.#inFlight < SPAWN_WINDOW) cb();
        else this.#blocked = cb;
      },
      end: () => ch.end(),
      kill: () => ch.kill(),
      more: (stream) => this.#acknowledge(ch, stream),
    };
  }

  /** Acknowledges what the reader of `stream` has taken since the last time (called when it wants more). */
  #acknowledge(ch: RunnerSpawnChannel, stream: 1 | 2): void {
    const readable = stream === 1 ? this.stdout : this.stderr;
    const taken = this.#received[stream] - readable.readableLength;
    if (taken - this.#acked[stream] < ACK_MIN) return;
    ch.consumed(stream, taken - this.#acked[stream]);
    this.#acked[stream] = taken;
  }

  /** A process started without the runner (the fallback): its streams are piped through, with their backpressure. */
  #adopt(p: SandboxProcess): Target {
    const pump = (from: Readable, to: Readable) => from.on("data", (c: Buffer) => to.push(c) || from.pause());
    pump(p.stdout, this.stdout);
    pump(p.stderr, this.stderr);
    // A stdin that broke (the process closed it) never drains: the writer is let go.
    p.stdin.on("error", () => this.#unblock());
    p.stdin.on("close", () => this.#unblock());
    if (this.#killed) p.kill();
    void Promise.all([ended(p.stdout), ended(p.stderr), p.exited]).then(([, , code]) => this.#end(code));
    return {
      write: (chunk, cb) => {
        if (p.stdin.write(chunk)) return cb();
        this.#blocked = cb;
        p.stdin.once("drain", () => this.#unblock());
      },
      end: () => p.stdin.end(),
      kill: () => p.kill(),
      more: (stream) => (stream === 1 ? p.stdout : p.stderr).resume(),
    };
  }

  #end(code: number | null, why?: string): undefined {
    if (this.#ended) return;
    this.#ended = true;
    if (why) this.stderr.push(why);
    this.stdout.push(null);
    this.stderr.push(null);
    this.#unblock();
    this.#resolveExit(code);
  }

  #unblock(): void {
    const cb = this.#blocked;
    this.#blocked = undefined;
    cb?.();
  }
}

function ended(s: Readable): Promise<void> {
  return new Promise((resolve) => {
    if (s.readableEnded || s.destroyed) return resolve();
    s.once("end", resolve);
    s.once("close", resolve);
  });
}
