// Size: one multiplexed protocol client (exec, file operations, the descriptor hand-off) over one stream.
import type { Readable, Writable } from "node:stream";
import { UnavailableError } from "../../../errors.js";
import type { ExecResult } from "../../../sandbox.js";
import { closeSync } from "node:fs";
import { Socket } from "node:net";
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

/** A failure the runner reported: an errno name (ENOENT, EEXIST...) or ESCAPE / TOOBIG / SPECIAL / EROOT. */
export class RunnerFailure extends Error {
  constructor(
    readonly code: string,
    readonly detail: string,
  ) {
    super(`${code}${detail ? `: ${detail}` : ""}`);
  }
}

export interface RunnerReply {
  fields: string[];
  payload: Buffer;
}

/** How long a release note (see RunnerClient's #sendLazy) waits for a frame to travel with. */
const LAZY_MS = 50;
/** Bytes per write frame: big files cross in pieces, each a view of the caller's buffer (no copy). */
const CHUNK = 1 << 20;
const REPLY_PREFIX = 12;

interface Pending {
  onFrame(fields: string[], payload: Buffer[], length: number): boolean;
  onDeath(reason: string): void;
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
  /** The private pipe pair once open (see RunnerTransport.relayed): requests from id #sideFrom on use it. */
  #side: { w: Socket; r: Socket } | undefined;
  #sideFrom = Number.MAX_SAFE_INTEGER;
  #dead = false;
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

