import errno, os, select, stat, struct, sys, time
import _signal as signal
import ctypes
import fcntl

LIBC = ctypes.CDLL(None, use_errno=True)
if __name__ == "__main__":
    # First of all, before any descriptor of the channel is worth anything to take: not dumpable. Then tracing
    # this process, /proc/<pid>/mem, /proc/<pid>/fd and pidfd_getfd all need CAP_SYS_PTRACE in its user
    # namespace, which no agent process has (each backend drops it: bwrap --cap-drop ALL, Docker's default set).
    # A runner that cannot do this refuses to start rather than serve a channel any process can take.
    # (Imported, as by its unit tests, it changes nothing of the process and serves nothing: see run().)
    if LIBC.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        sys.stderr.write("runner: PR_SET_DUMPABLE failed\n")
        os._exit(70)
    # Python's SIGINT handler would end the runner; the default is ignored for a namespace's init (bwrap
    # --as-pid-1), and elsewhere ends it no more than SIGKILL, which the agent's processes may send anyway.
    signal.signal(signal.SIGINT, signal.SIG_DFL)

ROOT = "/workspace"  # run() takes it from argv[1]
IN, OUT = 0, 1
CHUNK = 1 << 20
HANDOFF = 64 << 10
HIGH = 4 << 20
MAXHOPS = 40
MAXTREE = 100000
DIRF = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
NONCE = os.urandom(6).hex()
EVENT_READ, EVENT_WRITE = select.EPOLLIN, select.EPOLLOUT


class Key:
    __slots__ = ("fd", "data")

    def __init__(self, fd, data):
        self.fd, self.data = fd, data


class Selector:
    """What the runner uses of selectors.EpollSelector, over epoll itself."""

    def __init__(self):
        self.ep = select.epoll()
        self.keys = {}

    def get_map(self):
        return self.keys

    def register(self, fd, events, data):
        if fd in self.keys:
            raise KeyError("descriptor %d is already registered" % fd)
        self.ep.register(fd, events)
        self.keys[fd] = Key(fd, data)

    def unregister(self, fd):
        key = self.keys.pop(fd)
        try:
            self.ep.unregister(fd)
        except OSError:
            pass
        return key

    def select(self, timeout=None):
        ready = self.ep.poll(-1 if timeout is None else timeout, max(len(self.keys), 1))
        return [(self.keys[fd], ev) for fd, ev in ready if fd in self.keys]


sel = Selector()
jobs = {}


def become_subreaper():
    # Orphans of a command (setsid escapees whose parent exited) become the runner's children rather than
    # init's: then a finished command that left nothing is known without scanning /proc (stray_children).
    try:
        return LIBC.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except Exception:
        return False


SUBREAPER = False  # set by run(), right after the hello
strays_left = False
strays_at = 0.0
writes = {}
readers = []
held = {}
spares = {}
uploads = {}
inbufs = {}
qlen = 0


class Fail(Exception):
    def __init__(self, code, msg=""):
        Exception.__init__(self, code)
        self.code, self.msg = code, msg


def b(x):
    return x if isinstance(x, bytes) else os.fsencode(x) if isinstance(x, str) else str(x).encode()


class Out:
    def __init__(self, fd):
        self.fd, self.q = fd, []


main = Out(OUT)
# The private pipe pair (op S): replies to requests from id SIDE_FROM on go there.
side = None
side_pending = None
SIDE_FROM = 1 << 62


def reply(rid, fields, payload=b""):
    global qlen
    o = side if side is not None and rid >= SIDE_FROM else main
    h = b"\0".join(b(f) for f in fields)
    o.q.append(struct.pack(">III", rid, len(h), len(payload)) + h)
    if payload:
        o.q.append(payload)
    qlen += 12 + len(h) + len(payload)
    flush(o)


def fail(rid, e):
    if isinstance(e, Fail):
        reply(rid, ["e", e.code, e.msg])
    elif isinstance(e, OSError):
        reply(rid, ["e", errno.errorcode.get(e.errno, "EIO"), e.strerror or ""])
    else:
        reply(rid, ["e", "EIO", "%s: %s" % (type(e).__name__, e)])


def flush(o):
    global qlen
    q = o.q
    while q:
        try:
            n = os.writev(o.fd, q[:64])
        except BlockingIOError:
            break
        qlen -= n
        while n:
            head = q[0]
            if n >= len(head):
                n -= len(head)
                q.pop(0)
            else:
                q[0] = memoryview(head)[n:]
                n = 0
    registered = o.fd in sel.get_map()
    if q and not registered:
        sel.register(o.fd, EVENT_WRITE, ("out", o))
    elif not q and registered:
        sel.unregister(o.fd)


def op_side(rid):
    """Makes the private pipe pair: the host opens its two ends through /proc/<runner pid>/fd (op G follows)."""
    global side_pending
    if side is not None or side_pending is not None:
        raise Fail("EEXIST", "already has a private channel")
    ar, aw = os.pipe()
    br, bw = os.pipe()
    for fd in (ar, bw):
        os.set_blocking(fd, False)
        try:
            fcntl.fcntl(fd, 1031, 1 << 20)
        except Exception:
            pass
    side_pending = (ar, aw, br, bw)
    reply(rid, ["o", aw, os.fstat(aw).st_ino, br, os.fstat(br).st_ino])


def op_go(frm):
    """The host holds its ends (or gave up: "-"): ours are closed, so either side sees the other go."""
    global side, side_pending, SIDE_FROM
    if side_pending is None:
        return
    ar, aw, br, bw = side_pending
    side_pending = None
    os.close(aw)
    os.close(br)
    if frm == b"-":
        os.close(ar)
        os.close(bw)
        return
    side = Out(bw)
    SIDE_FROM = int(frm)
    sel.register(ar, EVENT_READ, ("in", None))


# ---- paths: descriptor-relative walk under ROOT ----

def opendir_at(fd, name):
    return os.open(name, DIRF, dir_fd=fd)


