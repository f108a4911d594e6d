import { PassThrough, type Duplex } from "node:stream";
import type Docker from "dockerode";
import { RUNNER_SOURCE, systemPythonArgv, type RunnerTransport } from "../shared/runner/index.js";
import { matchRunnerPid } from "../shared/runner/handoff.js";

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
 * pid here and big files may be handed off by descriptor.
 */
export function startDockerRunner(docker: Docker, container: Docker.Container, env: string[], root: string, local = false): DockerRunnerTransport {
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
        Cmd: systemPythonArgv(root, RUNNER_SOURCE),
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
      docker.modem.demuxStream(s, stdout, stderr);
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
