#!/usr/bin/env python3
# An execd-compatible daemon for tests only, written from the protocol (docs/sandbox-sdks.md §3.3):
# the real OpenSandbox server injects it into every sandbox as /opt/opensandbox/execd, in place of
# the real execd, which cannot be had on this machine (no image registry). Production deployments
# run the real execd. Python 3 standard library only; every read is bounded.
import json
import os
import pwd
import grp
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

PORT = int(os.environ.get("EXECD_PORT", "44772"))
MAX_JSON = 1 << 20  # request bodies that are JSON
MAX_UPLOAD = 512 << 20  # one multipart upload
MAX_LINE = 64 << 10  # one stdout/stderr event
MAX_LOG = 16 << 20  # a background command's kept output
MAX_COMMANDS = 4096  # finished commands remembered for status queries

COMMANDS = {}
LOCK = threading.Lock()


def now_iso():
    return datetime.now(timezone.utc).isoformat()


def ts_ms():
    return int(time.time() * 1000)


class Command:
    def __init__(self, proc, background):
        self.id = uuid.uuid4().hex
        self.proc = proc
        self.background = background
        self.started = now_iso()
        self.finished = None
        self.exit_code = None
        self.error = None
        self.log = bytearray()
        self.log_lock = threading.Lock()

    def append(self, data):
        with self.log_lock:
            room = MAX_LOG - len(self.log)
            if room > 0:
                self.log += data[:room]


def remember(cmd):
    with LOCK:
        COMMANDS[cmd.id] = cmd
        if len(COMMANDS) > MAX_COMMANDS:
            for k in [k for k, c in COMMANDS.items() if c.finished][: len(COMMANDS) - MAX_COMMANDS]:
                del COMMANDS[k]


def file_info(path):
    st = os.lstat(path)
    import stat as S

    kind = "directory" if S.S_ISDIR(st.st_mode) else "symlink" if S.S_ISLNK(st.st_mode) else "file"
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = str(st.st_gid)
    iso = lambda t: datetime.fromtimestamp(t, timezone.utc).isoformat()
    return {
        "path": path,
        "type": kind,
        "size": st.st_size,
        "mode": int(oct(st.st_mode & 0o7777)[2:]),
        "owner": owner,
        "group": group,
        "created_at": iso(st.st_ctime),
        "modified_at": iso(st.st_mtime),
    }


def apply_perm(path, perm):
    if not isinstance(perm, dict):
        return
    mode = perm.get("mode")
    if isinstance(mode, int) and mode > 0:
        os.chmod(path, int(str(mode), 8))
    owner, group = perm.get("owner"), perm.get("group")
    if owner or group:
        shutil.chown(path, user=owner or None, group=group or None)


