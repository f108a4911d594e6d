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
/**
 * The gateway runs in the sandbox, so its replies are hostile input too: a reply body (a channel's id, a
 * refusal) and the end record (the runner's exit code and stderr tail, 4000 bytes) are capped; stream
 * records pass on as they arrive, never gathered.
 */
const MAX_REPLY = 64 << 10;

/**
 * The gateway's start, run by the starting command itself (one python process, no shell tools: each
 * tool a shell script ran was a process start on the path to the first channel). It installs this
 * runner, and unless a gateway of this version runs (replicas starting at once take turns on a lock)
 * binds the port, forks the gateway off and prints the new token. The gateway forks its first spare
 * runner from itself, then compiles its body (HTTP_GATEWAY_SOURCE): both off the starting command's path.
 * That first runner's command line is the gateway's; later runners are `python3 -I -S runner-<v>.py`.
 * Gets the three parts of its stdin in `A` and its arguments: marker, port, root, home, runner version,
 * then pairs (pid file, what that pid's command line names) of older daemons that give up the port.
 */
export const HTTP_GATEWAY_START = String.raw`
import os, sys, fcntl, time, _socket
me, port, root, home, first = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
stale = list(zip(sys.argv[6::2], sys.argv[7::2]))
os.makedirs(root, exist_ok=True)
os.makedirs(home, 0o700, exist_ok=True)
os.chmod(home, 0o700)
os.umask(0o077)
lock = os.open(os.path.join(home, "gateway.lock"), os.O_WRONLY | os.O_CREAT, 0o600)
fcntl.flock(lock, fcntl.LOCK_EX)
def put(path, data):
    # Written whole under another name, then renamed: a reader never sees half a file.
    with open(path + ".new", "wb") as f:
        f.write(data)
    os.rename(path + ".new", path)
runner = os.path.join(home, "runner-" + first + ".py")
if not os.path.isfile(runner):
    put(runner, A[2])
def command_line(pid_file):
    # The command line of the live process a pid file names; empty for none, a zombie or a bad file.
    try:
        with open(pid_file, "rb") as f:
            pid = int(f.read(32).strip())
        with open("/proc/%d/stat" % pid, "rb") as f:
            if f.read(4096).rsplit(b")", 1)[1].split()[0] == b"Z":
                return pid, b""
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return pid, f.read(65536)
    except (OSError, ValueError, IndexError):
        return 0, b""
token_file = os.path.join(home, "gateway.token")
pid_file = os.path.join(home, "gateway.pid")
if me.encode() in command_line(pid_file)[1].split(b"\0"):
    try:
        with open(token_file, "rb") as f:
            t = f.read(64).strip()
    except OSError:
        t = b""
    if t:
        os.write(1, t + b"\n")
        os._exit(0)
# An older gateway (or an older daemon named in stale) holds the port: it goes first, and only if that pid
# still runs it (a reused pid is some other process).
for f, names in [(pid_file, home + "/gateway-")] + stale:
    pid, line = command_line(f)
    if pid and names.encode() in line:
        try:
            os.kill(pid, 15)
        except OSError:
            continue
        for _ in range(200):
            if not command_line(f)[1]:
                break
            time.sleep(0.005)
token = os.urandom(16).hex().encode()
fd = os.open(token_file + ".new", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, token)
os.close(fd)
os.rename(token_file + ".new", token_file)
srv = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
srv.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
# The gateway just ended may not have let go of the port yet: an exiting process shows an empty command
# line (its memory goes first) while its descriptors are still open.
for attempt in range(100):
    try:
        srv.bind(("0.0.0.0", port))
        break
    except OSError as e:
        if e.errno != 98 or attempt == 99:  # EADDRINUSE
            raise
        time.sleep(0.02)
srv.listen(64)
child = os.fork()
if child:
    put(pid_file, b"%d\n" % child)
    os.write(1, token + b"\n")
    os._exit(0)
os.close(lock)
os.setsid()
# Not dumpable, as every runner: the gateway holds each runner's pipes, which an agent process could
# otherwise take through /proc/<gateway>/fd or ptrace (its forked first runner inherits this too).
import ctypes
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
fd = os.open(os.path.join(home, "gateway.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
nul = os.open(os.devnull, os.O_RDONLY)
os.dup2(nul, 0)
os.dup2(fd, 1)
os.dup2(fd, 2)
def spawn(argv):
    # posix_spawn with three pipes (no subprocess module to import): (pid, stdin, stdout, stderr).
    i0, i1 = os.pipe()
    o0, o1 = os.pipe()
    e0, e1 = os.pipe()
    acts = [(os.POSIX_SPAWN_DUP2, i0, 0), (os.POSIX_SPAWN_DUP2, o1, 1), (os.POSIX_SPAWN_DUP2, e1, 2)]
    try:
        return os.posix_spawn(argv[0], argv, os.environ, file_actions=acts), i1, o0, e0
    finally:
        for x in (i0, o1, e1):
            os.close(x)
def runner_argv(version):
    return [sys.executable, "-I", "-S", os.path.join(home, "runner-" + version + ".py"), root]
def fork_runner():
    # The first spare runner is this process forked (no thread runs yet, so that is safe): no python
    # start, and its compile runs beside the body's. Later ones are spawned afresh.
    i0, i1 = os.pipe()
    o0, o1 = os.pipe()
    e0, e1 = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.dup2(i0, 0)
            os.dup2(o1, 1)
            os.dup2(e1, 2)
            for x in (i0, i1, o0, o1, e0, e1, fd, nul, srv.detach()):
                os.close(x)
            sys.argv = [runner, root]
            exec(compile(A[2], runner, "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        except BaseException:
            try:
                __import__("traceback").print_exc()
                sys.stderr.flush()
            except BaseException:
                pass
        os._exit(code)
    for x in (i0, o1, e1):
        os.close(x)
    return pid, i1, o0, e0
first_spawned = fork_runner()
exec(compile(A[1], "agentws-gateway", "exec"))
`;
import { ClosedError, ExecFailedError, InternalError, UnavailableError } from "../../errors.js";

