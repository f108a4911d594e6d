import { randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import { Writable } from "node:stream";
import type { Sandbox as DaytonaSdkSandbox } from "@daytonaio/sdk";
import { takeBatch } from "../../kit/runner/batch.js";
import type { RemoteFiles, RunnerTransport } from "../../kit/runner/index.js";
import { textChannelReader, textRunnerArgv } from "../../kit/runner/text-channel.js";
import { daytonaFailure } from "./errors.js";
import { q } from "./scripts.js";
import { ExecFailedError } from "../../errors.js";

/** Prefix of the sessions that run a runner (a test, or an operator, can tell them from MCP servers). */
export const RUNNER_SESSION_PREFIX = "agentws-runner-";
/** Raw bytes one input call carries at most (base64 makes it a third more). */
const MAX_INPUT = 4 << 20;
/** Raw bytes per base64 line of input (a multiple of 3: no padding inside a call). */
const LINE = 48 << 10;
/** Queued stdin bytes over which writers wait for the input calls to catch up. */
const INPUT_HIGH_WATER = 8 << 20;
/** Output over which the runner asks to be replaced: the sandbox's daemon keeps every session log (on disk). */
export const LOG_BUDGET = 256 << 20;

/** The runner as a Daytona session command; what the sandbox needs to know of it. */
export interface DaytonaRunnerTransport extends RunnerTransport {
  /** Set when the toolbox refused to create the session or the command (a stopped or gone sandbox). */
  readonly apiError: () => unknown;
  /** The command's exit code once it ended (126/127: no python3 in the sandbox), null when unknown. */
  readonly exitCode: () => Promise<number | null>;
  /** The session this runner lives in. */
  readonly session: string;
  /** True once this runner's log has grown past LOG_BUDGET: the sandbox retires it for a fresh one. */
  readonly spent: () => boolean;
  /** True once `exited` settled (the stream closed, the command ended or it was killed). */
  readonly ended: () => boolean;
}

/**
 * Starts the shared runner in its own Daytona session: one async session command running the runner
 * behind the base64 text wrapper (session input and logs are strings). Host bytes go down as base64 lines
 * through the session's input call (one call at a time, so chunks stay in order; what was written
 * meanwhile travels together in the next call); the followed log is decoded back into the runner's
 * frames. Killing it deletes the session, which ends the command and everything it started. With
 * `remoteFiles` (the toolbox's file routes), big files skip the session for the runner's descriptors.
 */
export function startDaytonaRunner(sb: DaytonaSdkSandbox, root: string, python = "python3", remoteFiles?: RemoteFiles): DaytonaRunnerTransport {
  const p = sb.process;
  const session = `${RUNNER_SESSION_PREFIX}${randomBytes(8).toString("hex")}`;
  const reader = textChannelReader();
  let apiError: unknown;
  let killed = false;
  let tail = "";
  let logged = 0;
  let code: number | null = null;
  let settle!: (v: { why: string }) => void;
  const exited = new Promise<{ why: string }>((resolve) => (settle = resolve));
  let done = false;
  const finish = (why: string) => {
    if (done) return;
    done = true;
    reader.end();
    settle({ why });
  };

  // The workspace folder is made here, on the runner's start, rather than by a command of its own at connect.
  const command = `mkdir -p -- ${q(root)} && ${textRunnerArgv(python, root, true).map(q).join(" ")}`;
  let follower: LogFollower | undefined;
  let held = false;
  const started = (async () => {
    await p.createSession(session);
    const { cmdId } = await p.executeSessionCommand(session, { command, runAsync: true, suppressInputEcho: true });
    if (!cmdId) throw new ExecFailedError("the toolbox gave no command id");
    return cmdId;
  })();
  started.catch(() => undefined);

  void (async () => {
    let cmd: string;
    try {
      cmd = await started;
    } catch (e) {
      apiError = e;
      if (!killed) void p.deleteSession(session).catch(() => undefined);
      return finish(daytonaFailure(e).message);
    }
    if (killed) return;
    const onOut = (s: string | Buffer) => {
      logged += s.length;
      reader.write(s);
    };
    const onErr = (s: string | Buffer) => void (tail = (tail + s.toString()).slice(-2000));
    follower = followLogs(sb, session, cmd, onOut, onErr);
    if (held) follower?.ref();
    else follower?.unref();
    await (follower ? follower.done : p.getSessionCommandLogs(session, cmd, onOut, onErr)).catch((e: unknown) => void (tail ||= daytonaFailure(e).message));
    if (!killed) {
      // The exit code can be recorded a moment after the log closes.
      for (let i = 0; i < 20 && code === null && !killed; i++) {
        code = await p.getSessionCommand(session, cmd).then(
          (c) => c.exitCode ?? null,
          () => -1,
        );
        if (code === null) await new Promise((r) => setTimeout(r, 10));
      }
      if (code === -1) code = null;
    }
    finish(tail);
    // The stream may close under a runner that still lives (a lost connection): never leave it behind.
    if (!killed) void p.deleteSession(session).catch(() => undefined);
  })();

  // stdin: chunks queue up; one input call at a time carries everything queued when it starts.
  let queue: Buffer[] = [];
  let queued = 0;
  let sending = false;
  let waiting: (() => void) | undefined;
  const release = () => {
    const cb = waiting;
    if (cb && queued < INPUT_HIGH_WATER) {
      waiting = undefined;
      cb();
    }
  };
  const pump = (): void => {
    if (queue.length === 0 || done) {
      sending = false;
      queue = [];
      queued = 0;
      release();
      return;
    }
    const batch = takeBatch(queue, MAX_INPUT).data;
    const n = batch.length;
    queued -= n;
    release();
    // Lines of LINE bytes: the wrapper decodes and passes on each as it arrives, not once the call's whole body is in.
    let line = "";
    for (let at = 0; at < n; at += LINE) line += `${batch.subarray(at, at + LINE).toString("base64")}\n`;
    started
      .then((cmd) => p.sendSessionCommandInput(session, cmd, line))
      .then(pump, (e: unknown) => {
        // Input refused: the command is gone (or the sandbox): this runner is over.
        tail ||= `input refused: ${daytonaFailure(e).message}`;
        kill();
        pump();
      });
  };
  const stdin = new Writable({
    write(chunk: Buffer, _enc, cb) {
      if (done) return cb();
      queue.push(chunk);
      queued += chunk.length;
      if (!sending) {
        sending = true;
        // Frames written in the same turn (a request's header and its payload) travel in one call.
        setImmediate(pump);
      }
      if (queued < INPUT_HIGH_WATER) cb();
      else waiting = cb;
    },
    final(cb) {
      kill();
      cb();
    },
  });

  function kill(): void {
    if (killed) return;
    killed = true;
    // Deleting the session ends the command (and the runner with its commands); the stream then closes.
    void started
      .then(
        () => p.deleteSession(session).catch(() => undefined),
        () => undefined,
      )
      .then(() => {
        follower?.close();
        finish(tail);
      });
  }

  return {
    stdin,
    stdout: reader,
    exited,
    kill,
    session,
    ...(remoteFiles ? { remoteFiles } : {}),
    apiError: () => apiError,
    spent: () => logged > LOG_BUDGET,
    ended: () => done,
    ref: () => {
      held = true;
      follower?.ref();
    },
    unref: () => {
      held = false;
      follower?.unref();
    },
    exitCode: async () => {
      await exited;
      return code;
    },
  };
}

interface LogFollower {
  readonly done: Promise<void>;
  close(): void;
  ref(): void;
  unref(): void;
}

interface WsLike {
  binaryType: string;
  on(event: "message", fn: (data: Buffer) => void): void;
  on(event: "close" | "open", fn: () => void): void;
  on(event: "error", fn: (e: Error) => void): void;
  close(): void;
  terminate(): void;
  _socket?: { ref(): void; unref(): void } | null;
}
type WsCtor = new (url: string, protocols: string[], options: { headers: Record<string, string> }) => WsLike;

let wsCtor: WsCtor | null | undefined;
/** `ws`, as the SDK itself loads it (its own dependency); null when it cannot be found. */
function loadWs(): WsCtor | null {
  if (wsCtor !== undefined) return wsCtor;
  try {
    const sdk = createRequire(import.meta.url).resolve("@daytonaio/sdk");
    wsCtor = createRequire(sdk)("ws") as WsCtor;
  } catch {
    wsCtor = null;
  }
  return wsCtor;
}

const STDOUT_MARK = Buffer.from([1, 1, 1]);
const STDERR_MARK = Buffer.from([2, 2, 2]);

/**
 * Follows a session command's log over the toolbox's WebSocket (`.../logs?follow=true`, the SDK's own
 * call and headers), demultiplexed as bytes: the SDK's follower decodes every byte through a JS array,
 * far too slow for the runner's traffic, and its socket cannot be let go of. Undefined where the SDK's
 * configuration is not the one this knows (the caller then uses the SDK's follower).
 */
function followLogs(sb: DaytonaSdkSandbox, session: string, cmd: string, onOut: (b: Buffer) => void, onErr: (b: Buffer) => void): LogFollower | undefined {
  const config = (sb.process as unknown as { clientConfig?: { basePath?: unknown; baseOptions?: { headers?: unknown } } }).clientConfig;
  const Ws = loadWs();
  const base = config?.basePath;
  const headers = config?.baseOptions?.headers;
  if (!Ws || typeof base !== "string" || !/^https?:/.test(base) || typeof headers !== "object" || headers === null || !("Authorization" in headers))
    return undefined;
  const url = `${base.replace(/^http/, "ws")}/process/session/${encodeURIComponent(session)}/command/${encodeURIComponent(cmd)}/logs?follow=true`;
  let ws: WsLike;
  try {
    ws = new Ws(url, [], { headers: headers as Record<string, string> });
  } catch {
    return undefined;
  }
  ws.binaryType = "nodebuffer";
  let held = true;
  let current: ((b: Buffer) => void) | undefined;
  let carry = Buffer.alloc(0);
  const emit = (b: Buffer) => {
    if (b.length && current) current(b);
  };
  ws.on("message", (m: Buffer) => {
    let data = carry.length ? Buffer.concat([carry, m]) : m;
    carry = Buffer.alloc(0);
    let pos = 0;
    for (;;) {
      const o = data.indexOf(STDOUT_MARK, pos);
      const e = data.indexOf(STDERR_MARK, pos);
      const next = o < 0 ? e : e < 0 ? o : Math.min(o, e);
      if (next < 0) {
        // A marker may be cut between messages: its first bytes wait for the next one.
        let hold = 0;
        const last = data[data.length - 1];
        if (data.length - pos >= 1 && (last === 1 || last === 2)) hold = data.length - pos >= 2 && data[data.length - 2] === last ? 2 : 1;
        emit(data.subarray(pos, data.length - hold));
        carry = Buffer.from(data.subarray(data.length - hold));
        break;
      }
      emit(data.subarray(pos, next));
      current = next === o ? onOut : onErr;
      pos = next + 3;
    }
    data = Buffer.alloc(0);
  });
  const done = new Promise<void>((resolve, reject) => {
    ws.on("open", () => (held ? ws._socket?.ref() : ws._socket?.unref()));
    ws.on("close", () => {
      emit(carry);
      resolve();
    });
    ws.on("error", (e) => reject(e));
  });
  return {
    done,
    close: () => {
      try {
        ws.terminate();
      } catch {
        /* already closed */
      }
    },
    ref: () => {
      held = true;
      ws._socket?.ref();
    },
    unref: () => {
      held = false;
      ws._socket?.unref();
    },
  };
}