def reopen(parts):
    fd = os.open(ROOT, DIRF)
    try:
        for p in parts:
            nfd = opendir_at(fd, p)
            os.close(fd)
            fd = nfd
    except OSError:
        os.close(fd)
        raise Fail("ESCAPE", "changed while it was being resolved")
    return fd


def lstat_at(fd, name):
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def walk(rel, follow, create=False):
    """(parent fd, final name, parent parts, dangling). name "" means the root itself. Caller closes fd."""
    todo = rel.split("/")[::-1] if rel else []
    bases = []
    fd = os.open(ROOT, DIRF)
    cur = []
    hops = 0
    try:
        while True:
            while bases and len(todo) < bases[-1]:
                bases.pop()
            while todo and todo[-1] in ("", "."):
                todo.pop()
            if not todo:
                return fd, "", cur, False
            name = todo.pop()
            in_link = bool(bases)
            if name == "..":
                if not cur:
                    raise Fail("ESCAPE", "resolves through a symlink outside the workspace")
                cur.pop()
                os.close(fd)
                fd = -1
                fd = reopen(cur)
                continue
            last = all(p in ("", ".") for p in todo)
            st = None
            if last:
                st = lstat_at(fd, name) if follow else None
                if st is None or not stat.S_ISLNK(st.st_mode):
                    return fd, name, cur, in_link and follow and st is None
            else:
                try:
                    nfd = opendir_at(fd, name)
                    os.close(fd)
                    fd = nfd
                    cur.append(name)
                    continue
                except OSError as e:
                    if e.errno not in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                        raise
                st = lstat_at(fd, name)
                if st is None:
                    if in_link:
                        raise Fail("ESCAPE", "goes through a dangling symlink")
                    if not create:
                        raise Fail("ENOENT")
                    try:
                        os.mkdir(name, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass
                    todo.append(name)
                    continue
                if not stat.S_ISLNK(st.st_mode):
                    raise Fail("ENOTDIR")
            hops += 1
            if hops > MAXHOPS:
                raise Fail("ESCAPE", "is a symlink; refusing to follow it")
            target = os.readlink(name, dir_fd=fd)
            if target.startswith("/"):
                if target != ROOT and not target.startswith(ROOT + "/"):
                    raise Fail("ESCAPE", "resolves through a symlink outside the workspace")
                target = target[len(ROOT):]
                os.close(fd)
                fd = -1
                fd = reopen([])
                cur = []
            bases.append(len(todo))
            todo.extend(target.split("/")[::-1])
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise


def open_final(pfd, name, flags, mode=0o644, link_msg="is a symlink; refusing to follow it"):
    if name == "":
        return os.dup(pfd) if flags & os.O_DIRECTORY else os.open(".", flags, dir_fd=pfd)
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=pfd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise Fail("ESCAPE", link_msg)
        raise


def open_dir(rel):
    pfd, name, _, dangling = walk(rel, True)
    try:
        if dangling:
            raise Fail("ESCAPE", "goes through a dangling symlink")
        return open_final(pfd, name, DIRF)
    finally:
        os.close(pfd)


def kind_of(m):
    return "l" if stat.S_ISLNK(m) else "d" if stat.S_ISDIR(m) else "f" if stat.S_ISREG(m) else "o"


def info(st, name):
    return [kind_of(st.st_mode), str(st.st_size), str(st.st_mtime_ns), name]


# ---- file operations ----

class Reader:
    def __init__(self, rid, fd, cap, left=-1):
        self.rid, self.fd, self.cap, self.total, self.left = rid, fd, cap, 0, left

    def step(self):
        try:
            # A range stops at its length; a whole read at end of file.
            chunk = os.read(self.fd, CHUNK if self.left < 0 else min(CHUNK, self.left - self.total)) if self.left != self.total else b""
        except OSError as e:
            self.close()
            fail(self.rid, e)
            return True
        if not chunk:
            self.close()
            reply(self.rid, ["o", self.total])
            return True
        self.total += len(chunk)
        if self.cap >= 0 and self.total > self.cap:
            self.close()
            reply(self.rid, ["e", "TOOBIG", str(self.total)])
            return True
        reply(self.rid, ["d"], chunk)
        return False

    def close(self):
        os.close(self.fd)


def open_read(rel):
    """A descriptor of the regular file at rel and its stat: the one open of every read (ops r, R, g).
    Opened without blocking, so a special file is refused after fstat rather than waited on."""
    pfd, name, _, dangling = walk(rel, True)
    try:
        if dangling:
            raise Fail("ESCAPE", "goes through a dangling symlink")
        if name == "":
            raise Fail("EISDIR")
        fd = open_final(pfd, name, os.O_RDONLY | os.O_NONBLOCK)
    finally:
        os.close(pfd)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise Fail("EISDIR")
        if not stat.S_ISREG(st.st_mode):
            raise Fail("SPECIAL")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def start_read(rid, fd, size, cap, left=-1):
    """Replies "s" size, then streams fd through the one read loop (Reader), "d" chunks ended by "o"."""
    reply(rid, ["s", size])
    readers.append(Reader(rid, fd, cap, left))


def op_range(rid, rel, offset, length):
    start, length = int(offset), int(length)
    if start < 0 or length < 0:
        raise Fail("EINVAL")
    fd, st = open_read(rel)
    try:
        os.lseek(fd, start, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    start_read(rid, fd, max(0, min(length, st.st_size - start)), length, length)


def op_read(rid, rel, cap, offer=False):
    fd, st = open_read(rel)
    try:
        limit = -1 if cap == "-" else int(cap)
        if limit >= 0 and st.st_size > limit:
            raise Fail("TOOBIG", str(st.st_size))
    except BaseException:
        os.close(fd)
        raise
    if offer and st.st_size > HANDOFF:
        held[rid] = fd
        return reply(rid, ["h", fd, st.st_dev, st.st_ino, st.st_size])
    start_read(rid, fd, st.st_size, limit)


class Writer:
    def __init__(self, rid, kind):
        self.rid, self.kind, self.fd, self.tmp, self.pfd, self.mode, self.unnamed = rid, kind, -1, None, -1, None, None
        self.buf = bytearray() if kind == "a" else None

    def open(self, rel, mode, spare=-1, unnamed=False):
        pfd, name, _, _ = walk(rel, False, create=True)
        self.pfd, self.name = pfd, name
        if name == "":
            raise Fail("EISDIR")
        if self.kind == "a":
            self.fd = open_final(pfd, name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644, "is a symlink; refusing to write through it")
            if not stat.S_ISREG(os.fstat(self.fd).st_mode):
                raise Fail("SPECIAL")
            return
        if self.kind == "c":
            self.fd = open_final(pfd, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            self.tmp = name
            return
        st = lstat_at(pfd, name)
        if self.kind == "w" and st is not None:
            if stat.S_ISLNK(st.st_mode):
                raise Fail("ESCAPE", "is a symlink; refusing to write through it")
            if stat.S_ISDIR(st.st_mode):
                raise Fail("EISDIR")
        if mode != "-":
            self.mode = int(mode, 8)
        elif self.kind == "w" and st is not None and stat.S_ISREG(st.st_mode):
            # Replacing a script must not drop its execute bit.
            self.mode = st.st_mode & 0o7777
        else:
            self.mode = 0o644
        tmp = ".%s.agentws-tmp-%s" % (name[:180], os.urandom(6).hex())
        if unnamed:
            # No name until the commit: a runner killed mid-write leaves nothing behind.
            try:
                self.fd = os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600, dir_fd=pfd)
                self.unnamed = tmp
                return
            except (OSError, AttributeError):
                pass
        if spare >= 0:
            # The spare's bytes are in; it gets a name only now, beside its target (EXDEV: the host falls back).
            self.fd = spare
            os.link("/proc/self/fd/%d" % spare, tmp, dst_dir_fd=pfd, follow_symlinks=True)
        else:
            self.fd = open_final(pfd, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self.tmp = tmp

    def write(self, data):
        if self.buf is not None:
            self.buf.extend(data)
            return
        view = memoryview(data)
        while len(view):
            n = os.write(self.fd, view)
            view = view[n:]

    def commit(self):
        if self.buf is not None:
            view = memoryview(self.buf)
            while len(view):
                n = os.write(self.fd, view)
                view = view[n:]
            return
        if self.mode is not None:
            os.fchmod(self.fd, self.mode)
        if self.unnamed is not None:
            os.link("/proc/self/fd/%d" % self.fd, self.unnamed, dst_dir_fd=self.pfd, follow_symlinks=True)
            self.tmp, self.unnamed = self.unnamed, None
        os.close(self.fd)
        self.fd = -1
        if self.kind == "c":
            self.tmp = None
        elif self.kind == "x":
            os.link(self.tmp, self.name, src_dir_fd=self.pfd, dst_dir_fd=self.pfd, follow_symlinks=False)
            os.unlink(self.tmp, dir_fd=self.pfd)
            self.tmp = None
        else:
            os.rename(self.tmp, self.name, src_dir_fd=self.pfd, dst_dir_fd=self.pfd)
            self.tmp = None

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.tmp is not None and self.pfd >= 0:
            try:
                os.unlink(self.tmp, dir_fd=self.pfd)
            except OSError:
                pass
        if self.pfd >= 0:
            os.close(self.pfd)
            self.pfd = -1


def write_start(rid, rel, kind, mode, payload, offer=False):
    w = Writer(rid, kind)
    writes[rid] = None
    try:
        w.open(rel, mode)
        w.write(payload)
    except BaseException:
        w.close()
        raise
    writes[rid] = w
    if offer:
        st = os.fstat(w.fd)
        reply(rid, ["h", w.fd, st.st_dev, st.st_ino])


def write_more(rid, payload):
    w = writes.get(rid)
    if w is None:
        return
    try:
        w.write(payload)
    except BaseException as e:
        writes[rid] = None
        w.close()
        fail(rid, e)


def write_end(rid):
    if rid not in writes:
        return
    w = writes.pop(rid)
    if w is None:
        return
    try:
        w.commit()
    finally:
        w.close()
    reply(rid, ["o"])


def op_spare(rid):
    rfd = os.open(ROOT, DIRF)
    try:
        fd = os.open(".", os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600, dir_fd=rfd)
    finally:
        os.close(rfd)
    spares[fd] = True
    st = os.fstat(fd)
    reply(rid, ["h", fd, st.st_dev, st.st_ino])


def op_commit_spare(rid, rel, kind, mode, sfd):
    if kind not in ("w", "x") or spares.pop(sfd, None) is None:
        raise Fail("EINVAL", "no such spare")
    w = Writer(rid, kind)
    try:
        try:
            w.open(rel, mode, sfd)
        except BaseException:
            if w.fd != sfd:
                os.close(sfd)
            raise
        w.commit()
    finally:
        w.close()
    reply(rid, ["o"])


class Upload:
    """A write whose bytes a file service puts into a pipe of ours (ops Y, Q, q): counted, never waited on."""

    def __init__(self, r, w):
        self.r, self.w, self.rid, self.writer, self.left, self.watched = r, w, None, None, 0, False

    def watch(self):
        if not self.watched:
            self.watched = True
            sel.register(self.r, EVENT_READ, ("up", self))

    def take(self):
        while True:
            want = min(self.left, CHUNK) if self.writer is not None and self.left > 0 else CHUNK
            try:
                chunk = os.read(self.r, want)
            except BlockingIOError:
                return
            except OSError as e:
                return self.abort(e)
            if not chunk:
                return
            if self.writer is None:
                continue
            try:
                self.writer.write(chunk)
            except BaseException as e:
                self.abort(e)
                continue
            self.left -= len(chunk)
            if self.left == 0:
                self.commit()

    def commit(self):
        w, self.writer = self.writer, None
        try:
            try:
                w.commit()
            finally:
                w.close()
        except BaseException as e:
            return fail(self.rid, e)
        reply(self.rid, ["o"])

    def abort(self, e):
        w, self.writer = self.writer, None
        if w is not None:
            w.close()
            fail(self.rid, e)

    def close(self):
        if self.watched:
            sel.unregister(self.r)
        os.close(self.r)
        os.close(self.w)
        uploads.pop(self.r, None)


def op_upload_pipe(rid):
    r, w = os.pipe()
    os.set_blocking(r, False)
    try:
        fcntl.fcntl(w, 1031, 1 << 20)
    except Exception:
        pass
    uploads[r] = Upload(r, w)
    reply(rid, ["o", r, w])


def op_upload_write(rid, rel, kind, mode, r, size):
    u = uploads.get(r)
    if u is None or u.rid is not None or kind not in ("w", "x") or size < 0:
        raise Fail("EINVAL", "no such upload pipe")
    u.rid = rid
    # Drained from now on, whatever happens to the write.
    u.watch()
    w = Writer(rid, kind)
    try:
        w.open(rel, mode, unnamed=True)
    except BaseException:
        w.close()
        raise
    u.writer, u.left = w, size
    if size == 0:
        return u.commit()
    u.take()


def op_upload_done(r, ok):
    u = uploads.get(r)
    if u is None:
        return
    if u.writer is not None:
        if ok:
            u.take()
        if u.writer is not None:
            u.abort(Fail("EIO", "the upload ended short") if ok else Fail("ECANCELED", "the upload failed"))
    if ok:
        u.close()
    else:
        u.watch()


def op_list(rid, rel, skip="0", limit="-1"):
    """Entries of rel; with skip/limit one page of them (readdir order), field "1" when more follow."""
    skip, limit = int(skip), int(limit)
    fd = open_dir(rel)
    out = []
    more = False
    n = 0
    try:
        with os.scandir(fd) as it:
            for e in it:
                if skip > 0:
                    skip -= 1
                    continue
                if 0 <= limit <= n:
                    more = True
                    break
                n += 1
                st = lstat_at(fd, e.name)
                if st is not None:
                    out.extend(info(st, e.name))
    finally:
        os.close(fd)
    reply(rid, ["o", "1" if more else "0"], b"\0".join(b(x) for x in out))


def entry_type(e):
    return "l" if e.is_symlink() else "d" if e.is_dir(follow_symlinks=False) else "f" if e.is_file(follow_symlinks=False) else "o"


def op_typed(rid, rel, mode="", cap="0", skipdirs=""):
    if mode == "R":
        return op_walk(rid, rel, int(cap), set(x for x in skipdirs.split("/") if x))
    fd = open_dir(rel)
    out = []
    try:
        with os.scandir(fd) as it:
            for e in it:
                out.append(entry_type(e))
                out.append(e.name)
    finally:
        os.close(fd)
    reply(rid, ["o"], b"\0".join(b(x) for x in out))


WALK_BYTES = 32 << 20
WALK_DEPTH = 4096


def op_walk(rid, rel, cap, skip):
    """Every entry below rel, each folder before its content, as (parent index, type, size, mtime ns, name):
    a descriptor per level, so depth costs nothing per entry. Field "1" when cut at cap, WALK_BYTES or WALK_DEPTH."""
    out = []
    state = [0, 0, False]  # entries, bytes, truncated

    def scan(dfd, parent):
        subs = []
        with os.scandir(dfd) as it:
            for e in it:
                if state[0] >= cap or state[1] >= WALK_BYTES:
                    state[2] = True
                    break
                t = entry_type(e)
                size = mt = 0
                if t == "f":
                    st = lstat_at(dfd, e.name)
                    if st is None:
                        continue
                    size, mt = st.st_size, st.st_mtime_ns
                out.extend((str(parent), t, str(size), str(mt), e.name))
                state[1] += len(e.name) + 40
                if t == "d" and e.name not in skip:
                    subs.append((state[0], e.name))
                state[0] += 1
        return subs

    stack = [[open_dir(rel), [], 0]]
    try:
        stack[0][1] = scan(stack[0][0], -1)
        while stack and not state[2]:
            top = stack[-1]
            if top[2] >= len(top[1]):
                os.close(stack.pop()[0])
                continue
            idx, name = top[1][top[2]]
            top[2] += 1
            if len(stack) >= WALK_DEPTH:
                state[2] = True
                break
            try:
                nfd = opendir_at(top[0], name)
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE):
                    state[2] = True
                    break
                continue
            stack.append([nfd, [], 0])
            stack[-1][1] = scan(nfd, idx)
    finally:
        for f in stack:
            os.close(f[0])
    reply(rid, ["o", "1" if state[2] else "0"], b"\0".join(b(x) for x in out))


def op_stat(rid, rel):
    try:
        pfd, name, _, _ = walk(rel, False)
    except Fail as e:
        if e.code == "ENOENT":
            return reply(rid, ["o"])
        raise
    try:
        st = os.fstat(pfd) if name == "" else lstat_at(pfd, name)
    except NotADirectoryError:
        st = None
    finally:
        os.close(pfd)
    reply(rid, ["o"] + (info(st, name or ".") if st else []))


def rmtree_at(fd, name):
    try:
        dfd = opendir_at(fd, name)
    except OSError as e:
        if e.errno in (errno.ENOTDIR, errno.ELOOP):
            return os.unlink(name, dir_fd=fd)
        if e.errno == errno.ENOENT:
            return
        raise
    try:
        for n in os.listdir(dfd):
            st = lstat_at(dfd, n)
            if st is None:
                continue
            if stat.S_ISDIR(st.st_mode):
                rmtree_at(dfd, n)
            else:
                try:
                    os.unlink(n, dir_fd=dfd)
                except FileNotFoundError:
                    pass
    finally:
        os.close(dfd)
    try:
        os.rmdir(name, dir_fd=fd)
    except FileNotFoundError:
        pass


def op_remove(rid, rel):
    try:
        pfd, name, _, _ = walk(rel, False)
    except Fail as e:
        if e.code in ("ENOENT", "ENOTDIR"):
            return reply(rid, ["o"])
        raise
    try:
        if name == "":
            raise Fail("EROOT")
        rmtree_at(pfd, name)
    finally:
        os.close(pfd)
    reply(rid, ["o"])


def make_dir(rel, mode):
    pfd, name, _, dangling = walk(rel, True, create=True)
    try:
        if dangling:
            raise Fail("ESCAPE", "goes through a dangling symlink")
        if name == "":
            return
        try:
            os.mkdir(name, 0o777, dir_fd=pfd)
        except FileExistsError:
            st = lstat_at(pfd, name)
            if st is None or not stat.S_ISDIR(st.st_mode):
                raise Fail("ENOTDIR")
            if mode is None:
                return
        if mode is not None:
            fd = open_final(pfd, name, DIRF)
            try:
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
    finally:
        os.close(pfd)


def op_rename(rid, a, c):
    sfd, sname, _, _ = walk(a, False)
    try:
        if sname == "" or lstat_at(sfd, sname) is None:
            raise Fail("ENOENT")
        dfd, dname, _, _ = walk(c, False, create=True)
        try:
            if dname == "":
                raise Fail("EEXIST")
            if lstat_at(dfd, dname) is not None:
                raise Fail("EEXIST")
            os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)
    reply(rid, ["o"])


def op_tree(rid, rel):
    try:
        fd = open_dir(rel)
    except Fail as e:
        if e.code == "ENOENT":
            return reply(rid, ["o", "missing"])
        raise
    except FileNotFoundError:
        return reply(rid, ["o", "missing"])
    out = []
    stack = [(fd, "")]
    try:
        while stack:
            dfd, prefix = stack.pop()
            try:
                with os.scandir(dfd) as it:
                    ents = sorted((e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False)) for e in it)
                for n, isdir, isfile in ents:
                    if len(out) >= 2 * MAXTREE:
                        raise Fail("TOOBIG", "more than %d entries" % MAXTREE)
                    p = prefix + n
                    if isdir:
                        out.extend(("d", p))
                        try:
                            stack.append((opendir_at(dfd, n), p + "/"))
                        except OSError:
                            pass
                    elif isfile:
                        out.extend(("f", p))
            finally:
                os.close(dfd)
    except BaseException:
        for dfd, _ in stack:
            os.close(dfd)
        raise
    reply(rid, ["o"], b"\0".join(b(x) for x in out))


