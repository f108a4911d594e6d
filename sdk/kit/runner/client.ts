// Size: one multiplexed protocol client (exec, file operations, the descriptor hand-off) over one stream.
import type { Readable, Writable } from "node:stream";
import { UnavailableError, InternalError } from "../../errors.js";
import type { ExecResult } from "../../sandbox.js";
import { closeSync } from "node:fs";
import { Socket } from "node:net";
import { RunnerFailure } from "./failure.js";
import { HANDOFF_MIN, openRunnerPipes, parseHandedOff, readHandedOff, writeHandedOff, type HandedOff } from "./handoff.js";

/**
 * How a backend started the runner: a process inside the sandbox with its stdin and stdout (bwrap's
 * child, a Docker exec attach, a Kubernetes exec websocket...). The backend folder provides only this.
 */
export interface RunnerTransport {
  readonly stdin: Writable;
  readonly stdout: Readable;
  /**
   * Resolves once the process is gone (or its stream closed), with what it said on stderr if anything;
   * `spawnFailed` when the process could not be started at all (its execs then exit 127, like a missing binary).
   */
  readonly exited: Promise<{ why: string; spawnFailed?: boolean }>;
  /** Ends the process (and with it every command it runs). */
  kill(): void;
  readonly pid?: number | undefined;
  /**
   * Set only when the runner runs on this kernel: the runner's host pid, given the pid it reported in its
   * own view (undefined when it cannot be found). Enables the descriptor hand-off for big files (handoff.ts).
   */
  runnerHostPid?(nsPid: number): Promise<number | undefined>;
  /**
   * The device of the workspace's folder as this host sees it (a host-side stat of the folder the sandbox
   * mounts, never a number from the runner), for a runner on this kernel over a host folder. A handed-off
   * descriptor must be a regular file on it (handoff.ts); without it there is no hand-off, and big files
   * cross the runner's channel.
   */
  readonly hostDevice?: bigint | undefined;
  /**
   * The process's stdin and stdout are relayed by a daemon (a Docker exec attach): once the runner is found
   * on this kernel (runnerHostPid), the client moves its calls to a private pipe pair the runner makes,
   * opened through /proc/<runner host pid>/fd, which skips the relay. Optional; absent means stay.
   */
  readonly relayed?: boolean;
  /**
   * The sandbox service's own file API (E2B's files, Daytona's toolbox), for a runner that runs on another
   * kernel: big files then cross it as raw bytes to and from a descriptor the runner holds, named by its
   * `/proc/<runner pid>/fd/<n>` link in the sandbox's view (see RemoteFiles). Optional; absent, or once it
   * failed, the bytes travel the runner's own channel.
   */
  readonly remoteFiles?: RemoteFiles;
  /** Keep / stop keeping the host's event loop alive (an idle runner must not hold the process open). */
  ref?(): void;
  unref?(): void;
}

/**
 * A sandbox service's file transfer calls, used only at the runner's descriptor links: the runner opens
 * (or makes) the file under the workspace root itself, walked descriptor by descriptor without following
 * a symlink out, and holds it; `/proc/<pid>/fd/<n>` (pid from the runner's own hello on its channel, the
 * sandbox's pid view) names that open file, never a workspace name, so nothing an agent renames, swaps or
 * links can redirect it. The runner still gives the verdict: a write counts once it committed the bytes
 * into place, a read once it is still alive after the download.
 */
export interface RemoteFiles {
  /** Writes `data` at the sandbox path (an upload that opens the path for writing, truncating). */
  upload(path: string, data: Uint8Array): Promise<void>;
  /** The bytes at the sandbox path (a download that opens the path for reading). */
  download(path: string): Promise<Buffer>;
  /** Told when a transfer failed and the bytes went over the runner's channel instead (the route is then off for that runner). */
  fellBack?(error: unknown): void;
  /**
   * The upload opens the path for writing and writes the bytes in order, as into a file, which a pipe's
   * end also is (Daytona's toolbox, E2B's envd): a big write then streams through a pipe the runner
   * reads as the bytes land and commits at the last one, with no round trip after the upload. Without
   * it, the upload fills an unnamed file the runner then names (one round trip more).
   */
  readonly streams?: boolean;
}

/** One command; env is the complete environment (the runner adds only its kill marker). */
export interface RunnerExec {
  argv: string[];
  /** Workspace-relative working directory, resolved by the runner inside the sandbox. */
  cwd: string;
  env: Record<string, string>;
  stdin?: Uint8Array | string | undefined;
  maxOutputBytes: number;
  /** Past it the command is killed; a runner that does not report it gone within KILL_GRACE_MS is ended. None: no deadline. */
  timeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
}

/** A long-lived process (a stdio MCP server): env is the complete environment, as for RunnerExec. */
export type RunnerSpawn = Pick<RunnerExec, "argv" | "cwd" | "env">;

/** Where a spawned process's events go (see spawn.ts, which makes a SandboxProcess of them). */
export interface RunnerSpawnSink {
  /** Bytes of stdout (1) or stderr (2); the runner sends more only as they are acknowledged. */
  output(stream: 1 | 2, data: Buffer): void;
  /** That many more stdin bytes reached the process (or were dropped because it closed its stdin). */
  written(bytes: number): void;
  /** The process is gone (negative: killed by that signal) and its output was all delivered. */
  exit(code: number): void;
  /** It never started (a refused cwd, a bad field) or the runner died under it; `exitCode` to report. */
  failed(error: Error, exitCode: number | null): void;
}

/** The host's side of one spawned process on the channel. Calls after its end are ignored. */
export interface RunnerSpawnChannel {
  write(data: Uint8Array): void;
  end(): void;
  /** The host consumed `bytes` more of stream 1 or 2: the runner may send that much more. */
  consumed(stream: 1 | 2, bytes: number): void;
  kill(): void;
}

export { RunnerFailure } from "./failure.js";

export interface RunnerReply {
  fields: string[];
  payload: Buffer;
}

/** How long a release note (see RunnerClient's #sendLazy) waits for a frame to travel with. */
const LAZY_MS = 50;
/** Bytes per write frame: big files cross in pieces, each a view of the caller's buffer (no copy). */
const CHUNK = 1 << 20;
const REPLY_PREFIX = 12;
/** The most a read's announced size allocates before its bytes arrive. */
const PREALLOC_MAX = 64 << 20;
/** Chunks under this size are copied together (FrameReader's #append), TAIL_BYTES at a time. */
const SMALL_CHUNK = 4096;
const TAIL_BYTES = 64 << 10;

/*
 * Caps on what a runner may send: everything on its channel is hostile input (the agent may have become
 * the runner). Each is checked on a frame's prefix or header, before its payload is buffered; a frame over
 * one ends that runner (its calls fail, the next call starts a fresh one), never this process.
 */
