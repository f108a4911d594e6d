import { PassThrough, type Duplex } from "node:stream";
import type { Readable, Writable } from "node:stream";
import type Docker from "dockerode";
import { RUNNER_SOURCE, systemPythonArgv, type RunnerTransport } from "../../kit/runner/index.js";
import { matchRunnerPid } from "../../kit/runner/handoff.js";

/** A runner transport that could not even be created (the engine refused the exec): why, for the caller's error. */
export interface DockerRunnerTransport extends RunnerTransport {
  /** Set when the engine refused to create or start the exec (paused, stopped, gone container). */
  readonly apiError: () => unknown;
  /** Ends the runner's connection, giving `why` to the calls in flight. */
  end(why: string): void;
  /** The exec's exit code once it is over (126/127: no python3 in the image). */
  readonly exitCode: () => Promise<number | null>;
}

/**
 * Starts the shared runner as one long-lived `docker exec` with attached stdin (how Docker runs a
 * process with stdin and stdout): requests go down the hijacked connection, Docker's stdout/stderr
 * framing is demultiplexed on the way back. Closing the connection ends the runner (it reads EOF
 * and kills its commands).
 */
/**
 * `local`: the engine runs on this kernel (the driver saw the host folder shared), so the exec's pid is a
 * pid here (the private pipe pair). `hostDevice`: the device of that host folder by the host's own stat,
 * which a file handed off by descriptor must be on (without it, big files cross the channel). `source`
 * is the runner's (another program only in the hostile-runner tests).
 */
export function startDockerRunner(
  docker: Docker,
  container: Docker.Container,
  env: string[],
  root: string,
  local = false,
  hostDevice?: bigint,
  source = RUNNER_SOURCE,
): DockerRunnerTransport {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let tail = "";
  stderr.on("data", (c: Buffer) => (tail = (tail + c.toString()).slice(-2000)));
  let apiError: unknown;
  let stream: Duplex | undefined;
  let killed = false;
  let reason = "";
  // Whether the connection should hold the event loop open; applied once the stream exists too.
  let held = false;
  const apply = () => {
    const sock = stream as unknown as { ref?: () => void; unref?: () => void } | undefined;
    if (held) sock?.ref?.();
    else sock?.unref?.();
  };
  let exec: Docker.Exec | undefined;
  const exited = (async (): Promise<{ why: string }> => {
    try {
      exec = await container.exec({
        Cmd: systemPythonArgv(root, source),
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        Env: env,
        WorkingDir: "/",
      });
      const s = (await exec.start({ hijack: true, stdin: true })) as unknown as Duplex;
      stream = s;
      apply();
      if (killed) s.destroy();
      // Our own demux: dockerode's buffers each whole frame a header claims (a runner claiming 4 GiB pinned what it sent).
      demuxBounded(s, stdout, stderr, (why) => {
        reason = `its stream broke Docker's framing: ${why}`;
        s.destroy();
      });
      stdin.pipe(s);
      s.on("error", () => undefined);
      await new Promise<void>((resolve) => {
        if (s.readableEnded || s.destroyed) return resolve();
        s.once("end", resolve);
        s.once("close", resolve);
        s.once("error", () => resolve());
      });
      return { why: reason || tail };
    } catch (e) {
      apiError = e;
      return { why: (e as { json?: { message?: string } })?.json?.message ?? (e instanceof Error ? e.message : String(e)) };
    } finally {
      stdout.end();
    }
  })();
  return {
    stdin,
    stdout,
    exited,
    kill: () => {
      killed = true;
      stream?.destroy();
    },
    ref: () => {
      held = true;
      apply();
    },
    unref: () => {
      held = false;
      apply();
    },
    end: (why: string) => {
      reason = why;
      killed = true;
      stream?.destroy();
    },
    apiError: () => apiError,
    ...(local
      ? {
          // The attach is relayed by dockerd: the client moves to a private pipe pair once the runner is found.
          relayed: true,
          hostDevice,
          runnerHostPid: async (nsPid: number) => {
            const pid = (await exec?.inspect())?.Pid;
            return pid ? matchRunnerPid([pid], nsPid) : undefined;
          },
        }
      : {}),
    exitCode: async () => {
      await exited;
      if (!exec) return null;
      for (let i = 0; i < 20; i++) {
        const info = await exec.inspect().catch(() => null);
        if (!info) return null;
        if (!info.Running) return info.ExitCode ?? null;
        await new Promise((r) => setTimeout(r, 10));
      }
      return null;
    },
  };
}

/**
 * Splits Docker's attach stream (8-byte headers: stream 0/1/2, three zero bytes, u32 length; then that
 * many bytes) into stdout and stderr as the bytes arrive: payload pieces pass on as views, never
 * gathered into a frame, so what is held is at most one header whatever length it claims. A header
 * that is not Docker's calls `broken` and reads nothing more.
 */
export function demuxBounded(src: Readable, stdout: Writable, stderr: Writable, broken: (why: string) => void): void {
  const head = Buffer.alloc(8);
  let headLen = 0;
  let left = 0;
  let to: Writable = stdout;
  let dead = false;
  src.on("data", (chunk: Buffer) => {
    let at = 0;
    while (!dead && at < chunk.length) {
      if (left > 0) {
        const n = Math.min(left, chunk.length - at);
        to.write(chunk.subarray(at, at + n));
        at += n;
        left -= n;
        continue;
      }
      const n = Math.min(8 - headLen, chunk.length - at);
      chunk.copy(head, headLen, at, at + n);
      headLen += n;
      at += n;
      if (headLen < 8) break;
      headLen = 0;
      const kind = head[0]!;
      if (kind > 2 || head[1] !== 0 || head[2] !== 0 || head[3] !== 0) {
        dead = true;
        broken(`a frame header ${head.toString("hex")}`);
        break;
      }
      to = kind === 2 ? stderr : stdout;
      left = head.readUInt32BE(4);
    }
  });
}
