/**
 * The runner behind an HTTP port, for a backend whose commands take no stdin (OpenSandbox's execd). A
 * small gateway inside the sandbox (Python stdlib) listens on the port and starts one runner per
 * channel as its child; the host opens a channel, reads the runner's stdout as one long streamed GET
 * and sends its stdin as POSTs, in order. Bytes cross as they are (HTTP bodies are binary), so nothing
 * is base64'd. Every request carries a token the host got from the backend's own authenticated command
 * route. A channel whose reader went away ends its runner (closing its stdin, which ends its commands),
 * so a host that died leaves nothing running; idle streams carry a heartbeat so that proxies (the
 * OpenSandbox server's cuts a silent stream at 180 s) keep them open.
 *
 * Stream records on the GET: u32 length + bytes of the runner's stdout; length 0 is a heartbeat;
 * 0xffffffff is the end: u32 length + JSON {code, stderr} of the runner that exited.
 */
import { createHash } from "node:crypto";
import http from "node:http";
import https from "node:https";
import { PassThrough, Writable } from "node:stream";
import { ClosedError, ExecFailedError, InternalError, UnavailableError } from "../../errors.js";
import { takeBatch } from "./batch.js";
import type { RunnerTransport } from "./client.js";
import { HTTP_GATEWAY_SOURCE, HTTP_GATEWAY_START, RUNNER_SOURCE } from "./python.generated.js";

/** Most bytes one POST carries: queued frames go together, up to this. */
const MAX_BATCH = 8 << 20;
const END = 0xffffffff;
/**
 * The gateway runs in the sandbox, so its replies are hostile input too: a reply body (a channel's id, a
 * refusal) and the end record (the runner's exit code and stderr tail, 4000 bytes) are capped; stream
 * records pass on as they arrive, never gathered.
 */
const MAX_REPLY = 64 << 10;

/**
 * The gateway's Python (stdlib only) is two modules: HTTP_GATEWAY_START (python/gateway_start.py), run by the
 * starting command itself, and HTTP_GATEWAY_SOURCE (python/gateway.py), its body, which the start compiles
 * in the forked gateway and calls (`run`) with the listening socket; the runner is the third part. Re-exported
 * from the generated file (scripts/runner-source.ts).
 */
export { HTTP_GATEWAY_SOURCE, HTTP_GATEWAY_START };

const hash16 = (s: string) => createHash("sha256").update(s).digest("hex").slice(0, 16);
/** The gateway's version: a changed gateway replaces the one running (its channels end with it). */
export const HTTP_GATEWAY_VERSION = hash16(HTTP_GATEWAY_START + HTTP_GATEWAY_SOURCE);
/** The runner's version: runners of several versions coexist under one gateway (replicas mid-upgrade). */
export const HTTP_RUNNER_VERSION = hash16(RUNNER_SOURCE);
/** Separates the parts of the starting command's stdin: the start, the gateway's body, the runner. */
const PART = "\n#-- agentws: next part --\n";
const PARTS = [HTTP_GATEWAY_START, HTTP_GATEWAY_SOURCE, RUNNER_SOURCE].join(PART);
const PARTS_TAG = `AGENTWS_${hash16(PARTS).toUpperCase()}`;
if (PARTS.split(PART).length !== 3 || PARTS.split("\n").includes(PARTS_TAG))
  throw new InternalError("the runner's sources must not hold the gateway script's separators");

/**
 * A POSIX sh script that installs this runner under `home` (0700) and starts the gateway on `port`
 * unless one of this version already runs; it prints the gateway's token as its only stdout line.
 * Concurrent starts (replicas) share one gateway (a lock). The sources travel inside the script, as the
 * here-document that is python's stdin; one python process does the rest (HTTP_GATEWAY_START).
 */