  constructor(transport: RunnerTransport) {
    this.#t = transport;
    let hello!: () => void;
    let noHello!: (e: Error) => void;
    this.ready = new Promise<void>((resolve, reject) => {
      hello = resolve;
      noHello = reject;
    });
    this.ready.catch(() => undefined);
    this.#pending.set(0, {
      onFrame: (fields) => {
        if (fields[0] === "hello") {
          const pid = Number(fields[2]);
          if (Number.isSafeInteger(pid) && pid > 0) this.#nsPid = pid;
          hello();
          if (transport.relayed && this.#canHandOff()) void this.#openSide();
        }
        // Held open until the runner said hello (someone may be awaiting `ready`), idle from then on.
        if (this.#calls() === 0) this.#idle();
        return true;
      },
      onDeath: (why) => noHello(new UnavailableError(`sandbox runner did not start${why ? `: ${why}` : ""}`)),
    });
    this.#main = new FrameReader((id, fields, payload, length) => this.#onFrame(id, fields, payload, length));
    transport.stdout.on("data", (c: Buffer) => this.#main.push(c));
    transport.stdin.on("error", () => undefined);
    this.exited = transport.exited.then(({ why, spawnFailed }) => {
      this.#why = why.trim().slice(-2000);
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
    if (bad) return Promise.resolve({ exitCode: 127, stdout: Buffer.alloc(0), stderr: Buffer.from(`${req.argv[0] ?? ""}: ${bad}`), timedOut: false, truncated: false });
    const id = this.#nextId++;
    const env = Object.entries(req.env).map(([k, v]) => `${k}=${v}`);
    const header = ["x", String(id), String(req.maxOutputBytes), req.cwd, String(req.argv.length), ...req.argv, ...env];
    const stdin = req.stdin === undefined ? Buffer.alloc(0) : Buffer.from(req.stdin);
    return new Promise<ExecResult>((resolve, reject) => {
      let killed = false;
      let timer: NodeJS.Timeout | undefined;
      const kill = () => {
        if (killed || !this.#pending.has(id)) return;
        killed = true;
        this.#send(["k", String(id)]);
      };
      const cleanup = () => {
        if (timer) clearTimeout(timer);
        req.signal?.removeEventListener("abort", kill);
      };
      this.#add(id, {
        onFrame: (fields, payload, length) => {
          cleanup();
          if (fields[0] === "e") {
            reject(new RunnerFailure(fields[1] ?? "EIO", fields[2] ?? ""));
            return true;
          }
          const all = Buffer.concat(payload, length);
          const outLen = Number(fields[3]);
          const r: ExecResult = {
            exitCode: killed ? -1 : Number(fields[1]),
            stdout: all.subarray(0, outLen),
            stderr: all.subarray(outLen),
            timedOut: killed,
            truncated: fields[2] === "1",
          };
          if (r.timedOut && r.stderr.length === 0) r.stderr = Buffer.from("timed out");
          resolve(r);
          return true;
        },
        onDeath: (why) => {
          cleanup();
          const r = killed ? { ...stopped(""), timedOut: true } : stopped(why);
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
    this.#add(id, {
      onFrame: (fields, payload, length) => {
        const kind = fields[0];
        if (kind === "1" || kind === "2") sink.output(kind === "1" ? 1 : 2, payload.length === 1 ? payload[0]! : Buffer.concat(payload, length));
        else if (kind === "a") sink.written(Number(fields[1]) || 0);
        else if (kind === "q") sink.exit(Number(fields[1]));
        else if (kind === "e") sink.failed(new RunnerFailure(fields[1] ?? "EIO", fields[2] ?? ""), 127);
        return kind === "q" || kind === "e";
      },
      onDeath: (why) => sink.failed(runnerGone(why), this.#spawnFailed ? 127 : null),
    });
    const env = Object.entries(req.env).map(([k, v]) => `${k}=${v}`);
    this.#send(["p", sid, String(window), req.cwd, String(req.argv.length), ...req.argv, ...env]);
    const live = () => this.#pending.has(id);
    return {
      write: (data) => {
        for (let at = 0; live() && at < data.byteLength; at += CHUNK) this.#send(["i", sid], data.subarray(at, at + CHUNK));
      },
      end: () => live() && this.#send(["I", sid]),
      consumed: (stream, bytes) => live() && this.#send(["a", sid, String(stream), String(bytes)]),
      kill: () => live() && this.#send(["k", sid]),
    };
  }

  /** One request answered by one "o" (or "e") frame. */
  call(op: string, args: string[], payload?: Buffer): Promise<RunnerReply> {
    return this.#request((id) => this.#send([op, String(id), ...args], payload), (resolve, reject) => ({
      onFrame: (fields, chunks, length) => {
        if (fields[0] === "e") reject(new RunnerFailure(fields[1] ?? "EIO", fields[2] ?? ""));
        else resolve({ fields: fields.slice(1), payload: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length) });
        return true;
      },
    }));
  }

  /**
   * Reads a file into one buffer sized by the runner's fstat (grown only if the file grows): a big file
   * through the runner's descriptor when the runner is on this kernel, else in chunks over the pipe.
   */
  read(rel: string, maxBytes: number | undefined, handoff = this.#canHandOff() || this.#canRemote()): Promise<Buffer> {
    let out: Buffer | undefined;
    let len = 0;
    const cap = maxBytes === undefined ? "-" : String(maxBytes);
    let rid = 0;
    return this.#request((id) => ((rid = id), this.#send([handoff ? "R" : "r", String(id), rel, cap])), (resolve, reject) => ({
      onFrame: (fields, chunks, length) => {
        const kind = fields[0];
        if (kind === "h") {
          // Settled here; the held descriptor is released once read, and a failed hand-off reads again over the pipe.
          const h = parseHandedOff(fields);
          const done = this.#drain(h, Number(fields[4]) || 0, maxBytes);
          // Through the service's file API the release waits for the next frame (see #sendLazy).
          const local = this.#hostPid !== undefined;
          void done.finally(() => (local ? this.#send(["z", String(rid)]) : this.#sendLazy(["z", String(rid)]))).catch(() => undefined);
          resolve(done.catch((e: unknown) => (e instanceof RunnerFailure || this.#dead ? Promise.reject(e) : this.read(rel, maxBytes, false))));
          return true;
        }
        if (kind === "s") {
          out = Buffer.allocUnsafe(Number(fields[1]) || 0);
          return false;
        }
        if (kind === "d") {
          if (!out || len + length > out.length) {
            const grown = Buffer.allocUnsafe(Math.max(len + length, (out?.length ?? 0) * 2));
            out?.copy(grown, 0, 0, len);
            out = grown;
          }
          for (const c of chunks) len += c.copy(out, len);
          return false;
        }
        if (kind === "e") reject(new RunnerFailure(fields[1] ?? "EIO", fields[2] ?? ""));
        else resolve(out ? out.subarray(0, len) : Buffer.alloc(0));
        return true;
      },
    }));
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
    return this.#request(
      (id) => {
        const sid = String(id);
        if (handoff) return this.#send(["W", sid, rel, kind, m]);
        this.#send(["w", sid, rel, kind, m], data.subarray(0, CHUNK));
        stream(sid, CHUNK);
      },
      (resolve, reject) => {
        let sid = "";
        return {
          onFrame: (fields) => {
            if (fields[0] === "h") {
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

  #canHandOff(): boolean {
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
  async #drain(h: HandedOff | undefined, size: number, maxBytes: number | undefined): Promise<Buffer> {
    if (!h) throw new Error("no hand-off");
    const pid = await this.#runnerHostPid();
    if (pid !== undefined) return readHandedOff(pid, h, size, maxBytes);
    const remote = this.#t.remoteFiles;
    if (!remote || this.#nsPid === undefined) throw new Error("no hand-off");
    let data: Buffer;
    try {
      data = await remote.download(this.#remotePath(h));
    } catch (e) {
      if (this.#dead) throw runnerGone(this.#why);
      return this.#remoteFailed(e);
    }
    // The runner held the descriptor throughout (a pid reused after its end would name another process's).
    if (this.#dead) throw runnerGone(this.#why);
    if (maxBytes !== undefined && data.length > maxBytes) throw new RunnerFailure("TOOBIG", String(data.length));
    return data;
  }

  /** Fills the runner's fresh file through its descriptor: on this kernel through its /proc link, else through the service's file API. */
  async #fill(h: HandedOff | undefined, data: Uint8Array): Promise<void> {
    if (!h) throw new Error("no hand-off");
    const pid = await this.#runnerHostPid();
    if (pid !== undefined) return writeHandedOff(pid, h, data);
    const remote = this.#t.remoteFiles;
    if (!remote || this.#nsPid === undefined) throw new Error("no hand-off");
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
    if (!this.#dead) {
      // Held while stopping, so a caller awaiting close() is not dropped by an idle event loop.
      this.#t.ref?.();
      this.#killTransport();
    }
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

  #request<T>(
    send: (id: number) => void,
    make: (resolve: (v: T | Promise<T>) => void, reject: (e: unknown) => void) => Omit<Pending, "onDeath"> & { bind?: (id: number) => void },
  ): Promise<T> {
    if (this.#dead) return Promise.reject(runnerGone(this.#why));
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      const p = make(resolve, reject);
      p.bind?.(id);
      this.#add(id, { onFrame: p.onFrame, onDeath: (why) => reject(runnerGone(why)) });
      send(id);
    });
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
    const side = { w: new Socket({ fd: opened.w, readable: false, writable: true }), r: new Socket({ fd: opened.r, readable: true, writable: false }) };
    const reader = new FrameReader((id, fields, payload, length) => this.#onFrame(id, fields, payload, length));
    side.r.on("data", (c: Buffer) => reader.push(c));
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
    else if (p && id === 0) this.#pending.delete(0);
  }

  #settled(id: number): void {
    this.#pending.delete(id);
    if (this.#calls() === 0) {
      this.#idle();
      if (this.#retired && !this.#dead) void this.stop();
    }
  }

  #die(): void {
    if (this.#dead) return;
    this.#dead = true;
    this.#side?.w.destroy();
    this.#side?.r.destroy();
    const all = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of all) p.onDeath(this.#why);
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

/** Splits one stream of reply frames (u32 id, u32 header length, u32 payload length, header, payload). */
class FrameReader {
  readonly #chunks: Buffer[] = [];
  #buffered = 0;
  constructor(private readonly onFrame: (id: number, fields: string[], payload: Buffer[], length: number) => void) {}

  push(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    while (this.#buffered >= REPLY_PREFIX) {
      const head = this.#peek(REPLY_PREFIX);
      const id = head.readUInt32BE(0);
      const hl = head.readUInt32BE(4);
      const pl = head.readUInt32BE(8);
      if (this.#buffered < REPLY_PREFIX + hl + pl) break;
      this.#take(REPLY_PREFIX);
      const fields = hl ? Buffer.concat(this.#take(hl), hl).toString("utf8").split("\0") : [];
      this.onFrame(id, fields, this.#take(pl), pl);
    }
  }

  #peek(n: number): Buffer {
    const first = this.#chunks[0]!;
    if (first.length >= n) return first;
    const whole = Buffer.concat(this.#chunks);
    this.#chunks.length = 0;
    this.#chunks.push(whole);
    return whole;
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
