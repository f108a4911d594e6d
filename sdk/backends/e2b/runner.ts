import { Writable } from "node:stream";
import type { Sandbox as E2BSdkSandbox, CommandHandle } from "e2b";
import { takeBatch } from "../../kit/runner/batch.js";
import type { RemoteFiles, RunnerTransport } from "../../kit/runner/index.js";
import { textChannelReader, textRunnerArgv } from "../../kit/runner/text-channel.js";
import { quote } from "./scripts.js";

/** Most stdin bytes one SendInput carries: small frames written together go as one call, big ones in pieces. */
const MAX_BATCH = 4 << 20;
/** How long a runner whose stdin was closed has to exit on its own (ending its commands) before it is killed. */
const GRACE_MS = 2000;

export interface E2BRunnerTransport extends RunnerTransport {
  /** The SDK error that started or ended this runner's trouble (the command refused, a lost stream, a failed send). */
  apiError(): unknown;
  /** The command's exit code once it is over (126/127: no python3 in the sandbox), null when unknown. */
  exitCode(): Promise<number | null>;
}

/**
 * Runners this process may have left alive in a sandbox, by sandbox id: started by us, their stream lost
 * (a pause drops every connection; processes survive it) or their kill refused (the sandbox was paused).
 * The next runner started in that sandbox ends them, so one sandbox never keeps two.
 */
const STALE = new Map<string, Set<number>>();

function markStale(sandboxId: string, pid: number): void {
  let set = STALE.get(sandboxId);
  if (!set) STALE.set(sandboxId, (set = new Set()));
  set.add(pid);
}

/** Ends a runner by envd pid: its stdin closed (it then ends its commands and exits), killed after a grace period. */
async function endRunner(sbx: E2BSdkSandbox, pid: number): Promise<boolean> {
  await sbx.commands.closeStdin(pid).catch(() => undefined);
  await new Promise((r) => setTimeout(r, 200));
  return sbx.commands.kill(pid).then(
    () => true,
    () => false,
  );
}

/**
 * Starts the shared runner as one long-lived E2B background command with stdin: requests go down as
 * stdin bytes (one SendInput per batch of frames, in order), replies come back as the base64 lines of the
 * text-channel wrapper (E2B delivers command output as decoded text). `root` is the workspace root in the
 * sandbox, made if missing. Ending it closes its stdin, so the runner ends its own commands first.
 * With `remoteFiles` (the files API), big files skip the command's streams for the runner's descriptors.
 */
export function startE2BRunner(sbx: E2BSdkSandbox, root: string, onApiError?: (e: unknown) => void, remoteFiles?: RemoteFiles): E2BRunnerTransport {
  const sandboxId = sbx.sandboxId;
  const stale = STALE.get(sandboxId);
  STALE.delete(sandboxId);
  if (stale) for (const pid of stale) void endRunner(sbx, pid).then((ok) => ok || markStale(sandboxId, pid));

  const reader = textChannelReader();
  let tail = "";
  let apiError: unknown;
  let code: number | null = null;
  let killed = false;
  let over = false;
  let handle: CommandHandle | undefined;
  const fail = (e: unknown) => {
    if (apiError === undefined) {
      apiError = e;
      onApiError?.(e);
    }
  };
  const argv = textRunnerArgv("python3", root, false);
  const line = `mkdir -p -- ${quote(root)} 2>/dev/null; exec ${argv.map(quote).join(" ")}`;
  const started = sbx.commands.run(line, {
    background: true,
    stdin: true,
    timeoutMs: 0,
    onStdout: (s) => void reader.write(s),
    onStderr: (s) => void (tail = (tail + s).slice(-2000)),
  });
  started.catch(() => undefined);

  const exited = (async (): Promise<{ why: string }> => {
    try {
      handle = await started;
      if (killed) void endRunner(sbx, handle.pid);
      try {
        code = (await handle.wait()).exitCode;
      } catch (e) {
        const c = (e as { exitCode?: unknown }).exitCode;
        if (typeof c === "number") code = c;
        else {
          // The stream was lost with the process maybe still running (a pause, a network cut): it is ended later.
          fail(e);
          if (!killed) markStale(sandboxId, handle.pid);
        }
      }
      return { why: tail || (apiError ? String((apiError as Error).message ?? apiError) : "") };
    } catch (e) {
      fail(e);
      return { why: String((e as Error)?.message ?? e) };
    } finally {
      over = true;
      reader.end();
    }
  })();

  // Frames are queued as the client writes them and sent in order, several per SendInput when they come together.
  const queue: Buffer[] = [];
  let sending = false;
  const pump = async () => {
    sending = true;
    try {
      const h = await started;
      while (queue.length && !over && !killed) {
        await h.sendStdin(takeBatch(queue, MAX_BATCH).data);
      }
    } catch (e) {
      // A send that failed leaves the stream with a hole: this runner is done (the next call starts another).
      fail(e);
      kill();
    } finally {
      sending = false;
      queue.length = 0;
    }
  };
  const kick = () => {
    if (!sending) void Promise.resolve().then(pump);
  };
  const stdin = new Writable({
    highWaterMark: 1 << 30,
    write(chunk: Buffer, _enc, cb) {
      if (!over && !killed) {
        queue.push(chunk);
        kick();
      }
      cb();
    },
  });

  const kill = () => {
    if (killed) return;
    killed = true;
    if (!handle) return;
    const h = handle;
    void (async () => {
      await sbx.commands.closeStdin(h.pid).catch(() => undefined);
      const gone = await Promise.race([exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), GRACE_MS).unref())]);
      if (gone && code !== null) return;
      const ok = await sbx.commands.kill(h.pid).then(
        () => true,
        () => false,
      );
      if (!ok) markStale(sandboxId, h.pid);
      // Our side is done with it either way.
      await h.disconnect().catch(() => undefined);
    })();
  };

  return {
    stdin,
    stdout: reader,
    exited,
    kill,
    get pid() {
      return handle?.pid;
    },
    apiError: () => apiError,
    ...(remoteFiles ? { remoteFiles } : {}),
    exitCode: async () => {
      await exited;
      return code;
    },
  };
}
