import { randomBytes } from "node:crypto";
import { Writable } from "node:stream";
import type { Sandbox as DaytonaSdkSandbox } from "@daytonaio/sdk";
import type { RunnerTransport } from "../shared/runner/index.js";
import { textChannelReader, textRunnerArgv } from "../shared/runner/text-channel.js";
import { daytonaFailure } from "./errors.js";
import { q } from "./scripts.js";

/** Prefix of the sessions that run a runner (a test, or an operator, can tell them from MCP servers). */
export const RUNNER_SESSION_PREFIX = "agentws-runner-";
/** Raw bytes one input call carries at most (base64 makes it a third more). */
const MAX_INPUT = 4 << 20;
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
}

/**
 * Starts the shared runner in its own Daytona session: one async session command running the runner
 * behind the base64 text wrapper (session input and logs are strings). Host bytes go down as base64 lines
 * through the session's input call (one call at a time, so chunks stay in order; what was written
 * meanwhile travels together in the next call); the followed log is decoded back into the runner's
 * frames. Killing it deletes the session, which ends the command and everything it started.
 */
export function startDaytonaRunner(sb: DaytonaSdkSandbox, root: string, python = "python3"): DaytonaRunnerTransport {
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

  const command = textRunnerArgv(python, root, true).map(q).join(" ");
  const started = (async () => {
    await p.createSession(session);
    const { cmdId } = await p.executeSessionCommand(session, { command, runAsync: true, suppressInputEcho: true });
    if (!cmdId) throw new Error("the toolbox gave no command id");
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
    await p
      .getSessionCommandLogs(
        session,
        cmd,
        (s) => {
          logged += s.length;
          reader.write(s);
        },
        (s) => void (tail = (tail + s).slice(-2000)),
      )
      .catch((e: unknown) => void (tail ||= daytonaFailure(e).message));
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
    const take: Buffer[] = [];
    let n = 0;
    while (queue.length && (n === 0 || n + queue[0]!.length <= MAX_INPUT)) {
      const c = queue.shift()!;
      take.push(c);
      n += c.length;
    }
    queued -= n;
    release();
    const line = `${Buffer.concat(take, n).toString("base64")}\n`;
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
    void started.then(
      () => p.deleteSession(session).catch(() => undefined),
      () => undefined,
    ).then(() => finish(tail));
  }

  return {
    stdin,
    stdout: reader,
    exited,
    kill,
    session,
    apiError: () => apiError,
    spent: () => logged > LOG_BUDGET,
    exitCode: async () => {
      await exited;
      return code;
    },
  };
}