export function httpGatewayScript(o: { home: string; port: number; root: string; python?: string; stale?: Array<{ pidFile: string; names: string }> }): string {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const py = o.python ?? "python3";
  // Reads the three parts, compiles the start (gateway_start.py) and calls its main with them.
  const boot = `import sys;A=sys.stdin.buffer.read(1<<22).split(b${JSON.stringify(PART)});exec(compile(A[0],"agentws-gateway-start","exec"));main(A)`;
  const stale = (o.stale ?? []).flatMap(({ pidFile, names }) => [q(pidFile), q(names)]);
  // The gateway's command line carries this: a start knows a gateway of its own version by it, and any
  // other start (older ones ran <home>/gateway-<version>.py) knows it as another version's, to replace.
  const mark = `${o.home}/gateway-${HTTP_GATEWAY_VERSION}`;
  return [
    `command -v ${q(py)} >/dev/null 2>&1 || { echo "agentws: no ${py} in the sandbox" >&2; exit 127; }`,
    `exec ${q(py)} -I -S -c ${q(boot)} ${q(mark)} ${o.port} ${q(o.root)} ${q(o.home)} ${HTTP_RUNNER_VERSION} ${stale.join(" ")} <<'${PARTS_TAG}'`,
    PARTS,
    PARTS_TAG,
  ].join("\n");
}

export interface HttpRunnerEndpoint {
  /** The gateway's base URL, as the backend's endpoint API gives it (any path prefix is kept). */
  url: string;
  /** Headers the route in front needs (a proxy's auth), besides our token. */
  headers?: Record<string, string>;
  token: string;
}

export interface HttpRunnerTransport extends RunnerTransport {
  /** The runner's pid in the sandbox's view, once the channel is open. */
  runnerPid(): number | undefined;
}

