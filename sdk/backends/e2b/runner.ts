import { Writable } from "node:stream";
import type { Sandbox as E2BSdkSandbox, CommandHandle } from "e2b";
import type { RunnerTransport } from "../shared/runner/index.js";
import { textChannelReader, textRunnerArgv } from "../shared/runner/text-channel.js";
import { quote } from "./scripts.js";

/** Most stdin bytes one SendInput carries: small frames written together go as one call, big ones in pieces. */
const MAX_BATCH = 4 << 20;
/** How long a runner whose stdin was closed has to exit on its own (ending its commands) before it is killed. */
const GRACE_MS = 2000;

/** A reply frame of a request this transport made itself (see `side`). */
export interface SideFrame {
  fields: string[];
  payload: Buffer;
}

/** Request ids of the transport's own requests: far above the client's (which count up from 1), below u32's end. */
const SIDE_BASE = 0x80000000;

export interface E2BRunnerTransport extends RunnerTransport {
  /**
   * Sends a request of its own to the runner, between the client's frames (whose replies the client
   * ignores, not knowing their ids); `onFrame` sees every reply frame until it returns true. Rejects when
   * the runner ends first.
   */
  side(fields: string[], onFrame: (f: SideFrame) => boolean, payload?: Buffer): { id: number; done: Promise<void> };
  /** A frame for the runner that needs no reply (`z`, `Z`), sent between the client's frames. */
  note(fields: string[]): void;
  /** The runner's pid in the sandbox's view (from its hello), once it said hello. */
  runnerPid(): number | undefined;
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
 */
export function startE2BRunner(sbx: E2BSdkSandbox, root: string, onApiError?: (e: unknown) => void): E2BRunnerTransport {
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

  const sides = new Map<number, { onFrame: (f: SideFrame) => boolean; reject: (e: unknown) => void }>();
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
      for (const x of sides.values()) x.reject(new Error("the sandbox runner stopped"));
      sides.clear();
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
        const parts: Buffer[] = [];
        let n = 0;
        while (queue.length && (n === 0 || n + queue[0]!.length <= MAX_BATCH)) {
          const c = queue.shift()!;
          parts.push(c);
          n += c.length;
        }
        await h.sendStdin(parts.length === 1 ? parts[0]! : Buffer.concat(parts, n));
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
  // The client's frames are followed byte by byte (u32 header length, u32 payload length, header, payload),
  // so frames of our own go in only where one of its frames ends.
  let prefix = Buffer.alloc(0);
  let rest = 0;
  const injected: Buffer[] = [];
  const atBoundary = () => rest === 0 && prefix.length === 0;
  const flushInjected = () => {
    while (injected.length) queue.push(injected.shift()!);
  };
  const take = (chunk: Buffer) => {
    let at = 0;
    while (at < chunk.length) {
      if (rest > 0) {
        const n = Math.min(rest, chunk.length - at);
        rest -= n;
        at += n;
      } else {
        const n = Math.min(8 - prefix.length, chunk.length - at);
        prefix = Buffer.concat([prefix, chunk.subarray(at, at + n)]);
        at += n;
        if (prefix.length === 8) {
          rest = prefix.readUInt32BE(0) + prefix.readUInt32BE(4);
          prefix = Buffer.alloc(0);
        }
      }
      if (atBoundary() && injected.length) {
        queue.push(chunk.subarray(0, at));
        flushInjected();
        chunk = chunk.subarray(at);
        at = 0;
      }
    }
    if (chunk.length) queue.push(chunk);
  };
  const stdin = new Writable({
    highWaterMark: 1 << 30,
    write(chunk: Buffer, _enc, cb) {
      if (!over && !killed) {
        take(chunk);
        kick();
      }
      cb();
    },
  });
  const frame = (fields: string[], payload?: Buffer): Buffer => {
    const header = Buffer.from(fields.join("\0"));
    const head = Buffer.allocUnsafe(8);
    head.writeUInt32BE(header.length, 0);
    head.writeUInt32BE(payload?.length ?? 0, 4);
    return Buffer.concat(payload ? [head, header, payload] : [head, header]);
  };
  const inject = (b: Buffer) => {
    if (over || killed) return;
    if (atBoundary()) queue.push(b);
    else injected.push(b);
    kick();
  };

  // Replies are followed too: the hello's pid, and the frames of our own requests.
  let nsPid: number | undefined;
  let nextSide = SIDE_BASE;
  const inbound: Buffer[] = [];
  let inLen = 0;
  reader.on("data", (c: Buffer) => {
    inbound.push(c);
    inLen += c.length;
    while (inLen >= 12) {
      let head = inbound[0]!;
      if (head.length < 12) {
        head = Buffer.concat(inbound);
        inbound.length = 0;
        inbound.push(head);
      }
      const id = head.readUInt32BE(0);
      const total = 12 + head.readUInt32BE(4) + head.readUInt32BE(8);
      if (inLen < total) break;
      const hl = head.readUInt32BE(4);
      const interesting = id === 0 || sides.has(id);
      let whole: Buffer | undefined;
      if (interesting) {
        whole = head.length >= total ? head.subarray(0, total) : Buffer.concat(inbound).subarray(0, total);
      }
      // Drop `total` bytes from the front.
      let n = total;
      inLen -= total;
      while (n > 0) {
        const f = inbound[0]!;
        if (f.length <= n) {
          inbound.shift();
          n -= f.length;
        } else {
          inbound[0] = f.subarray(n);
          n = 0;
        }
      }
      if (!whole) continue;
      const fields = whole.subarray(12, 12 + hl).toString("utf8").split("\0");
      if (id === 0) {
        if (fields[0] === "hello" && Number(fields[2]) > 0) nsPid = Number(fields[2]);
        continue;
      }
      const s = sides.get(id)!;
      if (s.onFrame({ fields, payload: whole.subarray(12 + hl) })) sides.delete(id);
    }
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
    runnerPid: () => nsPid,
    side: (fields, onFrame, payload) => {
      const id = nextSide++;
      const done = new Promise<void>((resolve, reject) => {
        if (over || killed) return reject(new Error("the sandbox runner stopped"));
        sides.set(id, {
          onFrame: (f) => {
            let done = false;
            try {
              done = onFrame(f);
            } catch (e) {
              reject(e);
              return true;
            }
            if (done) resolve();
            return done;
          },
          reject,
        });
        inject(frame([fields[0]!, String(id), ...fields.slice(1)], payload));
      });
      return { id, done };
    },
    note: (fields) => inject(frame(fields)),
    exitCode: async () => {
      await exited;
      return code;
    },
  };
}