def copy_file(src_rel, dst_rel):
    pfd, name, _, _ = walk(src_rel, False)
    try:
        try:
            sfd = open_final(pfd, name, os.O_RDONLY | os.O_NONBLOCK)
        except Fail:
            return
    finally:
        os.close(pfd)
    try:
        if not stat.S_ISREG(os.fstat(sfd).st_mode):
            return
        qfd, qname, _, _ = walk(dst_rel, False)
        try:
            dfd = open_final(qfd, qname, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        finally:
            os.close(qfd)
        try:
            while True:
                chunk = os.read(sfd, CHUNK)
                if not chunk:
                    break
                view = memoryview(chunk)
                while len(view):
                    view = view[os.write(dfd, view):]
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


def op_copy(rid, src, dst, payload):
    pfd, name, _, _ = walk(dst, False, create=True)
    try:
        if name == "" or lstat_at(pfd, name) is not None:
            raise Fail("EEXIST")
        os.mkdir(name, 0o777, dir_fd=pfd)
    finally:
        os.close(pfd)
    items = os.fsdecode(payload).split("\0") if payload else []
    for i in range(0, len(items) - 1, 2):
        t, p = items[i], items[i + 1]
        if not p or p.startswith("/") or ".." in p.split("/"):
            raise Fail("ESCAPE", "copy entry leaves the folder")
        if t == "d":
            make_dir(dst + "/" + p, None)
        else:
            copy_file(src + "/" + p, dst + "/" + p)
    reply(rid, ["o"])


# ---- commands ----

class Job:
    def __init__(self, jid, proc, stdin, cap, mark):
        self.id, self.proc, self.cap, self.mark = jid, proc, cap, mark
        self.buf = {"out": bytearray(), "err": bytearray()}
        self.trunc = False
        self.stdin = memoryview(stdin)
        for name, f in (("out", proc.stdout), ("err", proc.stderr)):
            os.set_blocking(f.fileno(), False)
            sel.register(f.fileno(), EVENT_READ, ("pipe", (self, name)))
        self.win = proc.stdin.fileno()
        os.set_blocking(self.win, False)
        if len(self.stdin):
            sel.register(self.win, EVENT_WRITE, ("stdin", self))
        else:
            self.close_stdin()

    def close_stdin(self):
        if self.win is not None:
            try:
                sel.unregister(self.win)
            except (KeyError, ValueError):
                pass
            self.proc.stdin.close()
            self.win = None

    def write_stdin(self):
        try:
            n = os.write(self.win, self.stdin)
        except BlockingIOError:
            return
        except OSError:
            return self.close_stdin()
        self.stdin = self.stdin[n:]
        if not len(self.stdin):
            self.close_stdin()

    def take(self, name, fd, drain=False):
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return False
            except OSError:
                chunk = b""
            if not chunk:
                return True
            buf = self.buf[name]
            room = self.cap - len(buf)
            if len(chunk) > room:
                self.trunc = True
                chunk = chunk[: max(room, 0)]
            buf.extend(chunk)
            if not drain:
                return False

    def kill(self, reaped=False):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        # Once the command's own process is reaped, anything it left alive is a child of the runner (a
        # subreaper): none besides live commands' own processes means nothing to sweep for.
        strays = stray_children() if reaped and SUBREAPER else None
        if strays == set():
            return
        # With no other command running, every stray is this one's or an earlier one's: they all go, even one
        # that cleared its environment (and with it the marker).
        alone = strays is not None and all(j is self for j in jobs.values())
        kill_marked(self.mark, self.proc.pid, strays if alone else ())
        reap_strays()

    def finish(self, code):
        code = 128 - code if code < 0 else code
        # What the command left running dies with it; a pipe held open by an escapee must not hold the
        # reply back, so drain what is buffered and stop reading.
        self.kill(reaped=True)
        self.close_stdin()
        for name, f in (("out", self.proc.stdout), ("err", self.proc.stderr)):
            fd = f.fileno()
            try:
                sel.unregister(fd)
            except (KeyError, ValueError):
                pass
            self.take(name, fd, drain=True)
            f.close()
        del jobs[self.id]
        out, err = bytes(self.buf["out"]), bytes(self.buf["err"])
        reply(self.id, ["x", code, 1 if self.trunc else 0, len(out)], out + err)


class Spawned:
    """A long-lived process whose stdio streams over the channel: its output is read from its pipes only
    while the host has acknowledged all but the window bytes of that stream, so a flood waits in the
    process's own pipe, never in memory here or on the host; stdin bytes are acknowledged once written."""

    def __init__(self, jid, proc, window, mark):
        self.id, self.proc, self.window, self.mark = jid, proc, max(window, 4096), mark
        self.inq = bytearray()
        self.eof = False
        self.win = proc.stdin.fileno()
        os.set_blocking(self.win, False)
        # per stream: [file, bytes sent, bytes acknowledged, reading (registered), open]
        self.out = {}
        for which, f in ((1, proc.stdout), (2, proc.stderr)):
            os.set_blocking(f.fileno(), False)
            self.out[which] = [f, 0, 0, False, True]
            self.want(which)

    def want(self, which):
        s = self.out[which]
        go = s[4] and s[1] - s[2] < self.window
        if go and not s[3]:
            sel.register(s[0].fileno(), EVENT_READ, ("spipe", (self, which)))
        elif not go and s[3]:
            sel.unregister(s[0].fileno())
        s[3] = go

    def take(self, which, drain=False):
        s = self.out[which]
        left = 1 << 20
        while s[4]:
            room = left if drain else self.window - (s[1] - s[2])
            if room <= 0:
                break
            try:
                chunk = os.read(s[0].fileno(), min(room, 65536))
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                s[4] = False
                break
            s[1] += len(chunk)
            left -= len(chunk)
            reply(self.id, [str(which)], chunk)
            if not drain:
                break
        if not drain:
            self.want(which)

    def ack(self, which, n):
        s = self.out.get(which)
        if s:
            s[2] += n
            self.want(which)

    def feed(self, data):
        if self.win is None:
            # Nobody reads it any more: acknowledged as written, so the host never waits on it.
            return reply(self.id, ["a", len(data)])
        self.inq.extend(data)
        if len(self.inq) == len(data):
            sel.register(self.win, EVENT_WRITE, ("sstdin", self))

    def end_input(self):
        self.eof = True
        if not self.inq:
            self.close_stdin()

    def write_stdin(self):
        try:
            n = os.write(self.win, memoryview(self.inq)[:CHUNK])
        except BlockingIOError:
            return
        except OSError:
            return self.close_stdin()
        del self.inq[:n]
        reply(self.id, ["a", n])
        if not self.inq:
            sel.unregister(self.win)
            if self.eof:
                self.close_stdin()

    def close_stdin(self):
        if self.win is None:
            return
        if self.inq:
            sel.unregister(self.win)
            reply(self.id, ["a", len(self.inq)])
            self.inq = bytearray()
        self.proc.stdin.close()
        self.win = None

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        kill_marked(self.mark, self.proc.pid)

    def finish(self, code):
        # As for a command: what it left running dies with it, and what its pipes hold is sent (at most
        # a pipe's worth each, past the window) before the exit; a signal is reported as a negative code.
        self.kill()
        self.close_stdin()
        for which, s in self.out.items():
            if s[3]:
                sel.unregister(s[0].fileno())
                s[3] = False
            self.take(which, drain=True)
            s[0].close()
        del jobs[self.id]
        reply(self.id, ["q", code])


def kill_marked(mark, root_pid, roots=()):
    """SIGKILLs every process carrying the job's marker, and every descendant of root_pid still found.
    One pass is not enough: a victim may fork after the listing (its child carries the marker too), and a
    process in the middle of execve reads an empty environ for a moment. So passes repeat while the last one
    killed something, and a live process with an empty environ is read again a few times before it is let be."""
    for _ in range(8):
        killed, unsure = kill_pass(mark, root_pid, roots)
        for _ in range(10):
            if not unsure:
                break
            time.sleep(0.005)
            still = []
            for pid in unsure:
                env, _, _ = read_proc(pid)
                if env is None:
                    still.append(pid)
                elif mark in env.split(b"\0"):
                    try:
                        os.kill(pid, signal.SIGKILL)
                        killed = True
                    except OSError:
                        pass
            unsure = still
        if not killed:
            return


def read_proc(pid):
    """(environ, parent pid, dead) of a process; environ is None while it cannot be told (a live user process,
    not a kernel thread or a zombie, whose environ reads empty: it is between the two halves of an execve)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            s = f.read(4096)
        rest = s[s.rindex(b")") + 2 :].split(b" ", 8)
        ppid, state, flags = int(rest[1]), rest[0], int(rest[6])
    except (OSError, ValueError, IndexError):
        return b"", None, True
    dead = state in (b"Z", b"X")
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = f.read(1 << 20)
    except OSError:
        return b"", ppid, dead
    if not env and not dead and not flags & 0x00200000:  # PF_KTHREAD
        return None, ppid, dead
    return env, ppid, dead


def kill_pass(mark, root_pid, roots=()):
    parents = {}
    victims = set()
    unsure = []
    dead = set()
    try:
        names = os.listdir("/proc")
    except OSError:
        return False, []
    me = os.getpid()
    for p in names:
        if not p.isdigit() or int(p) == me:
            continue
        pid = int(p)
        env, ppid, gone = read_proc(pid)
        if ppid is not None:
            parents[pid] = ppid
        if gone:
            dead.add(pid)
        if env is None:
            unsure.append(pid)
        elif mark in env.split(b"\0"):
            victims.add(pid)
    tree = {root_pid, *roots}
    grew = True
    while grew:
        grew = False
        for pid, pp in parents.items():
            if pp in tree and pid not in tree:
                tree.add(pid)
                grew = True
    killed = False
    # A zombie takes a signal without complaint; counting it would only repeat the passes.
    for pid in (victims | (tree - {root_pid})) - dead:
        try:
            os.kill(pid, signal.SIGKILL)
            killed = True
        except OSError:
            pass
    return killed, [p for p in unsure if p not in victims and p not in tree]


def start(f, payload, spawn=False):
    jid, cap, cwd_rel, argc = int(f[1]), int(f[2]), os.fsdecode(f[3]), int(f[4])
    argv = f[5 : 5 + argc]
    # The runner's own environment (the sandbox's base) under the request's variables.
    env = dict(os.environb)
    env.update(kv.split(b"=", 1) for kv in f[5 + argc :])
    mark = b"AGENTWS_JOB=" + NONCE.encode() + b"." + f[1]
    env[b"AGENTWS_JOB"] = mark[12:]
    try:
        cwd, cwd_fd = sandbox_dir(cwd_rel)
    except BaseException as e:
        return fail(jid, e)
    env[b"PWD"] = os.fsencode(cwd)
    try:
        proc = Child(argv, cwd_fd, env)
    except Exception as e:
        # Not only OSError: whatever fails here must fail this command, not the runner.
        code = 126 if isinstance(e, OSError) and e.errno in (errno.EACCES, errno.ENOEXEC, errno.EISDIR) else 127
        msg = argv[0] + (": %s\n" % (getattr(e, "strerror", None) or e)).encode("utf-8", "replace")
        if spawn:
            reply(jid, ["2"], msg)
            return reply(jid, ["q", code])
        reply(jid, ["x", code, 0, 0], msg)
        return
    finally:
        os.close(cwd_fd)
    jobs[jid] = Spawned(jid, proc, cap, mark) if spawn else Job(jid, proc, payload, cap, mark)


SIGDEF = (signal.SIGPIPE, signal.SIGXFSZ)


def spawnp(argv, env, acts):
    """posix_spawn (a vfork: far cheaper than forking the runner) with the PATH search done here, against the
    command's own environment, as execvpe does it."""
    kw = {"file_actions": acts, "setsid": True, "setsigdef": SIGDEF}
    if b"/" in argv[0]:
        return os.posix_spawn(argv[0], argv, env, **kw)
    last = other = None
    for d in os.get_exec_path(env):
        full = os.path.join(os.fsencode(d), argv[0])
        try:
            # A spawn that fails costs a process start; a missing file is known from a stat.
            os.stat(full)
            return os.posix_spawn(full, argv, env, **kw)
        except (FileNotFoundError, NotADirectoryError) as e:
            last = e
        except OSError as e:
            other = other or e
    raise other or last or FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))


