// Size: the HTTP route to the runner (the in-sandbox gateway's source and the host's transport), for
// backends whose commands take no stdin.
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
import { takeBatch } from "./batch.js";
import type { RunnerTransport } from "./client.js";
import { RUNNER_SOURCE } from "./source.js";

/** Most bytes one POST carries: queued frames go together, up to this. */
const MAX_BATCH = 8 << 20;
const END = 0xffffffff;

export const HTTP_GATEWAY_SOURCE = String.raw`
import fcntl, json, os, re, secrets, select, signal, socket, struct, subprocess, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
port, root, home, first = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
TOKEN = open(os.path.join(home, "gateway.token"), "rb").read().strip()
MAX_IN = 16 << 20      # bytes one POST may carry (the host sends at most 8 MiB)
MAX_CHANNELS = 32      # runners alive at once; a host holds one per open handle
MAX_CONNECTIONS = 128  # connections served at once (each a thread)
ORPHAN_S = 30          # a channel nobody reads within this long is ended
BEAT_S = 15            # heartbeat on a silent stream
chans = {}
spares = {}            # runner version -> a runner started ahead, so a channel opens without waiting for python
lock = threading.Lock()

class Chan:
    def __init__(self, runner):
        self.runner = runner
        self.p = subprocess.Popen([sys.executable, "-I", "-S", runner, root], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        # Big pipes: a 1 MiB file crosses in a few wake-ups instead of sixteen 64 KiB ones each way.
        for f in (self.p.stdin, self.p.stdout):
            try:
                fcntl.fcntl(f.fileno(), 1031, 1 << 20)  # F_SETPIPE_SZ
            except OSError:
                pass
        self.err = b""
        self.reader = False
        self.read_done = False
        self.born = time.monotonic()
        self.wlock = threading.Lock()
        threading.Thread(target=self.drain_err, daemon=True).start()
    def drain_err(self):
        fd = self.p.stderr.fileno()
        while True:
            try:
                b = os.read(fd, 65536)
            except OSError:
                return
            if not b:
                return
            self.err = (self.err + b)[-4000:]
    def end(self):
        # Closing stdin makes the runner end its commands and exit; a runner that does not is killed.
        with self.wlock:
            try:
                self.p.stdin.close()
            except OSError:
                pass
        def later():
            try:
                self.p.wait(3)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        threading.Thread(target=later, daemon=True).start()

def runner_path(version):
    return os.path.join(home, "runner-" + version + ".py")

def spare(version):
    with lock:
        if version in spares or not os.path.isfile(runner_path(version)):
            return
        try:
            spares[version] = Chan(runner_path(version))
        except OSError:
            pass

def reap():
    while True:
        time.sleep(5)
        now = time.monotonic()
        with lock:
            for k, c in list(chans.items()):
                if (not c.reader and now - c.born > ORPHAN_S) or (c.read_done and c.p.poll() is not None):
                    c.end()
                    del chans[k]

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 300          # an idle or stalled connection is dropped (a live stream writes at least every BEAT_S)
    def log_message(self, *a):
        pass
    def reply(self, code, body=b"", ctype="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def refuse(self, code, msg):
        # The request's body may be unread: this connection is not reused.
        self.close_connection = True
        self.reply(code, json.dumps({"error": msg}).encode())
    def route(self, method):
        if not secrets.compare_digest(self.headers.get("x-agentws-token", "").encode(), TOKEN):
            return self.refuse(403, "bad token")
        # Match the route from the end: a proxy in front may keep its own prefix.
        parts = self.path.split("?")[0].strip("/").split("/")
        if method == "GET" and parts[-1:] == ["ping"]:
            return self.reply(200, b'{"ok":true}')
        if method == "POST" and parts[-1:] == ["open"]:
            return self.open()
        if len(parts) >= 3 and parts[-3] == "c":
            with lock:
                c = chans.get(parts[-2])
            if c is None:
                return self.refuse(404, "no such channel")
            if method == "GET" and parts[-1] == "out":
                return self.out(c, parts[-2])
            if method == "POST" and parts[-1] == "in":
                return self.into(c)
            if method == "POST" and parts[-1] == "close":
                c.end()
                return self.reply(204)
        return self.refuse(404, "no route")
    def guarded(self, method):
        try:
            self.route(method)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            self.refuse(400, "bad request: %s" % str(e)[:200])
    def do_GET(self):
        self.guarded("GET")
    def do_POST(self):
        self.guarded("POST")
    def open(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > 4096:
            return self.refuse(413, "request too large")
        a = json.loads(self.rfile.read(n) or b"{}")
        want = a.get("runner", "") if isinstance(a, dict) else ""
        if not isinstance(want, str) or not re.fullmatch(r"[0-9a-f]{16}", want):
            return self.refuse(400, "runner: not a runner version")
        runner = runner_path(want)
        if not os.path.isfile(runner):
            return self.refuse(409, "runner " + want + " is not installed")
        with lock:
            if len(chans) >= MAX_CHANNELS:
                return self.refuse(429, "too many open channels")
            c = spares.pop(want, None)
            if c is None or c.p.poll() is not None:
                c = Chan(runner)
            c.born = time.monotonic()
            k = secrets.token_hex(16)
            chans[k] = c
        self.reply(200, json.dumps({"id": k, "pid": c.p.pid}).encode())
        spare(want)
    def into(self, c):
        n = int(self.headers.get("Content-Length") or -1)
        if n < 0 or n > MAX_IN:
            return self.refuse(413, "body must have a length of at most %d" % MAX_IN)
        with c.wlock:
            try:
                fd = c.p.stdin.fileno()
                while n:
                    b = self.rfile.read(min(n, 1 << 20))
                    if not b:
                        break
                    n -= len(b)
                    v = memoryview(b)
                    while v:
                        v = v[os.write(fd, v):]
            except (OSError, ValueError):
                return self.refuse(410, "the runner's stdin is closed")
        self.reply(204)
    def out(self, c, k):
        with lock:
            taken, c.reader = c.reader, True
        if taken:
            return self.refuse(409, "the channel already has a reader")
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Accel-Buffering", "no")
        self.end_headers()
        self.close_connection = True
        out, sock, w = c.p.stdout.fileno(), self.connection, self.wfile
        def send(rec):
            w.write(b"%x\r\n" % len(rec) + rec + b"\r\n")
        try:
            while True:
                r, _, _ = select.select([out, sock], [], [], BEAT_S)
                if sock in r:
                    # The host sends nothing on this connection: readable means it went away.
                    break
                if out in r:
                    data = os.read(out, 1 << 20)
                    if not data:
                        try:
                            code = c.p.wait(5)
                        except subprocess.TimeoutExpired:
                            code = None
                        info = json.dumps({"code": code, "stderr": c.err.decode("utf-8", "replace")}).encode()
                        send(struct.pack(">II", 0xffffffff, len(info)) + info)
                        w.write(b"0\r\n\r\n")
                        break
                    send(struct.pack(">I", len(data)) + data)
                else:
                    send(b"\0\0\0\0")
        except OSError:
            pass
        finally:
            c.read_done = True
            c.end()
            with lock:
                chans.pop(k, None)

class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
    def process_request(self, request, client_address):
        # A thread per connection, but not without bound: beyond it a connection is closed at once.
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        ThreadingHTTPServer.process_request(self, request, client_address)
    def process_request_thread(self, request, client_address):
        try:
            ThreadingHTTPServer.process_request_thread(self, request, client_address)
        finally:
            self.slots.release()

srv = Server(("0.0.0.0", port), H)
# Bound: the starting command may return. The gateway lives on as a daemon of its own session.
child = os.fork()
if child:
    open(os.path.join(home, "gateway.pid"), "w").write(str(child))
    os._exit(0)
os.setsid()
fd = os.open(os.path.join(home, "gateway.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
nul = os.open(os.devnull, os.O_RDONLY)
os.dup2(nul, 0)
os.dup2(fd, 1)
os.dup2(fd, 2)
signal.signal(signal.SIGPIPE, signal.SIG_IGN)
threading.Thread(target=reap, daemon=True).start()
spare(first)
srv.serve_forever()
`;