/** Opens one channel (one runner) on the gateway and carries the runner protocol over it. */
export function startHttpRunner(ep: HttpRunnerEndpoint): HttpRunnerTransport {
  const base = new URL(ep.url.endsWith("/") ? ep.url : `${ep.url}/`);
  const lib = base.protocol === "https:" ? https : http;
  // Idle sockets go well before the gateway drops them (300 s), so a reused socket is never one it closed.
  const agent = new lib.Agent({ keepAlive: true, maxSockets: 4, timeout: 60_000 });
  const headers = { ...ep.headers, "x-agentws-token": ep.token };
  const stdout = new PassThrough();
  let channel: { id: string; pid: number } | undefined;
  let over = false;
  let why = "";
  let response: http.IncomingMessage | undefined;
  let refd = true;
  let resolveExited!: (v: { why: string; spawnFailed?: boolean }) => void;
  const exited = new Promise<{ why: string; spawnFailed?: boolean }>((r) => (resolveExited = r));
  const finish = (reason: string, spawnFailed = false) => {
    if (over) return;
    over = true;
    why ||= reason;
    stdout.end();
    agent.destroy();
    resolveExited({ why, ...(spawnFailed ? { spawnFailed } : {}) });
  };

  const call = (method: string, route: string, body?: Buffer): Promise<{ status: number; body: Buffer }> =>
    new Promise((resolve, reject) => {
      const req = lib.request(
        new URL(route, base),
        {
          method,
          agent,
          headers: {
            ...headers,
            ...(body ? { "content-type": "application/octet-stream", "content-length": String(body.length) } : { "content-length": "0" }),
          },
        },
        (res) => {
          const parts: Buffer[] = [];
          let size = 0;
          res.on("data", (c: Buffer) => {
            size += c.length;
            if (size <= MAX_REPLY) parts.push(c);
            else res.destroy(new ExecFailedError(`the sandbox's runner gateway sent a reply over ${MAX_REPLY} bytes`));
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts) }));
          res.on("error", reject);
          res.on("close", () => size > MAX_REPLY && reject(new ExecFailedError(`the sandbox's runner gateway sent a reply over ${MAX_REPLY} bytes`)));
        },
      );
      req.on("error", reject);
      req.end(body);
    });

  // The runner's stdout: records of a streamed GET (see the file's head), unwrapped as they arrive.
  const follow = (id: string) => {
    const req = lib.request(new URL(`c/${id}/out`, base), { method: "GET", agent: false, headers }, (res) => {
      response = res;
      if (!refd) res.socket?.unref();
      if (res.statusCode !== 200) {
        res.resume();
        finish(`the sandbox's runner gateway refused the stream (HTTP ${res.statusCode})`);
        return;
      }
      let held: Buffer[] = [];
      let heldLen = 0;
      let need = 4;
      let state: "len" | "data" | "endlen" | "end" = "len";
      res.on("data", (chunk: Buffer) => {
        let at = 0;
        while (at < chunk.length) {
          const take = Math.min(need - heldLen, chunk.length - at);
          const piece = chunk.subarray(at, at + take);
          at += take;
          if (state === "data") {
            // Runner bytes pass on as views, never gathered.
            stdout.write(piece);
            need -= take;
            if (need === 0) [state, need] = ["len", 4];
            continue;
          }
          held.push(piece);
          heldLen += take;
          if (heldLen < need) continue;
          const whole = held.length === 1 ? held[0]! : Buffer.concat(held, heldLen);
          held = [];
          heldLen = 0;
          if (state === "len" || state === "endlen") {
            const n = whole.readUInt32BE(0);
            if (state === "len" && n === END) [state, need] = ["endlen", 4];
            else if (state === "endlen" && n > MAX_REPLY) {
              res.destroy();
              finish(`the runner's stream sent an end record of ${n} bytes`);
              return;
            } else if (state === "endlen") [state, need] = ["end", n];
            else if (n > 0) [state, need] = ["data", n];
          } else {
            try {
              const info = JSON.parse(whole.toString()) as { code?: number | null; stderr?: string };
              why = `${info.stderr ?? ""}`.trim() || (info.code === null ? "" : `runner exited ${info.code}`);
            } catch {
              why = "the runner ended";
            }
            [state, need] = ["len", 4];
          }
        }
      });
      res.on("end", () => finish("the runner's stream ended"));
      res.on("error", (e) => finish(`the runner's stream broke: ${e.message}`));
      res.on("close", () => finish("the runner's stream closed"));
    });
    req.on("error", (e) => finish(`the runner's stream could not be read: ${e.message}`));
    req.end();
  };

  const opened = (async () => {
    const r = await call("POST", "open", Buffer.from(JSON.stringify({ runner: HTTP_RUNNER_VERSION })));
    if (r.status !== 200) throw new UnavailableError(`the sandbox's runner gateway refused a channel (HTTP ${r.status}): ${r.body.toString().slice(0, 300)}`);
    const c = JSON.parse(r.body.toString()) as { id: string; pid: number };
    channel = c;
    follow(c.id);
    return c;
  })();
  opened.catch((e: unknown) => finish(String((e as Error).message ?? e), true));

  // Frames queue as the client writes them and go in order, several per POST when they come together.
  const queue: Buffer[] = [];
  const waiting: Array<(e?: Error | null) => void> = [];
  let sending = false;
  const pump = async () => {
    if (sending) return;
    sending = true;
    try {
      const c = await opened;
      while (queue.length && !over) {
        const { data, frames } = takeBatch(queue, MAX_BATCH);
        const done = waiting.splice(0, frames);
        const r = await call("POST", `c/${c.id}/in`, data);
        if (r.status !== 204) throw new UnavailableError(`the runner's input was refused (HTTP ${r.status}): ${r.body.toString().slice(0, 200)}`);
        for (const cb of done) cb();
      }
    } catch (e) {
      const err = e instanceof Error ? e : new ExecFailedError(String(e));
      for (const cb of waiting.splice(0)) cb(err);
      queue.length = 0;
      finish(err.message);
    } finally {
      sending = false;
      if (queue.length && !over) void pump();
    }
  };
  const stdin = new Writable({
    highWaterMark: 1 << 20,
    write(chunk: Buffer, _enc, cb) {
      if (over) return cb(new ClosedError("the sandbox runner stopped"));
      queue.push(chunk);
      waiting.push(cb);
      void pump();
    },
  });

  return {
    stdin,
    stdout,
    exited,
    get pid() {
      return channel?.pid;
    },
    runnerPid: () => channel?.pid,
    kill() {
      if (over) return;
      why ||= "stopped";
      // Closing the channel closes the runner's stdin: it ends its commands, then its stream ends. A
      // gateway that does not answer is left by dropping the stream (which ends the runner too).
      void opened.then((o) => call("POST", `c/${o.id}/close`)).catch(() => undefined);
      setTimeout(() => {
        response?.destroy();
        finish("stopped");
      }, 3000).unref();
      stdin.destroy();
    },
    ref() {
      refd = true;
      response?.socket?.ref();
    },
    unref() {
      refd = false;
      response?.socket?.unref();
    },
  };
}
