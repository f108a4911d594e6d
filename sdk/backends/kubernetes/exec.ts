import { PassThrough, Writable } from "node:stream";
import type { V1Status } from "@kubernetes/client-node";
import { loadKubernetesClient } from "./sdk.js";
import { RUNNER_SOURCE, systemPythonArgv, type RunnerTransport } from "../../kit/runner/index.js";
import type { KubeClients } from "./client.js";
import { UnavailableError } from "../../errors.js";
import { kubeError, shortMessage } from "./client.js";
import { CONTAINER, WORKDIR } from "./names.js";

/** The Pod an exec goes to. */
export interface PodRef {
  clients: KubeClients;
  namespace: string;
  pod: string;
}

interface Socket {
  close(): void;
  terminate?(): void;
  once(event: string, fn: (...args: unknown[]) => void): void;
  readyState: number;
  _socket?: { ref(): void; unref(): void };
}

/** The exit code a finished exec's status gives (client-node hands the v5 channel's last Status message). */
export function exitCodeOf(status: V1Status | undefined): number | null {
  if (!status) return null;
  if (status.status === "Success") return 0;
  const cause = status.details?.causes?.find((c) => c.reason === "ExitCode");
  if (cause?.message !== undefined && /^\d+$/.test(cause.message)) return Number(cause.message);
  // The runtime could not start the command (a missing binary): what a shell says for it.
  return 127;
}

export interface ExecStream {
  stdin: PassThrough;
  stdout: PassThrough;
  stderr: PassThrough;
  /** Resolves when the websocket is closed, with the final Status (undefined when the connection just ended). */
  done: Promise<{ status?: V1Status; error?: unknown }>;
  close(): void;
  ref(): void;
  unref(): void;
}

/**
 * One exec over the API server's websocket (v5.channel.k8s.io: stdin EOF is a close frame), stdin
 * attached. stdout and stderr end when the command does.
 */
export function openExec(target: PodRef, argv: string[]): ExecStream {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let socket: Socket | undefined;
  let closed = false;
  let held = true;
  const apply = () => (held ? socket?._socket?.ref() : socket?._socket?.unref());
  let status: V1Status | undefined;
  const done = (async (): Promise<{ status?: V1Status; error?: unknown }> => {
    try {
      const ws = (await new (loadKubernetesClient().Exec)(target.clients.kc).exec(
        target.namespace,
        target.pod,
        CONTAINER,
        argv,
        stdout,
        stderr,
        stdin,
        false,
        (s) => {
          status = s;
        },
      )) as unknown as Socket;
      socket = ws;
      apply();
      if (closed) ws.close();
      await new Promise<void>((resolve) => {
        if (ws.readyState >= 2) return resolve();
        ws.once("close", () => resolve());
        ws.once("error", () => resolve());
      });
      return status ? { status } : {};
    } catch (e) {
      return { error: e };
    } finally {
      stdout.end();
      stderr.end();
    }
  })();
  return {
    stdin,
    stdout,
    stderr,
    done,
    close: () => {
      closed = true;
      if (socket?.terminate) socket.terminate();
      else socket?.close();
    },
    ref: () => {
      held = true;
      apply();
    },
    unref: () => {
      held = false;
      apply();
    },
  };
}

/** A runner transport that says why it could not start (the Pod is gone, RBAC forbids exec...). */
export interface K8sRunnerTransport extends RunnerTransport {
  readonly apiError: () => unknown;
  /** The exec could not even reach the API server (restarting, unreachable): worth another try shortly. */
  readonly transientError: () => boolean;
  end(why: string): void;
}

/**
 * Starts the shared in-sandbox runner as ONE long-lived exec with stdin attached: every later
 * command and file operation is a frame on this websocket, not an exec of its own.
 */
export function startK8sRunner(target: PodRef): K8sRunnerTransport {
  const x = openExec(target, systemPythonArgv(WORKDIR, RUNNER_SOURCE));
  let tail = "";
  x.stderr.on("data", (c: Buffer) => (tail = (tail + c.toString()).slice(-2000)));
  let apiError: unknown;
  let transient = false;
  let reason = "";
  const exited = x.done.then(({ error, status }) => {
    if (error) {
      const status = upgradeStatus(error);
      transient = status === undefined;
      // 404: the Pod is gone; 400: it is not running (yet, or any more). Both "unavailable": a resume may fix them.
      // eslint-disable-next-line no-restricted-syntax -- stands for a Kubernetes client error (`code` = HTTP status), which kubeError classifies
      const clientError = status === undefined ? error : Object.assign(new Error(shortMessage(error)), { code: status });
      apiError =
        status === 404 || status === 400
          ? new UnavailableError(`pod ${target.namespace}/${target.pod} is gone or not running (exec answered ${status})`, { cause: error })
          : kubeError(clientError, `exec into pod ${target.pod}`, target.clients.source);
      return { why: shortMessage(error) };
    }
    const code = exitCodeOf(status);
    return { why: reason || tail || (code !== null && code !== 0 ? `runner exited ${code}` : "runner connection closed") };
  });
  return {
    stdin: x.stdin,
    stdout: x.stdout,
    exited,
    kill: () => x.close(),
    ref: () => x.ref(),
    unref: () => x.unref(),
    end: (why: string) => {
      reason = why;
      x.close();
    },
    apiError: () => apiError,
    transientError: () => transient,
  };
}

/** The HTTP status of a refused websocket upgrade ("Unexpected server response: 404"), undefined for a transport failure. */
export function upgradeStatus(e: unknown): number | undefined {
  const m = /Unexpected server response: (\d{3})/.exec(String((e as { message?: string })?.message ?? e));
  return m ? Number(m[1]) : undefined;
}

/** A Writable that drops what it is given (for a stream nobody reads). */
export function sink(): Writable {
  return new Writable({ write: (_c, _e, cb) => cb() });
}