class Child:
    """A command's process, as subprocess.Popen(start_new_session, close_fds, three pipes, cwd) made it: its
    own session, default SIGPIPE and SIGXFSZ, no descriptor but its pipes (the runner holds none that are
    inheritable). The cwd is the folder the walk opened, entered by descriptor for the spawn: the runner has
    no threads, and nothing of it works relative to its cwd."""

    def __init__(self, argv, cwd_fd, env):
        i0, i1 = os.pipe()
        o0, o1 = os.pipe()
        e0, e1 = os.pipe()
        acts = [(os.POSIX_SPAWN_DUP2, i0, 0), (os.POSIX_SPAWN_DUP2, o1, 1), (os.POSIX_SPAWN_DUP2, e1, 2)]
        try:
            os.fchdir(cwd_fd)
            self.pid = spawnp(argv, env, acts)
        except BaseException:
            for fd in (i1, o0, e0):
                os.close(fd)
            raise
        finally:
            os.chdir("/")
            for fd in (i0, o1, e1):
                os.close(fd)
        self.stdin, self.stdout, self.stderr = open(i1, "wb", 0), open(o0, "rb", 0), open(e0, "rb", 0)
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = self.pid, 0
            if pid:
                self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        return self.returncode


def sandbox_dir(rel):
    """(the folder's path as processes in the sandbox see it, every link on the way resolved under the root;
    a descriptor of that folder, the caller's to close)."""
    pfd, name, cur, dangling = walk(rel, True)
    try:
        if dangling:
            raise Fail("ESCAPE", "goes through a dangling symlink")
        fd = os.dup(pfd) if not name else open_final(pfd, name, DIRF)
    finally:
        os.close(pfd)
    return "/".join([ROOT] + cur + ([name] if name else [])), fd