/** The gateway's body: an HTTP/1.1 server of its own (http.server and secrets cost most of a cold start in imports). */
export const HTTP_GATEWAY_SOURCE = String.raw`
import socket, threading
srv = socket.socket(fileno=srv.detach())

class Proc:
    """A runner process with its three pipes."""
    def __init__(self, spawned):
        self.pid, self.stdin, self.stdout, self.stderr = spawned
        self.code = None
        self.stdin_open = True
        self.reaping = threading.Lock()
    def poll(self):
        # Threads may ask at once: one waitpid at a time, so the status is never reaped twice.
        with self.reaping:
            if self.code is None:
                try:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:
                    return self.code
                if pid:
                    self.code = os.waitstatus_to_exitcode(status)
            return self.code
    def wait(self, seconds):
        end = time.monotonic() + seconds
        while self.poll() is None:
            if time.monotonic() > end:
                return None
            time.sleep(0.01)
        return self.code
    def kill(self):
        try:
            os.kill(self.pid, 9)
        except OSError:
            pass

def start_runner(version):
    return Proc(spawn(runner_argv(version)))

import _operator, fcntl, json, select, signal, struct, time
TOKEN = token
MAX_IN = 16 << 20      # bytes one POST may carry (the host sends at most 8 MiB)
MAX_CHANNELS = 32      # runners alive at once; a host holds one per open handle
MAX_CONNECTIONS = 128  # connections served at once (each a thread)
MAX_HEADERS = 64       # header lines one request may have, each at most 8 KiB
IDLE_S = 300           # an idle or stalled connection is dropped (a live stream writes at least every BEAT_S)
ORPHAN_S = 30          # a channel nobody reads within this long is ended
BEAT_S = 15            # heartbeat on a silent stream
chans = {}
spares = {}            # runner version -> a runner started ahead, so a channel opens without waiting for python
lock = threading.Lock()
slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

class Chan:
    def __init__(self, version, proc=None):
        self.p = proc or start_runner(version)
        # Big pipes: a 1 MiB file crosses in a few wake-ups instead of sixteen 64 KiB ones each way.
        for fd in (self.p.stdin, self.p.stdout):
            try:
                fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ
            except OSError:
                pass
        self.err = b""
        self.reader = False
        self.read_done = False
        self.born = time.monotonic()
        self.wlock = threading.Lock()
        threading.Thread(target=self.drain_err, daemon=True).start()
    def poll(self):
        return self.p.poll()
    def drain_err(self):
        while True:
            try:
                b = os.read(self.p.stderr, 65536)
            except OSError:
                return
            if not b:
                os.close(self.p.stderr)
                return
            self.err = (self.err + b)[-4000:]
    def write(self, data):
        with self.wlock:
            if not self.p.stdin_open:
                raise BrokenPipeError()
            v = memoryview(data)
            while v:
                v = v[os.write(self.p.stdin, v):]
    def end(self):
        # Closing stdin makes the runner end its commands and exit; a runner that does not is killed.
        with self.wlock:
            if self.p.stdin_open:
                self.p.stdin_open = False
                os.close(self.p.stdin)
        def later():
            if self.p.wait(3) is None:
                self.p.kill()
                self.p.wait(10)
        threading.Thread(target=later, daemon=True).start()

def runner_path(version):
    return os.path.join(home, "runner-" + version + ".py")

def spare(version, proc=None):
    with lock:
        if version in spares or not os.path.isfile(runner_path(version)):
            return
        try:
            spares[version] = Chan(version, proc)
        except OSError:
            pass

def reap():
    while True:
        time.sleep(5)
        now = time.monotonic()
        with lock:
            for k, c in list(chans.items()):
                if (not c.reader and now - c.born > ORPHAN_S) or (c.read_done and c.poll() is not None):
                    c.end()
                    del chans[k]

class Bad(Exception):
    pass

class Conn:
    """One client connection: requests read one after another (keep-alive), each answered in full."""
    def __init__(self, sock):
        self.sock = sock
        self.f = sock.makefile("rb", 65536)
    def reply(self, code, body=b"", ctype="application/json", close=False):
        head = "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n" % (
            code, "OK" if code < 300 else "Refused", ctype, len(body), "Connection: close\r\n" if close else "")
        self.sock.sendall(head.encode() + body)
    def refuse(self, code, msg):
        # The request's body may be unread: this connection is not reused.
        self.reply(code, json.dumps({"error": msg}).encode(), close=True)
        return False
    def serve(self):
        try:
            while self.one():
                pass
        except (OSError, ValueError, Bad):
            pass
        finally:
            try:
                self.sock.close()
            except OSError:
                pass
    def one(self):
        line = self.f.readline(8192)
        if not line:
            return False
        parts = line.split()
        if len(parts) != 3 or not line.endswith(b"\n"):
            raise Bad()
        method, target = parts[0], parts[1].decode("latin-1")
        self.h = {}
        for _ in range(MAX_HEADERS + 1):
            raw = self.f.readline(8192)
            if not raw.endswith(b"\n"):
                raise Bad()
            if raw in (b"\r\n", b"\n"):
                break
            k, _, v = raw.partition(b":")
            self.h[k.strip().lower()] = v.strip()
        else:
            return self.refuse(431, "too many header lines")
        if b"transfer-encoding" in self.h:
            return self.refuse(411, "send a Content-Length")
        if not _operator._compare_digest(self.h.get(b"x-agentws-token", b""), TOKEN):
            return self.refuse(403, "bad token")
        # Match the route from the end: a proxy in front may keep its own prefix.
        route = target.split("?")[0].strip("/").split("/")
        if method == b"GET" and route[-1:] == ["ping"]:
            self.reply(200, b'{"ok":true}')
            return self.skip()
        if method == b"POST" and route[-1:] == ["open"]:
            return self.open()
        if len(route) >= 3 and route[-3] == "c":
            with lock:
                c = chans.get(route[-2])
            if c is None:
                return self.refuse(404, "no such channel")
            if method == b"GET" and route[-1] == "out":
                return self.out(c, route[-2])
            if method == b"POST" and route[-1] == "in":
                return self.into(c)
            if method == b"POST" and route[-1] == "close":
                c.end()
                self.reply(204)
                return self.skip()
        return self.refuse(404, "no route")
    def length(self, most):
        try:
            n = int(self.h.get(b"content-length", b"0"))
        except ValueError:
            n = -1
        return n if 0 <= n <= most else -1
    def skip(self):
        n = self.length(4096)
        if n < 0:
            return False
        self.f.read(n)
        return True
    def open(self):
        n = self.length(4096)
        if n < 0:
            return self.refuse(413, "request too large")
        try:
            a = json.loads(self.f.read(n) or b"{}")
        except ValueError:
            return self.refuse(400, "not JSON")
        want = a.get("runner", "") if isinstance(a, dict) else ""
        if not isinstance(want, str) or len(want) != 16 or want.strip("0123456789abcdef"):
            return self.refuse(400, "runner: not a runner version")
        runner = runner_path(want)
        if not os.path.isfile(runner):
            return self.refuse(409, "runner " + want + " is not installed")
        with lock:
            if len(chans) >= MAX_CHANNELS:
                return self.refuse(429, "too many open channels")
            c = spares.pop(want, None)
            if c is None or c.poll() is not None:
                if c is not None:
                    c.end()
                c = Chan(want)
            c.born = time.monotonic()
            k = os.urandom(16).hex()
            chans[k] = c
        self.reply(200, json.dumps({"id": k, "pid": c.p.pid}).encode())
        spare(want)
        return True
    def into(self, c):
        n = self.length(MAX_IN)
        if n < 0:
            return self.refuse(413, "body must have a length of at most %d" % MAX_IN)
        while n:
            b = self.f.read(min(n, 1 << 20))
            if not b:
                raise Bad()
            n -= len(b)
            try:
                c.write(b)
            except OSError:
                return self.refuse(410, "the runner's stdin is closed")
        self.reply(204)
        return True
    def out(self, c, k):
        with lock:
            taken, c.reader = c.reader, True
        if taken:
            return self.refuse(409, "the channel already has a reader")
        self.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n"
                          b"Cache-Control: no-store\r\nX-Accel-Buffering: no\r\nConnection: close\r\n\r\n")
        out, sock = c.p.stdout, self.sock
        def send(rec):
            sock.sendall(b"%x\r\n" % len(rec) + rec + b"\r\n")
        try:
            while True:
                r, _, _ = select.select([out, sock], [], [], BEAT_S)
                if sock in r:
                    # The host sends nothing on this connection: readable means it went away.
                    break
                if out in r:
                    data = os.read(out, 1 << 20)
                    if not data:
                        code = c.p.wait(5)
                        info = json.dumps({"code": code, "stderr": c.err.decode("utf-8", "replace")}).encode()
                        send(struct.pack(">II", 0xffffffff, len(info)) + info)
                        sock.sendall(b"0\r\n\r\n")
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
        return False

def serve(sock):
    try:
        sock.settimeout(IDLE_S)
        Conn(sock).serve()
    finally:
        slots.release()

signal.signal(signal.SIGPIPE, signal.SIG_IGN)
threading.Thread(target=reap, daemon=True).start()
spare(first, Proc(first_spawned))
while True:
    try:
        s, _ = srv.accept()
    except OSError:
        continue
    # A thread per connection, but not without bound: beyond it a connection is closed at once.
    if not slots.acquire(blocking=False):
        s.close()
        continue
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        threading.Thread(target=serve, args=(s,), daemon=True).start()
    except RuntimeError:
        s.close()
        slots.release()
`;