/** A reply's header (NUL-separated fields): the honest runner's are a few hundred bytes (an errno message, a stat). */
export const MAX_HEADER_BYTES = 64 << 10;
/** One read's data frame: the honest runner reads and sends 1 MiB at a time. */
export const MAX_DATA_FRAME = 4 << 20;
/** One listing's reply (l, t, T: a whole folder or tree in one frame). */
export const MAX_LIST_BYTES = 64 << 20;
/** What a read without its own maxBytes may return (the runner is sent this cap and refuses bigger files). */
export const MAX_READ_BYTES = 1 << 30;
/** Host-side deadline of one file call (read, write, list, stat...): past it the runner is ended. */
export const CALL_TIMEOUT_MS = 60_000;
/** How long a command (or spawned process) asked to die has to be reported gone before its runner is ended. */
export const KILL_GRACE_MS = 5_000;
/** Slack over a spawned process's window: the runner drains up to 1 MiB more of a stream at its exit. */
const SPAWN_SLACK = (1 << 20) + (64 << 10);
/** A big transfer's deadline grows by a second per this many bytes (a slow honest channel still finishes). */
const MIN_RATE = 1 << 20;
/** Ops whose work grows with a tree (copy, recursive remove, tree listing): ten deadlines. */
const SLOW_OPS = new Set(["C", "d", "T"]);
/** Ops whose "o" reply carries a listing as its payload. */
const LIST_OPS = new Set(["l", "t", "T"]);

/** Tuning of one client (the defaults above suit every backend; tests shorten them). */
export interface RunnerClientOptions {
  /** Deadline of a file call and of the runner's hello, in ms (CALL_TIMEOUT_MS); a big transfer gets a second more per MiB. */
  callTimeoutMs?: number | undefined;
  /** Grace after a kill request, in ms (KILL_GRACE_MS). */
  killGraceMs?: number | undefined;
  /** Cap of a read without maxBytes (MAX_READ_BYTES). */
  maxReadBytes?: number | undefined;
}

/** The runner broke the protocol: ends that runner (never thrown to a caller, only its message). */
class ProtocolError extends Error {}

interface Pending {
  /** Checks a frame's header before its payload is buffered: throws ProtocolError for a wrong kind or too big a payload. */
  accept(fields: string[], payloadLength: number): void;
  onFrame(fields: string[], payload: Buffer[], length: number): boolean;
  onDeath(reason: string): void;
  /** The call's host-side deadline, if armed (see #arm). */
  timer?: NodeJS.Timeout | undefined;
}

/** Throws unless the frame is one of `kinds` with at most `max` payload bytes. */
function accepts(fields: string[], pl: number, what: string, kinds: readonly string[], max = 0): void {
  const kind = fields[0] ?? "";
  if (!kinds.includes(kind)) throw new ProtocolError(`a '${kind.slice(0, 16)}' frame for ${what}`);
  if (pl > max) throw new ProtocolError(`a ${pl}-byte '${kind}' frame for ${what}, over its ${max}-byte cap`);
}

/** A non-negative safe integer field, else undefined (never NaN, -1 or 2**64). */
function count(field: string | undefined): number | undefined {
  if (field === undefined || !/^\d{1,16}$/.test(field)) return undefined;
  const n = Number(field);
  return Number.isSafeInteger(n) ? n : undefined;
}

/**
 * Host side of the runner protocol (see source.ts): frames requests onto the runner's stdin, matches
 * replies by id. One client per runner process; once the process is gone the client is dead and a
 * new one must be started (calls in flight get an error; pending execs resolve as stopped).
 */
export class RunnerClient {
  readonly #t: RunnerTransport;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  readonly #main: FrameReader;
  readonly #callMs: number;
  readonly #graceMs: number;
  readonly #maxRead: number;
  /** The private pipe pair once open (see RunnerTransport.relayed): requests from id #sideFrom on use it. */
  #side: { w: Socket; r: Socket; reader: FrameReader } | undefined;
  #sideFrom = Number.MAX_SAFE_INTEGER;
  #dead = false;
  /** Ended by this side for a protocol breach or a missed deadline: #why says which, the transport's exit does not replace it. */
  #abandoned = false;
  #retired = false;
  #why = "";
  #spawnFailed = false;
  /** The runner's pid in its own view (from hello), and its host pid once looked up. */
  #nsPid: number | undefined;
  #hostPid: Promise<number | undefined> | undefined;
  /** An unnamed file the runner made ahead of the next big write (so that write costs one round trip). */
  #spare: HandedOff | undefined;
  #spareAsk: Promise<void> | undefined;
  /** The runner could not make a spare (no O_TMPFILE there): never asked again. */
  #spareRefused = false;
  /** An upload pipe the runner made ahead of the next big write through RemoteFiles (`streams`). */
  #pipe: { r: number; w: number } | undefined;
  #pipeAsk: Promise<void> | undefined;
  #pipeRefused = false;
  /** Set once a transfer through RemoteFiles failed: this runner's big files then take its channel. */
  #remoteOff = false;
  /** Notes waiting to travel with the next frame (see #sendLazy). */
  readonly #lazy: string[][] = [];
  #lazyTimer: NodeJS.Timeout | undefined;
  /** Resolves on the runner's hello; rejects if it dies first (no python3, bad image...). */
  readonly ready: Promise<void>;
  readonly exited: Promise<void>;

