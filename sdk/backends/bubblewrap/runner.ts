import type { ChildProcess } from "node:child_process";
import type { ExecResult } from "../../sandbox.js";
import { EXEC_HELPER_SOURCE } from "./exec-helper.js";
import { BwrapLauncher } from "./launch.js";

/** One command for the runner; env is the complete environment (the runner adds nothing). */
export interface RunnerRequest {
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  stdin?: Uint8Array | string | undefined;
  maxOutputBytes: number;
  timeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
}

interface Pending {
  resolve: (r: ExecResult) => void;
  killed: boolean;
  cleanup: () => void;
}

/**
 * One long-lived bwrap running the exec helper: execs are framed requests on its stdin, multiplexed by
 * id, answered on its stdout. `bwrapArgs` is the full bwrap argv up to and including `--`; the helper
 * command is appended. Stopped by `stop()`; once it has died it cannot be reused (make a new one).
 */
export class ExecRunner {
  readonly #child: ChildProcess;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #buf: Buffer = Buffer.alloc(0);
  #dead = false;
  #retired = false;
  #spawnFailed = false;
  #stderr = "";
  readonly exited: Promise<void>;

  /** `bwrap`: the binary, or the sandbox's launcher (environment and cgroup). */
  constructor(bwrap: string | BwrapLauncher, bwrapArgs: string[]) {
    const launcher = typeof bwrap === "string" ? new BwrapLauncher({ bwrap }) : bwrap;
    this.#child = launcher.spawn([...bwrapArgs, "/usr/bin/python3", "-I", "-S", "-c", EXEC_HELPER_SOURCE]);
    this.#child.stdout!.on("data", (c: Buffer) => this.#onData(c));
    // Keep the tail of the helper's stderr to explain a failure to start (bwrap or python3 missing).
    this.#child.stderr!.on("data", (c: Buffer) => (this.#stderr = (this.#stderr + c.toString()).slice(-2000)));
    this.#child.stdin!.on("error", () => undefined);
    this.exited = new Promise((resolve) => {
      const done = () => {
        this.#die();
        resolve();
      };
      this.#child.once("error", (e: NodeJS.ErrnoException) => {
        // bwrap itself missing: like a failed spawn of a per-command bwrap, every pending exec is exit 127.
        this.#spawnFailed = e.code === "ENOENT" || e.code === "EACCES";
        this.#stderr = String(e.message);
        done();
      });
      this.#child.once("close", done);
    });
    this.#idle();
  }

  get alive(): boolean {
    return !this.#dead && !this.#retired;
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  exec(req: RunnerRequest): Promise<ExecResult> {
    if (!this.alive) return Promise.resolve(stopped(this.#stderr));
    const id = this.#nextId++;
    const stdin = req.stdin === undefined ? Buffer.alloc(0) : Buffer.from(req.stdin);
    const bad = badField(req);
    if (bad) return Promise.resolve({ exitCode: 127, stdout: Buffer.alloc(0), stderr: Buffer.from(`${req.argv[0] ?? ""}: ${bad}`), timedOut: false, truncated: false });
    const env = Object.entries(req.env).map(([k, v]) => `${k}=${v}`);
    const header = Buffer.from(["x", String(id), String(req.maxOutputBytes), req.cwd, String(req.argv.length), ...req.argv, ...env].join("\0"));
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const kill = () => {
        const p = this.#pending.get(id);
        if (!p || p.killed) return;
        p.killed = true;
        this.#write(frame(Buffer.from(`k\0${id}`), Buffer.alloc(0)));
      };
      const pending: Pending = {
        resolve,
        killed: false,
        cleanup: () => {
          if (timer) clearTimeout(timer);
          req.signal?.removeEventListener("abort", kill);
        },
      };
      this.#pending.set(id, pending);
      if (this.#pending.size === 1) this.#busy();
      if (req.timeoutMs !== undefined && req.timeoutMs > 0) timer = setTimeout(kill, req.timeoutMs);
      if (req.signal?.aborted) queueMicrotask(kill);
      else req.signal?.addEventListener("abort", kill, { once: true });
      this.#write(frame(header, stdin));
    });
  }

  /** Stops the runner once the commands in flight are done; it takes no new ones. */
  retire(): void {
    this.#retired = true;
    if (this.#pending.size === 0) void this.stop();
  }

  /** Kills the runner and every command it is running; pending execs resolve as stopped. */
  async stop(): Promise<void> {
    if (!this.#dead) {
      // Held while stopping, so a caller awaiting close() is not dropped by an idle event loop.
      this.#busy();
      try {
        if (this.#child.pid) process.kill(-this.#child.pid, "SIGKILL");
      } catch {
        this.#child.kill("SIGKILL");
      }
    }
    await this.exited;
  }

  #write(data: Buffer): void {
    if (!this.#dead) this.#child.stdin!.write(data);
  }

  #onData(chunk: Buffer): void {
    this.#buf = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
    // Reply: u32 id, i32 exit, u32 stdout length, u32 stderr length, u8 truncated, then the bytes.
    while (this.#buf.length >= REPLY_HEADER) {
      const b = this.#buf;
      const id = b.readUInt32BE(0);
      const out = b.readUInt32BE(8);
      const err = b.readUInt32BE(12);
      const end = REPLY_HEADER + out + err;
      if (b.length < end) break;
      this.#buf = b.subarray(end);
      const p = this.#pending.get(id);
      if (!p) continue;
      this.#settle(id, p, {
        exitCode: p.killed ? -1 : b.readInt32BE(4),
        stdout: Buffer.from(b.subarray(REPLY_HEADER, REPLY_HEADER + out)),
        stderr: Buffer.from(b.subarray(REPLY_HEADER + out, end)),
        timedOut: p.killed,
        truncated: b[16] === 1,
      });
    }
  }

  #settle(id: number, p: Pending, r: ExecResult): void {
    this.#pending.delete(id);
    p.cleanup();
    if (r.timedOut && r.stderr.length === 0) r.stderr = Buffer.from("timed out");
    p.resolve(r);
    if (this.#pending.size === 0) {
      this.#idle();
      if (this.#retired && !this.#dead) void this.stop();
    }
  }

  #die(): void {
    if (this.#dead) return;
    this.#dead = true;
    for (const [id, p] of this.#pending) {
      const r = p.killed ? { ...stopped(""), timedOut: true } : stopped(this.#stderr);
      if (this.#spawnFailed && !p.killed) r.exitCode = 127;
      this.#settle(id, p, r);
    }
  }

  // An idle runner must not keep the host process alive; one with commands in flight must.
  #idle(): void {
    for (const h of this.#handles()) h.unref?.();
  }
  #busy(): void {
    for (const h of this.#handles()) h.ref?.();
  }
  #handles(): { ref?: () => void; unref?: () => void }[] {
    const c = this.#child;
    return [c, c.stdin, c.stdout, c.stderr].filter(Boolean) as unknown as { ref?: () => void; unref?: () => void }[];
  }
}

const REPLY_HEADER = 17;

/** Why the request cannot be encoded (NUL-separated fields), as the kernel would refuse it anyway; else null. */
function badField(req: RunnerRequest): string | null {
  if (req.argv.some((a) => a.includes("\0"))) return "argv contains a NUL byte";
  if (req.cwd.includes("\0")) return "cwd contains a NUL byte";
  for (const [k, v] of Object.entries(req.env)) {
    if (k === "" || k.includes("=") || k.includes("\0")) return `invalid environment variable name '${k.replace(/\0/g, "\\0")}'`;
    if (v.includes("\0")) return `environment variable '${k}' contains a NUL byte`;
  }
  return null;
}

function frame(h: Buffer, payload: Buffer): Buffer {
  const prefix = Buffer.alloc(8);
  prefix.writeUInt32BE(h.length, 0);
  prefix.writeUInt32BE(payload.length, 4);
  return Buffer.concat([prefix, h, payload]);
}

function stopped(detail: string): ExecResult {
  const why = detail.trim() ? `: ${detail.trim()}` : "";
  return { exitCode: -1, stdout: Buffer.alloc(0), stderr: Buffer.from(`sandbox exec runner stopped${why}`), timedOut: false, truncated: false };
}
