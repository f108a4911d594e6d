"""The gateway's body: an HTTP/1.1 server of its own (http.server and secrets cost most of a cold start in
imports). gateway_start.py compiles it in the forked gateway process and calls run() with the listening
socket: one runner per channel, each a child of the gateway (see sdk/kit/runner/http-channel.ts).
"""
import os, socket, sys, threading

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
    return [sys.executable, "-I", "-S", runner_path(version), ROOT]

def start_runner(version):
    return Proc(spawn(runner_argv(version)))

import _operator, fcntl, json, select, signal, struct, time
ROOT = HOME = None     # set by serve(): the workspace root, the gateway's own folder (runners, token, log)
TOKEN = b""            # set by serve(): what every request must carry in X-Agentws-Token
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
    return os.path.join(HOME, "runner-" + version + ".py")

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

def run(listener, root, home, token, first, first_spawned):
    """Serves forever on listener (the start's bound socket); first_spawned is the first runner (of version
    first), forked by the start: it becomes the first spare."""
    global ROOT, HOME, TOKEN
    ROOT, HOME, TOKEN = root, home, token
    srv = socket.socket(fileno=listener.detach())
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
