/**
 * The in-sandbox helper, uploaded through execd's file API and started as a background command:
 * execd runs commands without stdin, so stdio processes (MCP servers) are spawned here and their
 * pipes carried over HTTP; and file metadata operations (resolve, stat, list, rename, remove) run
 * here against the sandbox's own view, no-follow, confined to /workspace. File bytes themselves
 * travel through execd's upload/download, never through a command's stdout (which execd turns into
 * lines). Every request body and process count is bounded; every request carries a token only
 * the host side knows (read from a root-only file through the file API).
 */
export const HELPER_VERSION = "2";
export const HELPER_PORT = 8080;
export const HELPER_PATH = "/opt/agentws/helper.py";
export const HELPER_TOKEN_PATH = "/opt/agentws/helper.token";

export const HELPER_SOURCE = String.raw`#!/usr/bin/env python3
import json, os, stat as S, subprocess, sys, threading, uuid, signal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
W = "/workspace"
VERSION = "${HELPER_VERSION}"
TOKEN = open("${HELPER_TOKEN_PATH}").read().strip()
MAX_BODY = 16 << 20
MAX_PROCS = 64
PROCS = {}
LOCK = threading.Lock()

class Fail(Exception):
    def __init__(self, status, code, message):
        self.status, self.code, self.message = status, code, message

def under(p):
    return p == W or p.startswith(W + "/")

def resolve(rel, must_exist=False):
    p = os.path.realpath(os.path.join(W, rel)) if rel else W
    if not under(p):
        raise Fail(403, "path_escape", "resolves outside the workspace")
    if must_exist and not os.path.lexists(p):
        raise Fail(404, "not_found", "missing")
    return p

def parent_of(rel, create=False):
    d, b = os.path.split(rel)
    if not b:
        raise Fail(400, "invalid_argument", "names the workspace root")
    pd = resolve(d)
    if create:
        try:
            os.makedirs(pd, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise Fail(400, "not_dir", "a parent is not a directory")
        pd = resolve(d)
    elif not os.path.isdir(pd):
        raise Fail(404, "not_found", "parent missing")
    return pd, b

def kind(mode):
    return "file" if S.S_ISREG(mode) else "dir" if S.S_ISDIR(mode) else "symlink" if S.S_ISLNK(mode) else "other"

def info(name, st):
    return {"name": name, "type": kind(st.st_mode), "size": st.st_size, "mtimeMs": int(st.st_mtime * 1000)}

def op_read(a):
    p = resolve(a["path"], True)
    st = os.stat(p)
    if S.S_ISDIR(st.st_mode):
        raise Fail(400, "is_dir", "is a directory")
    m = a.get("maxBytes")
    if m is not None and st.st_size > m:
        raise Fail(413, "too_large", str(st.st_size))
    return {"real": p, "size": st.st_size}

def take_src(src):
    # An upload the host made to an unguessable name in /tmp: opened without following links, then unlinked.
    import re
    if os.path.dirname(src) != "/tmp" or not re.fullmatch(r"\.agentws-up-[0-9a-f]{32}", os.path.basename(src)):
        raise Fail(400, "invalid_argument", "bad upload name")
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    if not S.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Fail(400, "invalid_argument", "upload is not a file")
    os.unlink(src)
    return fd

def copy_fd(src_fd, dst_fd):
    while True:
        chunk = os.read(src_fd, 1 << 20)
        if not chunk:
            break
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst_fd, view):]

def op_commit(a):
    src_fd = take_src(a["src"])
    try:
        d, b = parent_of(a["path"], True)
        t = os.path.join(d, b)
        if os.path.islink(t):
            raise Fail(403, "path_escape", "is a symlink; refusing to write through it")
        if os.path.isdir(t):
            raise Fail(400, "is_dir", "is a directory")
        if a.get("exclusive") and os.path.lexists(t):
            raise Fail(409, "exists", "already exists")
        mode = a.get("mode")
        if mode is None:
            try:
                st = os.lstat(t)
                mode = S.S_IMODE(st.st_mode) if S.S_ISREG(st.st_mode) else 0o644
            except FileNotFoundError:
                mode = 0o644
        tmp = os.path.join(d, ".agentws-up-" + uuid.uuid4().hex)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            try:
                copy_fd(src_fd, fd)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
            if a.get("exclusive"):
                try:
                    os.link(tmp, t)
                except FileExistsError:
                    raise Fail(409, "exists", "already exists")
            else:
                os.replace(tmp, t)
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
    finally:
        os.close(src_fd)
    return {}

def op_append(a):
    src_fd = take_src(a["src"])
    try:
        d, b = parent_of(a["path"], True)
        try:
            fd = os.open(os.path.join(d, b), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as e:
            if e.errno == 40:
                raise Fail(403, "path_escape", "is a symlink; refusing to write through it")
            if e.errno == 21:
                raise Fail(400, "is_dir", "is a directory")
            raise
        try:
            copy_fd(src_fd, fd)
        finally:
            os.close(fd)
    finally:
        os.close(src_fd)
    return {}

def op_list(a):
    p = resolve(a["path"], True)
    if not os.path.isdir(p):
        raise Fail(400, "not_dir", "not a directory")
    out = []
    with os.scandir(p) as it:
        for e in it:
            if len(out) >= 100000:
                raise Fail(413, "too_large", "directory too large")
            try:
                st = e.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            out.append(info(e.name, st) if not a.get("typed") else {"name": e.name, "type": kind(st.st_mode)})
    return {"entries": out}

def op_stat(a):
    rel = a["path"]
    if not rel:
        return {"info": info(".", os.lstat(W))}
    d, b = os.path.split(rel)
    pd = resolve(d)
    try:
        return {"info": info(b, os.lstat(os.path.join(pd, b)))}
    except (FileNotFoundError, NotADirectoryError):
        return {"info": None}

def op_remove(a):
    d, b = parent_of(a["path"])  if a["path"] else (None, None)
    if d is None:
        raise Fail(403, "path_escape", "cannot remove the workspace root")
    t = os.path.join(d, b)
    if os.path.isdir(t) and not os.path.islink(t):
        import shutil
        shutil.rmtree(t)
    elif os.path.lexists(t):
        os.unlink(t)
    return {}

def op_mkdir(a):
    p = resolve(a["path"])
    try:
        os.makedirs(p, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise Fail(400, "not_dir", "a parent is not a directory")
    resolve(a["path"])
    return {}

def op_rename(a):
    sd, sb = parent_of(a["from"])
    s = os.path.join(sd, sb)
    if not os.path.lexists(s):
        raise Fail(404, "not_found", "missing")
    td, tb = parent_of(a["to"], True)
    t = os.path.join(td, tb)
    if os.path.lexists(t):
        raise Fail(409, "exists", "already exists")
    os.rename(s, t)
    return {}

def op_cwd(a):
    p = resolve(a["path"], True)
    if not os.path.isdir(p):
        raise Fail(400, "not_dir", "not a directory")
    return {"real": p}

OPS = {"read": op_read, "commit": op_commit, "append": op_append, "list": op_list, "stat": op_stat,
       "remove": op_remove, "mkdir": op_mkdir, "rename": op_rename, "cwd": op_cwd}

class Proc:
    def __init__(self, p):
        self.p = p
        self.code = None

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def send(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def body(self):
        n = int(self.headers.get("content-length") or 0)
        if n > MAX_BODY:
            raise Fail(413, "too_large", "request too large")
        return self.rfile.read(n)
    def handle_any(self, method):
        try:
            if self.headers.get("x-agentws-token") != TOKEN:
                raise Fail(401, "unauthenticated", "bad token")
            parts = self.path.split("?")[0].strip("/").split("/")
            if method == "GET" and parts == ["ping"]:
                return self.send(200, {"version": VERSION})
            if method == "POST" and parts == ["fs"]:
                a = json.loads(self.body())
                fn = OPS.get(a.get("op"))
                if fn is None:
                    raise Fail(400, "invalid_argument", "unknown op")
                return self.send(200, fn(a))
            if method == "POST" and parts == ["spawn"]:
                return self.spawn(json.loads(self.body()))
            if len(parts) == 3 and parts[0] == "p":
                pr = PROCS.get(parts[1])
                if pr is None:
                    raise Fail(404, "not_found", "no such process")
                return self.proc(method, pr, parts[1], parts[2])
            raise Fail(404, "not_found", "no route")
        except Fail as f:
            self.send(f.status, {"code": f.code, "message": f.message})
        except (KeyError, TypeError, ValueError) as e:
            self.send(400, {"code": "invalid_argument", "message": str(e)[:300]})
        except (FileNotFoundError, NotADirectoryError) as e:
            self.send(404, {"code": "not_found", "message": str(e)[:300]})
        except OSError as e:
            self.send(500, {"code": "io", "message": str(e)[:300]})
    def do_GET(self):
        self.handle_any("GET")
    def do_POST(self):
        self.handle_any("POST")
    def spawn(self, a):
        with LOCK:
            for k in [k for k, v in PROCS.items() if v.code is not None and v.reaped]:
                del PROCS[k]
            if len(PROCS) >= MAX_PROCS:
                raise Fail(429, "too_many", "too many processes")
        cwd = op_cwd({"path": a.get("cwd") or ""})["real"]
        env = dict(os.environ)
        env.pop("AGENTWS_HELPER", None)
        env.update({str(k): str(v) for k, v in (a.get("env") or {}).items()})
        try:
            p = subprocess.Popen(a["argv"], cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, bufsize=0)
        except (FileNotFoundError, PermissionError) as e:
            raise Fail(404, "not_found", str(e)[:300])
        pid = uuid.uuid4().hex
        pr = Proc(p)
        pr.reaped = False
        with LOCK:
            PROCS[pid] = pr
        def waiter():
            c = p.wait()
            pr.code = c if c >= 0 else None
            pr.done = True
        pr.done = False
        threading.Thread(target=waiter, daemon=True).start()
        self.send(200, {"id": pid})
    def proc(self, method, pr, pid, what):
        p = pr.p
        if method == "GET" and what in ("out", "err"):
            stream = p.stdout if what == "out" else p.stderr
            self.send_response(200)
            self.send_header("content-type", "application/octet-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            while True:
                chunk = stream.read1(65536) if hasattr(stream, "read1") else os.read(stream.fileno(), 65536)
                if not chunk:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        if method == "POST" and what == "in":
            data = self.body()
            try:
                p.stdin.write(data)
                p.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass
            return self.send(200, {})
        if method == "POST" and what == "eof":
            try:
                p.stdin.close()
            except OSError:
                pass
            return self.send(200, {})
        if method == "POST" and what == "kill":
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            return self.send(200, {})
        if method == "GET" and what == "wait":
            p.wait()
            while not pr.done:
                threading.Event().wait(0.01)
            pr.reaped = True
            return self.send(200, {"code": pr.code})
        raise Fail(404, "not_found", "no route")

if __name__ == "__main__":
    srv = ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1]) if len(sys.argv) > 1 else ${HELPER_PORT}), H)
    srv.daemon_threads = True
    srv.serve_forever()
`;