const hash16 = (s: string) => createHash("sha256").update(s).digest("hex").slice(0, 16);
/** The gateway's version: a changed gateway replaces the one running (its channels end with it). */
export const HTTP_GATEWAY_VERSION = hash16(HTTP_GATEWAY_SOURCE);
/** The runner's version: runners of several versions coexist under one gateway (replicas mid-upgrade). */
export const HTTP_RUNNER_VERSION = hash16(RUNNER_SOURCE);

/**
 * A POSIX sh script that installs the gateway and this runner under `home` (0700) and starts the gateway
 * on `port` unless one of this version already runs; it prints the gateway's token as its only stdout line.
 * Concurrent starts (replicas) share one gateway (flock). The sources travel inside the script itself.
 */
export function httpGatewayScript(o: { home: string; port: number; root: string; python?: string; stale?: Array<{ pidFile: string; names: string }> }): string {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const h = q(o.home);
  const py = o.python ?? "python3";
  const heredoc = (file: string, body: string) => {
    const tag = `AGENTWS_${hash16(body).toUpperCase()}`;
    return `[ -f ${h}/${file} ] || { cat > ${h}/${file}.new <<'${tag}'\n${body}\n${tag}\nmv ${h}/${file}.new ${h}/${file}; }`;
  };
  return [
    "set -e",
    `command -v ${q(py)} >/dev/null 2>&1 || { echo "agentws: no ${py} in the sandbox" >&2; exit 127; }`,
    `mkdir -p ${h} ${q(o.root)}; chmod 700 ${h}; umask 077`,
    `exec 9>${h}/gateway.lock; flock 9 2>/dev/null || true`,
    heredoc(`runner-${HTTP_RUNNER_VERSION}.py`, RUNNER_SOURCE),
    // Running means: a live process (not a zombie: a sandbox's pid 1 may never reap it) running this gateway.
    `g=$(cat ${h}/gateway.pid 2>/dev/null || true); st=; [ -n "$g" ] && read -r _ _ st _ < /proc/$g/stat 2>/dev/null || true`,
    `if [ -s ${h}/gateway.token ] && [ -n "$st" ] && [ "$st" != Z ] && grep -qs gateway-${HTTP_GATEWAY_VERSION}.py /proc/$g/cmdline; then cat ${h}/gateway.token; echo; exit 0; fi`,
    // An older gateway (or an older daemon named in `stale`: pid file and what its command line names) holds
    // the port: it goes first. Only if that pid still runs it: a reused pid is some other process.
    ...[{ pidFile: `${o.home}/gateway.pid`, names: `${o.home}/gateway-` }, ...(o.stale ?? [])].map(
      ({ pidFile, names }) => `k=$(cat ${q(pidFile)} 2>/dev/null || true); [ -n "$k" ] && grep -qsF ${q(names)} /proc/$k/cmdline && kill "$k" 2>/dev/null && sleep 0.2 || true`,
    ),
    heredoc(`gateway-${HTTP_GATEWAY_VERSION}.py`, HTTP_GATEWAY_SOURCE),
    `od -An -N16 -tx1 /dev/urandom | tr -d ' \\n' > ${h}/gateway.token`,
    `${q(py)} -I -S ${h}/gateway-${HTTP_GATEWAY_VERSION}.py ${o.port} ${q(o.root)} ${h} ${HTTP_RUNNER_VERSION} 9>&-`,
    `cat ${h}/gateway.token; echo`,
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
  const agent = new lib.Agent({ keepAlive: true, maxSockets: 4 });
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
        { method, agent, headers: { ...headers, ...(body ? { "content-type": "application/octet-stream", "content-length": String(body.length) } : { "content-length": "0" }) } },
        (res) => {
          const parts: Buffer[] = [];
          res.on("data", (c: Buffer) => parts.push(c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts) }));
          res.on("error", reject);
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
            else if (state === "endlen") [state, need] = ["end", n];
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
    if (r.status !== 200) throw new Error(`the sandbox's runner gateway refused a channel (HTTP ${r.status}): ${r.body.toString().slice(0, 300)}`);
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
        if (r.status !== 204) throw new Error(`the runner's input was refused (HTTP ${r.status}): ${r.body.toString().slice(0, 200)}`);
        for (const cb of done) cb();
      }
    } catch (e) {
      const err = e instanceof Error ? e : new Error(String(e));
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
      if (over) return cb(new Error("the sandbox runner stopped"));
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