def stray_children():
    """The runner's children that are no live command's own process (orphans that came to the subreaper,
    zombies among them); None when they cannot be listed."""
    kids = set()
    try:
        for t in os.listdir("/proc/self/task"):
            with open("/proc/self/task/%s/children" % t, "rb") as f:
                kids.update(int(x) for x in f.read(1 << 20).split())
    except (OSError, ValueError):
        return None
    return kids - {j.proc.pid for j in jobs.values()}


def reap_strays():
    """Reaps the orphans that died (by pid: never a live command's, whose exit status Popen must get)."""
    global strays_left, strays_at
    if not SUBREAPER:
        return
    strays_at = time.monotonic()
    left = False
    for pid in stray_children() or ():
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                left = True
        except ChildProcessError:
            pass
    strays_left = left


def reap():
    for job in list(jobs.values()):
        code = job.proc.poll()
        if code is not None:
            job.finish(code)
    # A live orphan (say, a daemon an MCP server left) is looked at again now and then, not every turn.
    if strays_left and time.monotonic() - strays_at > 0.05:
        reap_strays()


def handle(f, payload):
    op = f[0]
    rid = int(f[1])
    if op == b"x" or op == b"p":
        try:
            return start(f, payload, op == b"p")
        except Exception as e:
            return fail(rid, e)
    try:
        if op == b"k":
            job = jobs.get(rid)
            if job:
                job.kill()
        elif op in (b"i", b"I", b"a"):
            job = jobs.get(rid)
            if isinstance(job, Spawned):
                if op == b"i":
                    job.feed(payload)
                elif op == b"I":
                    job.end_input()
                else:
                    job.ack(int(f[2]), int(f[3]))
        elif op == b"c":
            write_more(rid, payload)
        elif op == b"e":
            write_end(rid)
        elif op == b"z":
            fd = held.pop(rid, None)
            if fd is not None:
                os.close(fd)
        elif op == b"Z":
            if spares.pop(int(f[2]), None) is not None:
                os.close(int(f[2]))
        elif op == b"P":
            op_spare(rid)
        elif op == b"Y":
            op_upload_pipe(rid)
        elif op == b"q":
            op_upload_done(int(f[2]), f[3] == b"1")
        elif op == b"S":
            op_side(rid)
        elif op == b"G":
            op_go(f[2])
        else:
            a = [os.fsdecode(x) for x in f[2:]]
            if op == b"r":
                op_read(rid, a[0], a[1])
            elif op == b"R":
                op_read(rid, a[0], a[1], True)
            elif op == b"g":
                op_range(rid, a[0], a[1], a[2])
            elif op == b"w":
                write_start(rid, a[0], a[1], a[2], payload)
            elif op == b"F":
                op_commit_spare(rid, a[0], a[1], a[2], int(a[3]))
            elif op == b"Q":
                op_upload_write(rid, a[0], a[1], a[2], int(a[3]), int(a[4]))
            elif op == b"W" and a[1] in ("w", "x"):
                write_start(rid, a[0], a[1], a[2], payload, True)
            elif op == b"l":
                op_list(rid, *a[:3])
            elif op == b"t":
                op_typed(rid, *a[:4])
            elif op == b"s":
                op_stat(rid, a[0])
            elif op == b"d":
                op_remove(rid, a[0])
            elif op == b"m":
                make_dir(a[0], None if a[1] == "-" else int(a[1], 8))
                reply(rid, ["o"])
            elif op == b"n":
                op_rename(rid, a[0], a[1])
            elif op == b"T":
                op_tree(rid, a[0])
            elif op == b"C":
                op_copy(rid, a[0], a[1], payload)
            else:
                raise Fail("EINVAL", "unknown op")
    except BaseException as e:
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        fail(rid, e)


