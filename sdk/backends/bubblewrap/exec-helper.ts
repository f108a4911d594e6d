/**
 * Source of the exec helper that one long-lived bwrap per sandbox runs (`python3 -I -c <source>`), so each
 * exec is a fork inside the existing namespaces instead of a new bwrap. Kept as a string so it ships with
 * the compiled package without a data file to copy.
 *
 * Protocol on the helper's stdin, every frame: u32 BE header length, u32 BE payload length, header, payload.
 * The header is NUL-separated fields (no JSON: importing json costs the helper ~9 ms of start-up):
 *   "x" id max cwd argc argv... "K=V"...   run a command; payload = its stdin bytes
 *   "k" id                                 SIGKILL the command's process group
 * Reply on the helper's stdout: u32 id, i32 exit code, u32 stdout length, u32 stderr length, u8 truncated,
 * then the stdout and stderr bytes.
 * Commands get their own pipes and session (process group), so their output never touches the protocol.
 * When a command exits, whatever is left in its group is killed, as a per-command bwrap would have done
 * by tearing down its pid namespace.
 */
export const EXEC_HELPER_SOURCE = String.raw`
import errno, os, selectors, signal, struct, subprocess, sys

IN, OUT = 0, 1
sel = selectors.DefaultSelector()
jobs = {}
inbuf = bytearray()
outq = bytearray()
rfd, wfd = os.pipe()
for fd in (rfd, wfd):
    os.set_blocking(fd, False)
signal.set_wakeup_fd(wfd)
signal.signal(signal.SIGCHLD, lambda *_: None)
os.set_blocking(IN, False)
os.set_blocking(OUT, False)


def send(jid, code, out, err, trunc):
    outq.extend(struct.pack(">IiIIB", jid, code, len(out), len(err), trunc) + out + err)
    flush()


def flush():
    global outq
    while outq:
        try:
            n = os.write(OUT, outq)
        except BlockingIOError:
            break
        del outq[:n]
    registered = OUT in sel.get_map()
    if outq and not registered:
        sel.register(OUT, selectors.EVENT_WRITE, ("out", None))
    elif not outq and registered:
        sel.unregister(OUT)


class Job:
    def __init__(self, jid, proc, stdin, cap):
        self.id, self.proc, self.cap = jid, proc, cap
        self.buf = {"out": bytearray(), "err": bytearray()}
        self.trunc = False
        self.stdin = memoryview(stdin)
        self.open = 0
        for name, f in (("out", proc.stdout), ("err", proc.stderr)):
            os.set_blocking(f.fileno(), False)
            sel.register(f.fileno(), selectors.EVENT_READ, ("pipe", (self, name)))
            self.open += 1
        self.win = proc.stdin.fileno()
        os.set_blocking(self.win, False)
        if len(self.stdin):
            sel.register(self.win, selectors.EVENT_WRITE, ("stdin", self))
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
            b = self.buf[name]
            room = self.cap - len(b)
            if len(chunk) > room:
                self.trunc = True
                chunk = chunk[: max(room, 0)]
            b.extend(chunk)
            if not drain:
                return False

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def finish(self, code):
        # What the command left running in its group dies with it; a pipe held open by an escapee
        # must not hold the reply back, so drain what is buffered and stop reading.
        self.kill()
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
        send(self.id, code, out, err, self.trunc)


def start(f, payload):
    jid, cap, cwd, argc = int(f[1]), int(f[2]), f[3], int(f[4])
    argv = f[5 : 5 + argc]
    env = dict(kv.split(b"=", 1) for kv in f[5 + argc :])
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True, close_fds=True, bufsize=0,
        )
    except Exception as e:
        # Not only OSError: whatever fails here must fail this command, not the runner.
        code = 126 if isinstance(e, OSError) and e.errno in (errno.EACCES, errno.ENOEXEC, errno.EISDIR) else 127
        msg = argv[0] + (": %s\n" % (getattr(e, "strerror", None) or e)).encode("utf-8", "replace")
        send(jid, code, b"", msg, False)
        return
    jobs[jid] = Job(jid, proc, payload, cap)


def reap():
    for job in list(jobs.values()):
        code = job.proc.poll()
        if code is not None:
            job.finish(128 - code if code < 0 else code)


def handle(f, payload):
    if f[0] == b"x":
        start(f, payload)
    elif f[0] == b"k":
        job = jobs.get(int(f[1]))
        if job:
            job.kill()


sel.register(IN, selectors.EVENT_READ, ("in", None))
sel.register(rfd, selectors.EVENT_READ, ("sig", None))
while True:
    for key, ev in sel.select():
        kind, data = key.data
        if kind == "out":
            flush()
        elif kind == "in":
            try:
                chunk = os.read(IN, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                for job in list(jobs.values()):
                    job.kill()
                sys.exit(0)
            inbuf.extend(chunk)
            while len(inbuf) >= 8:
                hl, pl = struct.unpack(">II", inbuf[:8])
                if len(inbuf) < 8 + hl + pl:
                    break
                h = bytes(inbuf[8 : 8 + hl]).split(b"\0")
                payload = bytes(inbuf[8 + hl : 8 + hl + pl])
                del inbuf[: 8 + hl + pl]
                handle(h, payload)
        elif kind == "sig":
            try:
                while os.read(rfd, 512):
                    pass
            except BlockingIOError:
                pass
        elif kind == "stdin":
            data.write_stdin()
        elif kind == "pipe":
            job, name = data
            if jobs.get(job.id) is not job:
                continue
            if job.take(name, key.fd):
                sel.unregister(key.fd)
                job.open -= 1
    # Reaping closes pipes, so it waits until the batch of ready keys has been handled.
    reap()
`;