  constructor(transport: RunnerTransport, options: RunnerClientOptions = {}) {
    this.#t = transport;
    this.#callMs = options.callTimeoutMs ?? CALL_TIMEOUT_MS;
    this.#graceMs = options.killGraceMs ?? KILL_GRACE_MS;
    this.#maxRead = options.maxReadBytes ?? MAX_READ_BYTES;
    let hello!: () => void;
    let noHello!: (e: Error) => void;
    this.ready = new Promise<void>((resolve, reject) => {
      hello = resolve;
      noHello = reject;
    });
    this.ready.catch(() => undefined);
    // Id 0 stays: it carries one hello, then at most the runner's complaints about notes (failures of ops
    // that have no reply, say a release of a descriptor), which are dropped.
    let greeted = false;
    this.#pending.set(0, {
      accept: (fields, pl) => accepts(fields, pl, "the runner's greeting", greeted ? ["e"] : ["hello", "e"]),
      onFrame: (fields) => {
        if (fields[0] === "hello") {
          greeted = true;
          const slot = this.#pending.get(0);
          if (slot?.timer) clearTimeout(slot.timer);
          const pid = count(fields[2]);
          if (pid !== undefined && pid > 0) this.#nsPid = pid;
          hello();
          if (transport.relayed && this.#canSide()) void this.#openSide();
        }
        // Held open until the runner said hello (someone may be awaiting `ready`), idle from then on.
        if (this.#calls() === 0) this.#idle();
        return false;
      },
      onDeath: (why) => noHello(new UnavailableError(`sandbox runner did not start${why ? `: ${why}` : ""}`)),
    });
    this.#main = this.#reader();
    // A runner that never says hello would leave every `await ready` waiting: it has a call's deadline.
    this.#arm(0, this.#callMs, "the runner's hello");
    transport.stdout.on("data", (c: Buffer) => this.#feed(this.#main, c));
    // A transport whose stream failed (a text channel's over-long line, a broken demux) ends the runner.
    transport.stdout.on("error", (e: Error) => this.#abandon(`its channel failed: ${e.message}`));
    transport.stdin.on("error", () => undefined);
    this.exited = transport.exited.then(({ why, spawnFailed }) => {
      if (!this.#abandoned) this.#why = why.trim().slice(-2000);
      this.#spawnFailed = spawnFailed === true;
      this.#die();
    });
    this.#t.ref?.();
  }

  get alive(): boolean {
    return !this.#dead && !this.#retired;
  }

  get pid(): number | undefined {
    return this.#t.pid;
  }

  /** Whether calls travel the transport's own streams or the private pipe pair (RunnerTransport.relayed). */
  get channel(): "transport" | "private" {
    return this.#side ? "private" : "transport";
  }

  /** The transport this client talks over (a backend reads its own details from it). */
  get transport(): RunnerTransport {
    return this.#t;
  }

  /** Runs a command. Resolves with its result; rejects only when the runner refused the cwd (RunnerFailure). */
  exec(req: RunnerExec): Promise<ExecResult> {
    if (this.#dead) return Promise.resolve({ ...stopped(this.#why), ...(this.#spawnFailed ? { exitCode: 127 } : {}) });
    const bad = badField(req);
    if (bad)
      return Promise.resolve({
        exitCode: 127,
        stdout: Buffer.alloc(0),
        stderr: Buffer.from(`${req.argv[0] ?? ""}: ${bad}`),
        timedOut: false,
        truncated: false,
      });
    const id = this.#nextId++;
    const env = Object.entries(req.env).map(([k, v]) => `${k}=${v}`);
    const header = ["x", String(id), String(req.maxOutputBytes), req.cwd, String(req.argv.length), ...req.argv, ...env];
    const stdin = req.stdin === undefined ? Buffer.alloc(0) : Buffer.from(req.stdin);
    const max = req.maxOutputBytes;
    // The result frame: stdout and stderr, each capped by the runner at max (a command that failed to
    // start sends its argv[0] and the reason instead).
    const room = 2 * max + Buffer.byteLength(req.argv[0] ?? "") + 4096;
    return new Promise<ExecResult>((resolve, reject) => {
      let killed = false;
      let timer: NodeJS.Timeout | undefined;
      const kill = () => {
        if (killed || !this.#pending.has(id)) return;
        killed = true;
        this.#send(["k", String(id)]);
        // A runner that does not report the command gone is ended; the exec then resolves as timed out.
        this.#arm(id, this.#graceMs, `a killed command's end`);
      };
      const cleanup = () => {
        if (timer) clearTimeout(timer);
        req.signal?.removeEventListener("abort", kill);
      };
      this.#add(id, {
        accept: (fields, pl) => accepts(fields, pl, "an exec", ["x", "e"], fields[0] === "x" ? room : 0),
        onFrame: (fields, payload, length) => {
          if (fields[0] === "e") {
            cleanup();
            reject(new RunnerFailure(fields[1] ?? "EIO", fields[2] ?? ""));
            return true;
          }
          const code = count(fields[1]);
          const outLen = count(fields[3]);
          if (code === undefined || outLen === undefined || outLen > length)
            throw new ProtocolError(`an exec result with code '${fields[1]}' and ${fields[3]} of ${length} bytes as stdout`);
          cleanup();
          const all = payload.length === 1 ? payload[0]! : Buffer.concat(payload, length);
          // Never more than the caller's cap per stream, whatever the runner sent.
          const stdout = all.subarray(0, Math.min(outLen, max));
          const stderr = all.subarray(outLen, outLen + max);
          const r: ExecResult = {
            exitCode: killed ? -1 : code,
            stdout,
            stderr,
            timedOut: killed,
            truncated: fields[2] === "1" || stdout.length < outLen || stderr.length < length - outLen,
          };
          if (r.timedOut && r.stderr.length === 0) r.stderr = Buffer.from("timed out");
          resolve(r);
          return true;
        },
        onDeath: (why) => {
          cleanup();
          const r = killed ? { ...stopped(this.#abandoned ? why : ""), timedOut: true } : stopped(why);
          if (this.#spawnFailed && !killed) r.exitCode = 127;
          resolve(r);
        },
      });
      if (req.timeoutMs !== undefined && req.timeoutMs > 0) timer = setTimeout(kill, req.timeoutMs);
      if (req.signal?.aborted) queueMicrotask(kill);
      else req.signal?.addEventListener("abort", kill, { once: true });
      this.#send(header, stdin);
    });
  }

  /**
   * Starts a long-lived process whose stdio streams over this channel; at most `window` bytes of each
   * output stream are unacknowledged at a time (the process blocks on its full pipe beyond that).
   */
  spawn(req: RunnerSpawn, window: number, sink: RunnerSpawnSink): RunnerSpawnChannel {
    const none: RunnerSpawnChannel = { write: () => undefined, end: () => undefined, consumed: () => undefined, kill: () => undefined };
    const bad = badField({ ...req, maxOutputBytes: 0 });
    if (this.#dead || bad) {
      const why = bad ? new RunnerFailure("EINVAL", `${req.argv[0] ?? ""}: ${bad}`) : runnerGone(this.#why);
      queueMicrotask(() => sink.failed(why, bad || this.#spawnFailed ? 127 : null));
      return none;
    }
    const id = this.#nextId++;
    const sid = String(id);
    // What the runner may have in flight: per output stream, the window (plus its drain at the end) over
    // what the host acknowledged; stdin acknowledgements, never more than was sent.
    const received = { 1: 0, 2: 0 };
    const acked = { 1: 0, 2: 0 };
    let sent = 0;
    let written = 0;
    const most = Math.max(window, 4096) + SPAWN_SLACK;
    this.#add(id, {
      accept: (fields, pl) => {
        const kind = fields[0];
        const s = kind === "1" ? 1 : 2;
        accepts(fields, pl, "a spawned process", ["1", "2", "a", "q", "e"], kind === "1" || kind === "2" ? most - (received[s] - acked[s]) : 0);
      },
      onFrame: (fields, payload, length) => {
        const kind = fields[0];
        if (kind === "1" || kind === "2") {
          received[kind === "1" ? 1 : 2] += length;
          sink.output(kind === "1" ? 1 : 2, payload.length === 1 ? payload[0]! : Buffer.concat(payload, length));
        } else if (kind === "a") {
          const n = count(fields[1]);
          if (n === undefined || written + n > sent)
            throw new ProtocolError(`a spawned process acknowledged '${fields[1]}' stdin bytes, ${sent - written} in flight`);
          written += n;
          sink.written(n);
        } else if (kind === "q") {
          const code = Number(fields[1]);
          if (!Number.isSafeInteger(code)) throw new ProtocolError(`a spawned process exited with '${fields[1]}'`);
          sink.exit(code);
        } else sink.failed(new RunnerFailure(fields[1] ?? "EIO", fields[2] ?? ""), 127);
        return kind === "q" || kind === "e";
      },
      onDeath: (why) => sink.failed(runnerGone(why), this.#spawnFailed ? 127 : null),
    });
    const env = Object.entries(req.env).map(([k, v]) => `${k}=${v}`);
    this.#send(["p", sid, String(window), req.cwd, String(req.argv.length), ...req.argv, ...env]);
    const live = () => this.#pending.has(id);
    return {
      write: (data) => {
        for (let at = 0; live() && at < data.byteLength; at += CHUNK) {
          const piece = data.subarray(at, at + CHUNK);
          sent += piece.byteLength;
          this.#send(["i", sid], piece);
        }
      },
      end: () => live() && this.#send(["I", sid]),
      consumed: (stream, bytes) => {
        if (!live()) return;
        acked[stream] += bytes;
        this.#send(["a", sid, String(stream), String(bytes)]);
      },
      kill: () => {
        if (!live()) return;
        this.#send(["k", sid]);
        // Not reported gone within the grace: the runner is ended (and the process with it).
        if (!this.#pending.get(id)?.timer) this.#arm(id, this.#graceMs, `a killed process's end`);
      },
    };
  }

  /** One request answered by one "o" (or "e") frame. */
  call(op: string, args: string[], payload?: Buffer): Promise<RunnerReply> {
    // A spare (P) is answered by a descriptor; listings carry their entries, nothing else carries a payload.
    const ok = op === "P" ? "h" : "o";
    const room = LIST_OPS.has(op) ? MAX_LIST_BYTES : 0;
    const ms = SLOW_OPS.has(op) ? 10 * this.#callMs : this.#callMs;
    return this.#request(
      `a '${op}' call`,
      ms,
      (id) => this.#send([op, String(id), ...args], payload),
      (resolve, reject) => ({
        accept: (fields, pl) => accepts(fields, pl, `a '${op}' call`, [ok, "e"], fields[0] === ok ? room : 0),
        onFrame: (fields, chunks, length) => {
          if (fields[0] === "e") reject(new RunnerFailure(fields[1] ?? "EIO", fields[2] ?? ""));
          else resolve({ fields: fields.slice(1), payload: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length) });
          return true;
        },
      }),
    );
  }

  /**
   * Reads a file into one buffer sized by the runner's fstat (grown only if the file grows): a big file
   * through the runner's descriptor when the runner is on this kernel, else in chunks over the pipe.
   */
  read(
    rel: string,
    maxBytes: number | undefined,
    handoff = this.#canHandOff() || this.#canRemote(),
    range?: { offset: number; length: number },
  ): Promise<Buffer> {
    let out: Buffer | undefined;
    let len = 0;
    // The host's own cap, whatever the runner says: the caller's, else MAX_READ_BYTES (sent to the runner,
    // which refuses a bigger file with TOOBIG, as it does any file over a caller's cap).
    const cap = maxBytes !== undefined && Number.isSafeInteger(maxBytes) && maxBytes >= 0 ? Math.min(maxBytes, this.#maxRead) : this.#maxRead;
    let rid = 0;
    let state: "start" | "data" = "start";
    const started = Date.now();
    const what = "a read";
    const ask = (id: number) => (range ? ["g", String(id), rel, String(range.offset), String(cap)] : [handoff ? "R" : "r", String(id), rel, String(cap)]);
    return this.#request(
      what,
      this.#callMs,
      (id) => ((rid = id), this.#send(ask(id))),
      (resolve, reject) => ({
        accept: (fields, pl) =>
          state === "start"
            ? accepts(fields, pl, what, handoff ? ["h", "s", "e"] : ["s", "e"])
            : accepts(fields, pl, what, ["d", "o", "e"], fields[0] === "d" ? Math.min(MAX_DATA_FRAME, cap - len) : 0),
        onFrame: (fields, chunks, length) => {
          const kind = fields[0];
          if (kind === "h") {
            const h = parseHandedOff(fields);
            const size = count(fields[4]);
            if (!h || size === undefined || size > cap)
              throw new ProtocolError(`a hand-off of '${fields.slice(1, 5).join(" ")}' for a read capped at ${cap} bytes`);
            // Settled here; the held descriptor is released once read, and a failed hand-off reads again over the pipe.
            const done = this.#drain(h, size, cap);
            // Through the service's file API the release waits for the next frame (see #sendLazy).
            const local = this.#hostPid !== undefined;
            void done.finally(() => (local ? this.#send(["z", String(rid)]) : this.#sendLazy(["z", String(rid)]))).catch(() => undefined);
            resolve(done.catch((e: unknown) => (e instanceof RunnerFailure || this.#dead ? Promise.reject(e) : this.read(rel, maxBytes, false))));
            return true;
          }
          if (kind === "s") {
            // The size is the runner's word: checked against the cap before anything is allocated by it.
            const size = count(fields[1]);
            if (size === undefined || size > cap) throw new ProtocolError(`a size of '${fields[1]}' for a read capped at ${cap} bytes`);
            // Sized by that word only up to PREALLOC_MAX: past it the buffer grows as bytes really arrive,
            // so a runner that announces a big file and sends nothing pins no memory.
            out = Buffer.allocUnsafe(Math.min(size, PREALLOC_MAX));
            state = "data";
            return false;
          }
          if (kind === "d") {
            // accept() kept len + length within the cap; a file that grew is grown into, never past it.
            if (!out || len + length > out.length) {
              const grown = Buffer.allocUnsafe(Math.min(cap, Math.max(len + length, (out?.length ?? 0) * 2)));
              out?.copy(grown, 0, 0, len);
              out = grown;
            }
            for (const c of chunks) len += c.copy(out, len);
            // More time only for bytes that really came (a second per MiB), never for a size merely announced.
            this.#arm(rid, started + this.#callMs + (len / MIN_RATE) * 1000 - Date.now(), what);
            return false;
          }
          if (kind === "e") reject(new RunnerFailure(fields[1] ?? "EIO", fields[2] ?? ""));
          else if (count(fields[1]) !== len) throw new ProtocolError(`a read's end reporting '${fields[1]}' bytes after ${len}`);
          else resolve(out ? out.subarray(0, len) : Buffer.alloc(0));
          return true;
        },
      }),
    );
  }

  /** At most `length` bytes of `rel` from `offset`, over the pipe, whatever the file's size (at most the read cap per call). */
  readRange(rel: string, offset: number, length: number): Promise<Buffer> {
    return this.read(rel, length, false, { offset, length });
  }

  /**
   * Writes `data` to `rel`: kind w (atomic replace), x (exclusive, atomic), a (append), c (exclusive
   * create in place). `route` "pipe" keeps the bytes on the runner's channel (a hand-off that failed).
   */
  write(rel: string, kind: "w" | "x" | "a" | "c", data: Uint8Array, mode: number | undefined, route: "any" | "pipe" = "any"): Promise<void> {
    const m = mode === undefined ? "-" : mode.toString(8);
    // A big atomic write goes by hand-off: the runner makes the temp file, the host fills it through the
    // runner's descriptor, the runner commits it; the pipe carries the bytes only if that fails.
    const big = route === "any" && (kind === "w" || kind === "x") && data.byteLength > HANDOFF_MIN;
    const handoff = big && this.#canHandOff();
    if (handoff && this.#spare) return this.#writeSpare(this.#spare, rel, kind, m, data);
    if (handoff) void this.#askSpare();
    else if (big && this.#canRemote()) return this.#writeRemote(rel, kind, m, data);
    const stream = (sid: string, from: number) => {
      for (let at = from; at < data.byteLength; at += CHUNK) this.#send(["c", sid], data.subarray(at, at + CHUNK));
      this.#send(["e", sid]);
    };
    let handedOff = false;
    return this.#request(
      "a write",
      this.#callMs + (data.byteLength / MIN_RATE) * 1000,
      (id) => {
        const sid = String(id);
        if (handoff) return this.#send(["W", sid, rel, kind, m]);
        this.#send(["w", sid, rel, kind, m], data.subarray(0, CHUNK));
        stream(sid, CHUNK);
      },
      (resolve, reject) => {
        let sid = "";
        return {
          // One descriptor at most, and only when one was asked for (W).
          accept: (fields, pl) => accepts(fields, pl, "a write", handoff && !handedOff ? ["h", "o", "e"] : ["o", "e"]),
          onFrame: (fields) => {
            if (fields[0] === "h") {
              handedOff = true;
              const h = parseHandedOff(fields);
              void this.#fill(h, data).then(
                () => this.#send(["e", sid]),
                () => stream(sid, 0),
              );
              return false;
            }
            if (fields[0] === "e") reject(new RunnerFailure(fields[1] ?? "EIO", fields[2] ?? ""));
            else resolve();
            return true;
          },
          bind: (id: number) => (sid = String(id)),
        };
      },
    );
  }

  /**
   * A big write through the service's file API: into an upload pipe where the service's upload takes
   * one (`streams`), else into a spare (the first write waits for either), never into a named temp
   * file the channel could then also write.
   */
  async #writeRemote(rel: string, kind: "w" | "x", m: string, data: Uint8Array): Promise<void> {
    if (this.#t.remoteFiles?.streams && !this.#pipeRefused) {
      if (!this.#pipe) await this.#askPipe();
      const pipe = this.#pipe;
      if (pipe && this.#canRemote()) return this.#writePiped(pipe, rel, kind, m, data);
    }
    if (!this.#spare) await this.#askSpare();
    const spare = this.#spare;
    if (!spare || !this.#canRemote()) return this.write(rel, kind, data, m === "-" ? undefined : parseInt(m, 8), "pipe");
    return this.#writeSpare(spare, rel, kind, m, data);
  }

  /**
   * A big write streamed through an upload pipe: the request and the upload go out together, the runner
   * writes the bytes into an unnamed file beside the target as they land and names it into place
   * (atomically, modes kept) at the last one. The runner's answer decides; an upload that failed, or a
   * pipe that delivered short, sends the bytes over the channel.
   */
  async #writePiped(pipe: { r: number; w: number }, rel: string, kind: "w" | "x", m: string, data: Uint8Array): Promise<void> {
    this.#pipe = undefined;
    const done = this.call("Q", [rel, kind, m, String(pipe.r), String(data.byteLength)]);
    let answered = false;
    done.then(
      () => (answered = true),
      () => undefined,
    );
    // The next pipe is asked for now, so it is there for the next write.
    void this.#askPipe();
    let failed: { e: unknown } | undefined;
    try {
      await this.#t.remoteFiles!.upload(`/proc/${this.#nsPid}/fd/${pipe.w}`, data);
    } catch (e) {
      failed = { e };
    }
    // Every byte is in the pipe (or the upload failed): the runner finishes, or drops, the write. Once
    // it answered already, the note only releases the pipe and travels with the next frame.
    const note = ["q", "0", String(pipe.r), failed ? "0" : "1"];
    if (answered && !failed) this.#sendLazy(note);
    else this.#send(note);
    try {
      await done;
    } catch (e) {
      if (this.#dead) throw runnerGone(this.#why);
      if (!failed && !(e instanceof RunnerFailure && e.code === "EIO" && /short/.test(e.detail))) throw e;
      // The service did not deliver the bytes: they go over the channel, and this runner's big files from now on.
      try {
        this.#remoteFailed(failed?.e ?? e);
      } catch {
        // Told; the write goes on over the pipe.
      }
      return this.write(rel, kind, data, m === "-" ? undefined : parseInt(m, 8), "pipe");
    }
  }

  /** Asks the runner for the next upload pipe; one at a time, none once it refused. */
  #askPipe(): Promise<void> {
    if (this.#pipeAsk) return this.#pipeAsk;
    if (this.#pipeRefused || this.#pipe || this.#dead) return Promise.resolve();
    this.#pipeAsk = this.call("Y", []).then(
      (r) => {
        this.#pipeAsk = undefined;
        const [rfd, wfd] = r.fields;
        if (rfd && wfd && /^\d+$/.test(rfd) && /^\d+$/.test(wfd)) this.#pipe = { r: Number(rfd), w: Number(wfd) };
        else this.#pipeRefused = true;
      },
      () => {
        this.#pipeAsk = undefined;
        this.#pipeRefused = true;
      },
    );
    return this.#pipeAsk;
  }

  /** A big write in one round trip: the host fills the spare, the runner names it at `rel` atomically. */
  async #writeSpare(spare: HandedOff, rel: string, kind: "w" | "x", m: string, data: Uint8Array): Promise<void> {
    this.#spare = undefined;
    const local = this.#canHandOff();
    const mode = m === "-" ? undefined : parseInt(m, 8);
    try {
      await this.#fill(spare, data);
    } catch {
      if (this.#dead) throw runnerGone(this.#why);
      // A failed upload may still be writing on the service's side: that spare is never reused nor
      // closed (its number would name the next file the runner opens), only left to the runner's end.
      if (!local) return this.write(rel, kind, data, mode, "pipe");
      this.#send(["Z", "0", String(spare.fd)]);
      return this.write(rel, kind, data, mode);
    }
    // The next spare is asked first, so it is there by the time this write's answer is.
    void this.#askSpare();
    const done = this.call("F", [rel, kind, m, String(spare.fd)]);
    try {
      await done;
    } catch (e) {
      // EXDEV (the target's folder is another file system) and the like: the plain hand-off (or, through
      // the service's file API, the pipe) still works.
      if (e instanceof RunnerFailure && (e.code === "EXDEV" || e.code === "EINVAL")) return this.#writeOnce(rel, kind, data, m, local ? "any" : "pipe");
      throw e;
    }
  }

  /** The two-round-trip hand-off (or the pipe), never the spare. */
  #writeOnce(rel: string, kind: "w" | "x", data: Uint8Array, m: string, route: "any" | "pipe"): Promise<void> {
    const spare = this.#spare;
    this.#spare = undefined;
    return this.write(rel, kind, data, m === "-" ? undefined : parseInt(m, 8), route).finally(() => {
      if (spare) this.#send(["Z", "0", String(spare.fd)]);
    });
  }

  /** Asks the runner for the next spare; one at a time, none when it cannot make one (no O_TMPFILE). */
  #askSpare(): Promise<void> {
    if (this.#spareAsk) return this.#spareAsk;
    if (this.#spareRefused || this.#spare || this.#dead) return Promise.resolve();
    this.#spareAsk = this.call("P", []).then(
      (r) => {
        this.#spareAsk = undefined;
        this.#spare = parseHandedOff(["h", ...r.fields]);
      },
      () => {
        this.#spareAsk = undefined;
        this.#spareRefused = true;
      },
    );
    return this.#spareAsk;
  }

  /**
   * Descriptor hand-off: only with the runner on this kernel and the workspace's own device known from the
   * host's side (RunnerTransport.hostDevice), never a number the runner reported.
   */
  #canHandOff(): boolean {
    return this.#canSide() && this.#t.hostDevice !== undefined;
  }

  /** The private pipe pair (RunnerTransport.relayed): the runner found on this kernel. */
  #canSide(): boolean {
    return this.#t.runnerHostPid !== undefined && this.#nsPid !== undefined;
  }

  /** Whether big files cross the service's file API at the runner's descriptors (RemoteFiles). */
  #canRemote(): boolean {
    return this.#t.remoteFiles !== undefined && this.#nsPid !== undefined && !this.#remoteOff;
  }

  /** `/proc/<runner pid>/fd/<n>` in the sandbox's view: the runner's own descriptor, never a workspace name. */
  #remotePath(h: HandedOff): string {
    return `/proc/${this.#nsPid}/fd/${h.fd}`;
  }

  /** A transfer through RemoteFiles failed: told once, and this runner's big files take its channel from now on. */
  #remoteFailed(e: unknown): never {
    if (!this.#remoteOff) {
      this.#remoteOff = true;
      try {
        this.#t.remoteFiles?.fellBack?.(e);
      } catch {
        // A logger's failure is not the call's.
      }
    }
    throw e;
  }

  /** Reads the runner's held descriptor: on this kernel through its /proc link, else through the service's file API. */
  async #drain(h: HandedOff | undefined, size: number, maxBytes: number): Promise<Buffer> {
    if (!h) throw new InternalError("no hand-off");
    const pid = await this.#runnerHostPid();
    const device = this.#t.hostDevice;
    if (pid !== undefined && device !== undefined) return readHandedOff(pid, h, size, maxBytes, device);
    const remote = this.#t.remoteFiles;
    if (!remote || this.#nsPid === undefined) throw new InternalError("no hand-off");
    let data: Buffer;
    try {
      data = await remote.download(this.#remotePath(h));
    } catch (e) {
      if (this.#dead) throw runnerGone(this.#why);
      return this.#remoteFailed(e);
    }
    // The runner held the descriptor throughout (a pid reused after its end would name another process's).
    if (this.#dead) throw runnerGone(this.#why);
    if (data.length > maxBytes) throw new RunnerFailure("TOOBIG", String(data.length));
    return data;
  }

  /** Fills the runner's fresh file through its descriptor: on this kernel through its /proc link, else through the service's file API. */
  async #fill(h: HandedOff | undefined, data: Uint8Array): Promise<void> {
    if (!h) throw new InternalError("no hand-off");
    const pid = await this.#runnerHostPid();
    const device = this.#t.hostDevice;
    if (pid !== undefined && device !== undefined) return writeHandedOff(pid, h, data, device);
    const remote = this.#t.remoteFiles;
    if (!remote || this.#nsPid === undefined) throw new InternalError("no hand-off");
    try {
      await remote.upload(this.#remotePath(h), data);
    } catch (e) {
      if (this.#dead) throw runnerGone(this.#why);
      this.#remoteFailed(e);
    }
  }

  /** The runner's host pid, looked up once (undefined: no hand-off for this runner). */
  #runnerHostPid(): Promise<number | undefined> {
    const ns = this.#nsPid;
    if (ns === undefined || !this.#t.runnerHostPid) return Promise.resolve(undefined);
    this.#hostPid ??= this.#t.runnerHostPid(ns).catch(() => undefined);
    return this.#hostPid;
  }

  /** Stops the runner once the calls in flight are done; it takes no new ones. */
  retire(): void {
    this.#retired = true;
    if (this.#calls() === 0) void this.stop();
  }

  /** Kills the runner; calls in flight fail (execs resolve as stopped). */
  stop(): Promise<void> {
    // Held while stopping, so a caller awaiting close() is not dropped by an idle event loop (a runner
    // ended by the host is dead before its process is gone: it is held too).
    if (!this.#dead || this.#abandoned) this.#t.ref?.();
    if (!this.#dead) this.#killTransport();
    return this.exited;
  }

  /** Ends the runner's process; one already gone (a kill that finds no process) is what was wanted. */
  #killTransport(): void {
    try {
      this.#t.kill();
    } catch {
      // ESRCH and the like: the process ended on its own first; `exited` still settles.
    }
  }

  /** One call with a host-side deadline of `ms` (`what` names it in the runner's end if it is missed). */
  #request<T>(
    what: string,
    ms: number,
    send: (id: number) => void,
    make: (resolve: (v: T | Promise<T>) => void, reject: (e: unknown) => void) => Omit<Pending, "onDeath"> & { bind?: (id: number) => void },
  ): Promise<T> {
    if (this.#dead) return Promise.reject(runnerGone(this.#why));
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      const p = make(resolve, reject);
      p.bind?.(id);
      this.#add(id, { accept: p.accept, onFrame: p.onFrame, onDeath: (why) => reject(runnerGone(why)) });
      this.#arm(id, ms, what);
      send(id);
    });
  }

  /**
   * (Re)sets call `id`'s deadline: missed, the runner is ended (every call on it fails, the next call
   * starts a fresh one). A wedged runner never leaves a call, and with it its workspace, busy for ever.
   */
  #arm(id: number, ms: number, what: string): void {
    const p = this.#pending.get(id);
    if (!p) return;
    if (p.timer) clearTimeout(p.timer);
    p.timer = setTimeout(() => this.#abandon(`${what} got no answer within ${Math.round(ms / 1000)} s`), Math.min(ms, 2 ** 31 - 1));
    p.timer.unref();
  }

  /**
   * Ends this runner from the host's side (a protocol breach, a missed deadline): the buffered bytes are
   * dropped, calls in flight fail with `why` now (execs resolve as stopped), and the process is killed.
   */
  #abandon(why: string): void {
    if (this.#dead) return;
    this.#abandoned = true;
    this.#why = `ended by the host: ${why}`;
    this.#main.close();
    this.#side?.reader.close();
    this.#die();
    this.#killTransport();
    // Requests queued for a runner that no longer reads are the host's memory: let them go.
    try {
      this.#t.stdin.destroy();
    } catch {
      // Already destroyed.
    }
  }

  #reader(): FrameReader {
    return new FrameReader(
      (id, hl) => this.#check(id, hl),
      (id, fields, pl) => {
        // Settled meanwhile by a frame on the other channel (the private pair): a duplicate.
        const p = this.#pending.get(id);
        if (!p) throw new ProtocolError(`a reply for id ${id}, which no call is waiting for any more`);
        p.accept(fields, pl);
      },
      (id, fields, payload, length) => this.#onFrame(id, fields, payload, length),
    );
  }

  /** One chunk off a channel: nothing thrown while handling it escapes the stream's listener. */
  #feed(reader: FrameReader, chunk: Buffer): void {
    try {
      reader.push(chunk);
    } catch (e) {
      this.#abandon(e instanceof ProtocolError ? `it sent ${e.message}` : `a reply could not be handled: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /** A frame's prefix: its header length and id, before anything of it is buffered. */
  #check(id: number, hl: number): void {
    if (hl > MAX_HEADER_BYTES) throw new ProtocolError(`a ${hl}-byte frame header (the cap is ${MAX_HEADER_BYTES})`);
    if (!this.#pending.has(id)) throw new ProtocolError(`a reply for id ${id}, which no call is waiting for`);
  }

  #add(id: number, p: Pending): void {
    this.#pending.set(id, p);
    if (this.#calls() === 1) {
      this.#t.ref?.();
      this.#side?.w.ref();
      this.#side?.r.ref();
    }
  }

  /**
   * A frame that needs no reply and no haste (a release of a descriptor already done with): it travels
   * with the next frame sent, or within LAZY_MS, so it never holds up the request after it on a
   * transport that sends one call at a time (Daytona's session input, E2B's stdin).
   */
  #sendLazy(fields: string[]): void {
    if (this.#dead) return;
    this.#lazy.push(fields);
    if (!this.#lazyTimer) {
      this.#lazyTimer = setTimeout(() => this.#flushLazy(), LAZY_MS);
      this.#lazyTimer.unref();
    }
  }

  #flushLazy(): void {
    if (this.#lazyTimer) clearTimeout(this.#lazyTimer);
    this.#lazyTimer = undefined;
    for (const f of this.#lazy.splice(0)) this.#write(f);
  }

  #send(fields: string[], payload?: Uint8Array): void {
    if (this.#lazy.length) this.#flushLazy();
    this.#write(fields, payload);
  }

  #write(fields: string[], payload?: Uint8Array): void {
    if (this.#dead) return;
    // Every frame of one request travels the way its first did: ids from #sideFrom on, the private pair.
    const out = Number(fields[1]) >= this.#sideFrom ? this.#side!.w : this.#t.stdin;
    const header = Buffer.from(fields.join("\0"));
    const plen = payload?.byteLength ?? 0;
    const prefix = Buffer.allocUnsafe(8);
    prefix.writeUInt32BE(header.length, 0);
    prefix.writeUInt32BE(plen, 4);
    // Small frames go out in one write; a big payload is written as the caller's bytes, uncopied.
    if (plen <= 64 * 1024) out.write(plen ? Buffer.concat([prefix, header, payload!]) : Buffer.concat([prefix, header]));
    else {
      out.write(Buffer.concat([prefix, header]));
      out.write(payload!);
    }
  }

  /**
   * Moves to the private pipe pair: the runner makes it, the host opens its ends through the runner's
   * descriptors (checked to be those very pipes), and tells the runner from which id on it is used.
   * Any failure leaves everything on the transport's own streams.
   */
  async #openSide(): Promise<void> {
    let opened: { w: number; r: number } | undefined;
    try {
      const r = await this.call("S", []);
      const pid = await this.#runnerHostPid();
      if (pid !== undefined && !this.#dead) opened = openRunnerPipes(pid, r.fields);
    } catch {
      opened = undefined;
    }
    if (!opened || this.#dead) {
      if (opened) for (const fd of [opened.w, opened.r]) closeSync(fd);
      this.#send(["G", "0", "-"]);
      return;
    }
    const reader = this.#reader();
    const side = { w: new Socket({ fd: opened.w, readable: false, writable: true }), r: new Socket({ fd: opened.r, readable: true, writable: false }), reader };
    side.r.on("data", (c: Buffer) => this.#feed(reader, c));
    // The pair breaking while the runner lives would strand the calls on it: the runner is ended instead.
    const broken = () => !this.#dead && this.#killTransport();
    for (const s of [side.w, side.r]) {
      s.on("error", broken);
      s.on("close", broken);
    }
    this.#side = side;
    const from = this.#nextId;
    this.#send(["G", "0", String(from)]);
    this.#sideFrom = from;
    if (this.#calls() === 0) this.#idle();
  }

  #onFrame(id: number, fields: string[], payload: Buffer[], length: number): void {
    const p = this.#pending.get(id);
    if (p && p.onFrame(fields, payload, length) && id !== 0) this.#settled(id);
  }

  #settled(id: number): void {
    const p = this.#pending.get(id);
    if (p?.timer) clearTimeout(p.timer);
    this.#pending.delete(id);
    if (this.#calls() === 0) {
      this.#idle();
      if (this.#retired && !this.#dead) void this.stop();
    }
  }

  #die(): void {
    if (this.#dead) return;
    this.#dead = true;
    // A partial frame held for a runner that is gone is let go now, not with the client.
    this.#main.close();
    this.#side?.reader.close();
    this.#side?.w.destroy();
    this.#side?.r.destroy();
    const all = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of all) {
      if (p.timer) clearTimeout(p.timer);
      p.onDeath(this.#why);
    }
    this.#idle();
  }

  /** Calls in flight (the hello slot is not one). */
  #calls(): number {
    return this.#pending.size - (this.#pending.has(0) ? 1 : 0);
  }

  #idle(): void {
    this.#t.unref?.();
    this.#side?.w.unref();
    this.#side?.r.unref();
  }
}

export function runnerGone(why: string): UnavailableError {
  return new UnavailableError(`sandbox runner stopped${why ? `: ${why}` : ""}; the next call starts a new one`);
}

/** Why the command cannot be encoded (NUL-separated fields), as the kernel would refuse it anyway; else null. */
function badField(req: RunnerExec): string | null {
  // The cap sizes what the host accepts back: it must be a real byte count.
  if (!Number.isSafeInteger(req.maxOutputBytes) || req.maxOutputBytes < 0) return "maxOutputBytes must be a non-negative integer";
  if (req.argv.some((a) => a.includes("\0"))) return "argv contains a NUL byte";
  if (req.cwd.includes("\0")) return "cwd contains a NUL byte";
  for (const [k, v] of Object.entries(req.env)) {
    if (k === "" || k.includes("=") || k.includes("\0")) return `invalid environment variable name '${k.replace(/\0/g, "\\0")}'`;
    if (v.includes("\0")) return `environment variable '${k}' contains a NUL byte`;
  }
  return null;
}

function stopped(detail: string): ExecResult {
  const why = detail.trim() ? `: ${detail.trim()}` : "";
  return { exitCode: -1, stdout: Buffer.alloc(0), stderr: Buffer.from(`sandbox exec runner stopped${why}`), timedOut: false, truncated: false };
}

/**
 * Splits one stream of reply frames (u32 id, u32 header length, u32 payload length, header, payload),
 * validating before buffering: the prefix (id and header length) is checked before the header is kept,
 * the header (kind and payload length) before the payload is. So what it holds is never more than one
 * frame the call accepts, plus one chunk. Anything thrown comes out of push(), for the caller to end the
 * runner; after close() it holds nothing and takes nothing.
 */
class FrameReader {
  readonly #chunks: Buffer[] = [];
  #buffered = 0;
  /** The frame being received: its prefix, then its header once checked. */
  #frame: { id: number; hl: number; pl: number; fields?: string[] } | undefined;
  #closed = false;
  constructor(
    private readonly checkPrefix: (id: number, headerLength: number) => void,
    private readonly checkHeader: (id: number, fields: string[], payloadLength: number) => void,
    private readonly onFrame: (id: number, fields: string[], payload: Buffer[], length: number) => void,
  ) {}

  push(chunk: Buffer): void {
    if (this.#closed) return;
    this.#append(chunk);
    this.#buffered += chunk.length;
    while (!this.#closed) {
      let f = this.#frame;
      if (!f) {
        if (this.#buffered < REPLY_PREFIX) break;
        const first = this.#chunks[0]!;
        const head = first.length >= REPLY_PREFIX ? first : Buffer.concat(this.#take(REPLY_PREFIX), REPLY_PREFIX);
        f = { id: head.readUInt32BE(0), hl: head.readUInt32BE(4), pl: head.readUInt32BE(8) };
        if (head === first) this.#take(REPLY_PREFIX);
        this.checkPrefix(f.id, f.hl);
        this.#frame = f;
      }
      if (!f.fields) {
        if (this.#buffered < f.hl) break;
        f.fields = f.hl ? Buffer.concat(this.#take(f.hl), f.hl).toString("utf8").split("\0") : [];
        this.checkHeader(f.id, f.fields, f.pl);
      }
      if (this.#buffered < f.pl) break;
      this.#frame = undefined;
      this.onFrame(f.id, f.fields, this.#take(f.pl), f.pl);
    }
  }

  /** Drops what is buffered; later chunks are ignored (the runner is being ended). */
  close(): void {
    this.#closed = true;
    this.#chunks.length = 0;
    this.#buffered = 0;
    this.#frame = undefined;
    this.#tail = undefined;
  }

  /** Room the last small chunks were copied into (see #append). */
  #tail: { buf: Buffer; used: number; view: Buffer } | undefined;

  /**
   * Keeps a chunk; small ones (a runner dripping a byte at a time) are copied together into one buffer,
   * so a frame held is its bytes, not a million tiny Buffers' overhead.
   */
  #append(chunk: Buffer): void {
    // Nothing held (the usual case: a reply arrives whole): kept as it is.
    if (chunk.length >= SMALL_CHUNK || this.#chunks.length === 0) {
      this.#chunks.push(chunk);
      return;
    }
    const t = this.#tail;
    const last = this.#chunks[this.#chunks.length - 1];
    if (t && last === t.view && t.used + chunk.length <= t.buf.length) {
      chunk.copy(t.buf, t.used);
      t.used += chunk.length;
      t.view = t.buf.subarray(last.byteOffset - t.buf.byteOffset, t.used);
      this.#chunks[this.#chunks.length - 1] = t.view;
      return;
    }
    const buf = Buffer.allocUnsafe(TAIL_BYTES);
    chunk.copy(buf, 0);
    this.#tail = { buf, used: chunk.length, view: buf.subarray(0, chunk.length) };
    this.#chunks.push(this.#tail.view);
  }

  /** The next n bytes as views of the received chunks (no copy). */
  #take(n: number): Buffer[] {
    const out: Buffer[] = [];
    this.#buffered -= n;
    while (n > 0) {
      const c = this.#chunks[0]!;
      if (c.length <= n) {
        out.push(c);
        this.#chunks.shift();
        n -= c.length;
      } else {
        out.push(c.subarray(0, n));
        this.#chunks[0] = c.subarray(n);
        n = 0;
      }
    }
    return out;
  }
}