def next_frame(buf, pos):
    """(header fields, payload, position after it) of the request frame at pos of buf, or None while the
    frame is not whole yet (its bytes stay buffered for the next read)."""
    end = len(buf)
    if end - pos < 8:
        return None
    hl, pl = struct.unpack_from(">II", buf, pos)
    if end - pos < 8 + hl + pl:
        return None
    # One copy of each frame out of the buffer (a slice of a bytearray would make two).
    view = memoryview(buf)
    h = bytes(view[pos + 8 : pos + 8 + hl]).split(b"\0")
    payload = bytes(view[pos + 8 + hl : pos + 8 + hl + pl])
    view.release()
    return h, payload, pos + 8 + hl + pl


def read_input(fd):
    try:
        chunk = os.read(fd, CHUNK)
    except BlockingIOError:
        return
    if not chunk:
        for job in list(jobs.values()):
            job.kill()
        sys.exit(0)
    inbuf = inbufs.setdefault(fd, bytearray())
    inbuf.extend(chunk)
    pos = 0
    while True:
        frame = next_frame(inbuf, pos)
        if frame is None:
            break
        h, payload, pos = frame
        handle(h, payload)
    if pos:
        del inbuf[:pos]


def run():
    """The runner's life: set up (after the PR_SET_DUMPABLE at the top), say hello, serve until stdin ends."""
    global ROOT, SUBREAPER
    ROOT = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
    rfd, wfd = os.pipe()
    for fd in (rfd, wfd):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wfd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    os.set_blocking(IN, False)
    os.set_blocking(OUT, False)
    # Commands get no descriptor of the runner's but their pipes (Child spawns without closing any).
    try:
        for n in os.listdir("/proc/self/fd"):
            if int(n) > 2:
                try:
                    os.set_inheritable(int(n), False)
                except OSError:
                    pass
    except (OSError, ValueError):
        pass
    try:
        for fd in (IN, OUT):
            fcntl.fcntl(fd, 1031, 1 << 20)
    except Exception:
        pass
    sel.register(IN, EVENT_READ, ("in", None))
    sel.register(rfd, EVENT_READ, ("sig", None))
    reply(0, ["hello", "1", os.getpid()])
    SUBREAPER = become_subreaper()
    while True:
        turn(rfd)


def turn(wake, idle=None):
    """One turn of the runner's loop: waits for what is ready (at most idle seconds; None: until something
    is, a signal on the wake pipe included), handles it, reaps, and steps the reads while output is not held up."""
    busy = readers and qlen < HIGH
    for key, ev in sel.select(0 if busy else idle):
        kind, data = key.data
        if kind == "out":
            flush(data)
        elif kind == "in":
            read_input(key.fd)
        elif kind == "sig":
            try:
                while os.read(wake, 512):
                    pass
            except BlockingIOError:
                pass
        elif kind == "up":
            data.take()
        elif kind == "stdin" or kind == "sstdin":
            data.write_stdin()
        elif kind == "spipe":
            job, which = data
            if jobs.get(job.id) is job:
                job.take(which)
        elif kind == "pipe":
            job, name = data
            if jobs.get(job.id) is not job:
                continue
            if job.take(name, key.fd):
                sel.unregister(key.fd)
    # Reaping closes pipes, so it waits until the batch of ready keys has been handled.
    reap()
    while readers and qlen < HIGH:
        r = readers.pop(0)
        if not r.step():
            readers.append(r)


if __name__ == "__main__":
    run()