def split_multipart(body, boundary):
    """Parts of a multipart/form-data body as (headers dict, bytes)."""
    delim = b"--" + boundary
    parts = []
    for chunk in body.split(delim)[1:]:
        if chunk.startswith(b"--"):
            break
        chunk = chunk[2:] if chunk.startswith(b"\r\n") else chunk
        head, _, data = chunk.partition(b"\r\n\r\n")
        if data.endswith(b"\r\n"):
            data = data[:-2]
        headers = {}
        for line in head.decode("utf-8", "replace").split("\r\n"):
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        parts.append((headers, data))
    return parts


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The real execd is Go, whose sockets send at once (TCP_NODELAY); without it a stream's second small
    # write waits for the client's delayed ACK (40 ms), which the real daemon never does.
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    # -- plumbing ---------------------------------------------------------------------------
    def reply(self, status, body=b"", ctype="application/json", headers=None):
        if not isinstance(body, (bytes, bytearray)):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def fail(self, status, code, message):
        self.reply(status, {"code": code, "message": message})

    def body(self, limit):
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline(100).strip().split(b";")[0] or b"0", 16)
                if size == 0:
                    self.rfile.readline(100)
                    return bytes(out)
                if len(out) + size > limit:
                    raise ValueError("body too large")
                out += self.rfile.read(size)
                self.rfile.readline(100)
        n = int(self.headers.get("content-length") or 0)
        if n > limit:
            raise ValueError("body too large")
        return self.rfile.read(n)

    def json_body(self):
        raw = self.body(MAX_JSON)
        return json.loads(raw) if raw else {}

    def route(self, method):
        u = urlparse(self.path)
        q = parse_qs(u.query)
        # The server's endpoints name execd as <host>:<port>/proxy/44772: the prefix is ours to strip.
        # (The real execd also forwards /proxy/<other port> into the sandbox; this one does not.)
        m = re.fullmatch(r"/proxy/(\d+)(/.*)?", u.path)
        if m:
            if int(m.group(1)) != PORT:
                return self.fail(502, "PROXY_UNSUPPORTED", "the test execd proxies only its own port")
            u = u._replace(path=m.group(2) or "/")
        try:
            handler = ROUTES.get((method, u.path))
            if handler is None:
                m = re.fullmatch(r"/command/status/([0-9a-f]+)", u.path)
                if m and method == "GET":
                    return self.command_status(m.group(1))
                m = re.fullmatch(r"/command/([0-9a-f]+)/logs", u.path)
                if m and method == "GET":
                    return self.command_logs(m.group(1), q)
                return self.fail(404, "NOT_FOUND", f"no route {method} {u.path}")
            return handler(self, q)
        except FileNotFoundError as e:
            return self.fail(404, "FILE_NOT_FOUND", str(e))
        except (ValueError, KeyError, TypeError, json.JSONDecodeError) as e:
            return self.fail(400, "INVALID_REQUEST", str(e))
        except OSError as e:
            return self.fail(500, "IO_ERROR", str(e))

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")

    # -- health -----------------------------------------------------------------------------
    def ping(self, q):
        self.reply(200, b"pong", "text/plain")

    def metrics(self, q):
        self.reply(200, {"cpu_count": os.cpu_count() or 1, "timestamp": ts_ms()})

    # -- commands ---------------------------------------------------------------------------
    def run_command(self, q):
        req = self.json_body()
        command = req["command"]
        if not isinstance(command, str) or not command.strip():
            raise ValueError("command must be a non-empty string")
        env = dict(os.environ)
        env.update({str(k): str(v) for k, v in (req.get("envs") or {}).items()})
        cwd = req.get("cwd") or None
        if cwd and not os.path.isdir(cwd):
            return self.fail(400, "INVALID_CWD", f"working directory {cwd} does not exist")
        kwargs = {}
        if req.get("uid") is not None:
            kwargs["user"] = int(req["uid"])
        if req.get("gid") is not None:
            kwargs["group"] = int(req["gid"])
        shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
        proc = subprocess.Popen(
            [shell, "-c", command],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            **kwargs,
        )
        cmd = Command(proc, bool(req.get("background")))
        remember(cmd)
        timeout_ms = req.get("timeout")
        timer = None
        timed_out = threading.Event()
        if isinstance(timeout_ms, (int, float)) and timeout_ms > 0:
            def expire():
                timed_out.set()
                kill_group(proc)
            timer = threading.Timer(timeout_ms / 1000.0, expire)
            timer.daemon = True
            timer.start()

        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        wlock = threading.Lock()

        def emit(ev):
            data = b"data: " + json.dumps(ev).encode() + b"\n\n"
            with wlock:
                try:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                except OSError:
                    pass

        emit({"type": "init", "text": cmd.id, "timestamp": ts_ms()})
        started = time.time()

        def pump(stream, kind):
            # Lines without their newline, as the real execd sends them; a blank line is "\n".
            for line in iter(lambda: stream.readline(MAX_LINE), b""):
                cmd.append(line)
                text = line[:-1] if line.endswith(b"\n") else line
                if not cmd.background:
                    emit({"type": kind, "text": text.decode("utf-8", "replace") or "\n", "timestamp": ts_ms()})
            stream.close()

        pumps = [threading.Thread(target=pump, args=(proc.stdout, "stdout"), daemon=True), threading.Thread(target=pump, args=(proc.stderr, "stderr"), daemon=True)]
        for p in pumps:
            p.start()

        def finish():
            code = proc.wait()
            for p in pumps:
                p.join()
            if timer:
                timer.cancel()
            cmd.exit_code = -1 if timed_out.is_set() else (code if code >= 0 else 128 - code)
            cmd.finished = now_iso()
            return cmd.exit_code

        if cmd.background:
            threading.Thread(target=finish, daemon=True).start()
            emit({"type": "execution_complete", "execution_time": 0, "timestamp": ts_ms()})
        else:
            code = finish()
            if code == 0:
                emit({"type": "execution_complete", "execution_time": int((time.time() - started) * 1000), "timestamp": ts_ms()})
            else:
                ename = "TimeoutError" if timed_out.is_set() else "CommandExecError"
                cmd.error = ename
                emit({"type": "error", "error": {"ename": ename, "evalue": str(code), "traceback": []}, "timestamp": ts_ms()})
        with wlock:
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass

    def interrupt(self, q):
        cmd = COMMANDS.get((q.get("id") or [""])[0])
        if cmd is None:
            return self.fail(404, "COMMAND_NOT_FOUND", "no such command")
        kill_group(cmd.proc)
        self.reply(200, {})

    def command_status(self, cid):
        cmd = COMMANDS.get(cid)
        if cmd is None:
            return self.fail(404, "COMMAND_NOT_FOUND", "no such command")
        self.reply(200, {"id": cid, "running": cmd.finished is None, "exit_code": cmd.exit_code, "error": cmd.error, "started_at": cmd.started, "finished_at": cmd.finished})

    def command_logs(self, cid, q):
        cmd = COMMANDS.get(cid)
        if cmd is None:
            return self.fail(404, "COMMAND_NOT_FOUND", "no such command")
        cursor = int((q.get("cursor") or ["0"])[0])
        with cmd.log_lock:
            data = bytes(cmd.log[cursor:])
        self.reply(200, data, "text/plain", {"EXECD-COMMANDS-TAIL-CURSOR": str(cursor + len(data))})

    # -- files ------------------------------------------------------------------------------
    def upload(self, q):
        ctype = self.headers.get("content-type", "")
        m = re.search(r"boundary=\"?([^\";]+)\"?", ctype)
        if not m:
            raise ValueError("multipart boundary missing")
        parts = split_multipart(self.body(MAX_UPLOAD), m.group(1).encode())
        meta = None
        files = []
        for headers, data in parts:
            name = re.search(r'name="([^"]*)"', headers.get("content-disposition", ""))
            if name and name.group(1) == "metadata":
                meta = json.loads(data)
            elif name and name.group(1) == "file":
                files.append(data)
        if not isinstance(meta, dict) or not files or not isinstance(meta.get("path"), str):
            raise ValueError("upload needs a metadata part with a path and a file part")
        path = meta["path"]
        parent = os.path.dirname(path) or "/"
        os.makedirs(parent, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=".execd-upload-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(files[0])
            os.chmod(tmp, 0o644)
            apply_perm(tmp, meta)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self.reply(200, {})

    def download(self, q):
        path = q["path"][0]
        if not os.path.isfile(path):
            return self.fail(404, "FILE_NOT_FOUND", f"{path} not found")
        size = os.path.getsize(path)
        start = int((q.get("offset") or ["0"])[0])
        limit = q.get("limit")
        end = size if limit is None else min(size, start + int(limit[0]))
        rng = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("range", ""))
        if rng:
            start = int(rng.group(1))
            end = min(size, int(rng.group(2)) + 1) if rng.group(2) else size
        start = min(start, size)
        end = max(end, start)
        self.send_response(206 if rng else 200)
        self.send_header("content-type", "application/octet-stream")
        self.send_header("content-length", str(end - start))
        self.end_headers()
        with open(path, "rb") as f:
            f.seek(start)
            left = end - start
            while left > 0:
                chunk = f.read(min(left, 1 << 20))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)

    def info(self, q):
        out = {}
        for p in q.get("path", []):
            if not os.path.lexists(p):
                return self.fail(404, "FILE_NOT_FOUND", f"{p} not found")
            out[p] = file_info(p)
        self.reply(200, out)

    def delete_files(self, q):
        for p in q.get("path", []):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
        self.reply(200, {})

    def make_dirs(self, q):
        for p, perm in self.json_body().items():
            os.makedirs(p, exist_ok=True)
            apply_perm(p, perm)
        self.reply(200, {})

    def delete_dirs(self, q):
        for p in q.get("path", []):
            shutil.rmtree(p, ignore_errors=True)
        self.reply(200, {})

    def list_dir(self, q):
        root = q["path"][0]
        depth = int((q.get("depth") or ["1"])[0])
        if not os.path.isdir(root):
            return self.fail(404, "FILE_NOT_FOUND", f"{root} not found")
        out = []

        def walk(d, level):
            with os.scandir(d) as it:
                for e in it:
                    if len(out) >= 100_000:
                        raise ValueError("directory listing too large")
                    out.append(file_info(e.path))
                    if level < depth and e.is_dir(follow_symlinks=False):
                        walk(e.path, level + 1)

        walk(root, 1)
        self.reply(200, out)

    def move(self, q):
        for entry in self.json_body():
            os.rename(entry["src"], entry["dest"])
        self.reply(200, {})


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


ROUTES = {
    ("GET", "/ping"): Handler.ping,
    ("GET", "/metrics"): Handler.metrics,
    ("POST", "/command"): Handler.run_command,
    ("DELETE", "/command"): Handler.interrupt,
    ("POST", "/files/upload"): Handler.upload,
    ("GET", "/files/download"): Handler.download,
    ("GET", "/files/info"): Handler.info,
    ("DELETE", "/files"): Handler.delete_files,
    ("POST", "/directories"): Handler.make_dirs,
    ("DELETE", "/directories"): Handler.delete_dirs,
    ("GET", "/directories/list"): Handler.list_dir,
    ("POST", "/files/mv"): Handler.move,
}

if __name__ == "__main__":
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    server = ThreadingHTTPServer(("0.0.0.0", PORT), Handler)
    server.daemon_threads = True
    server.serve_forever()
