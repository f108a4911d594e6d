"""The gateway's start (sdk/kit/runner/http-channel.ts: httpGatewayScript), run by the starting command
itself: one python process, no shell tools. Its boot line reads the three parts of stdin (this start, the
gateway's body gateway.py, the runner runner.py), compiles this one and calls main(parts). It installs the
runner, and unless a gateway of this version runs (replicas starting at once take turns on a lock) binds
the port, forks the gateway off and prints the new token. The gateway forks its first spare runner from
itself, then compiles its body and hands it the listening socket and what it needs (gateway.run): both off
the starting command's path. Arguments: marker, port, root, home, runner version, then pairs (pid file,
what that pid's command line names) of older daemons that give up the port.
"""
import os, sys, fcntl, time, _socket


def main(parts):
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
        put(runner, parts[2])
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
                exec(compile(parts[2], runner, "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
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
    # The body is a module of its own (gateway.py), run in a namespace of its own: what it gets from here
    # (the listening socket, the paths, the token, the first runner) it gets by name, as run()'s arguments.
    gateway = {"__name__": "agentws_gateway"}
    exec(compile(parts[1], "agentws-gateway", "exec"), gateway)
    gateway["run"](srv, root, home, token, first, first_spawned)