const hash16 = (s: string) => createHash("sha256").update(s).digest("hex").slice(0, 16);
/** The gateway's version: a changed gateway replaces the one running (its channels end with it). */
export const HTTP_GATEWAY_VERSION = hash16(HTTP_GATEWAY_START + HTTP_GATEWAY_SOURCE);
/** The runner's version: runners of several versions coexist under one gateway (replicas mid-upgrade). */
export const HTTP_RUNNER_VERSION = hash16(RUNNER_SOURCE);
/** Separates the parts of the starting command's stdin: the start, the gateway's body, the runner. */
const PART = "\n#-- agentws: next part --\n";
const PARTS = [HTTP_GATEWAY_START, HTTP_GATEWAY_SOURCE, RUNNER_SOURCE].join(PART);
const PARTS_TAG = `AGENTWS_${hash16(PARTS).toUpperCase()}`;
if (PARTS.split(PART).length !== 3 || PARTS.split("\n").includes(PARTS_TAG)) throw new InternalError("the runner's sources must not hold the gateway script's separators");

/**
 * A POSIX sh script that installs this runner under `home` (0700) and starts the gateway on `port`
 * unless one of this version already runs; it prints the gateway's token as its only stdout line.
 * Concurrent starts (replicas) share one gateway (a lock). The sources travel inside the script, as the
 * here-document that is python's stdin; one python process does the rest (HTTP_GATEWAY_START).
 */
export function httpGatewayScript(o: { home: string; port: number; root: string; python?: string; stale?: Array<{ pidFile: string; names: string }> }): string {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const py = o.python ?? "python3";
  const boot = `import sys;A=sys.stdin.buffer.read(1<<22).split(b${JSON.stringify(PART)});exec(compile(A[0],"agentws-gateway-start","exec"))`;
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
        { method, agent, headers: { ...headers, ...(body ? { "content-type": "application/octet-stream", "content-length": String(body.length) } : { "content-length": "0" }) } },
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
