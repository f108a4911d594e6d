"""Commands (op x) in-process, through the runner's own loop (turn): output caps, stdin, cwd confinement,
the job marker, kill, and a missing program. Real processes, each in its own session."""
import os
import time
import unittest

from harness import RunnerCase, runner


def read(p):
    try:
        with open(p) as f:
            return f.read()
    except FileNotFoundError:
        return ""


class Commands(RunnerCase):
    def exec(self, rid, argv, cap=1 << 20, cwd=b"", env=(), stdin=b"", then=None, timeout=30):
        fields = [b"x", rid, cap, cwd, len(argv)] + list(argv) + list(env)
        runner.handle([f if isinstance(f, bytes) else str(f).encode() for f in fields], stdin)
        if then:
            then()
        end = time.monotonic() + timeout
        got = []
        while time.monotonic() < end:
            runner.turn(-1, 0.05)
            got += self.drain()
            if any(r[0] == rid and r[1][0] in ("x", "e") for r in got):
                return got
        self.fail("no reply to command %d in %ds: %r" % (rid, timeout, got))

    def result(self, replies):
        (rid, f, payload), = [r for r in replies if r[1][0] in ("x", "e")]
        if f[0] == "e":
            return f
        code, trunc, outlen = int(f[1]), f[2] == "1", int(f[3])
        return code, trunc, payload[:outlen], payload[outlen:]

    def test_output_and_exit_code(self):
        r = self.result(self.exec(1, [b"sh", b"-c", b"printf out; printf err >&2; exit 3"]))
        self.assertEqual(r, (3, False, b"out", b"err"))

    def test_output_is_capped_per_stream(self):
        r = self.result(self.exec(2, [b"sh", b"-c", b"head -c 200000 /dev/zero; printf 0123456789abc >&2"], cap=10))
        self.assertEqual(r, (0, True, b"\0" * 10, b"0123456789"))

    def test_stdin_is_the_payload(self):
        data = os.urandom(300000)
        r = self.result(self.exec(3, [b"cat"], stdin=data))
        self.assertEqual(r, (0, False, data, b""))

    def test_cwd_is_confined(self):
        os.symlink(self.outside, self.path("out"))
        self.assertEqual(self.result(self.exec(4, [b"pwd"], cwd=b"out"))[:2], ["e", "ESCAPE"])
        os.makedirs(self.path("sub/dir"))
        os.symlink(self.path("sub"), self.path("in"))
        r = self.result(self.exec(5, [b"sh", b"-c", b"pwd; echo $PWD"], cwd=b"in/dir"))
        self.assertEqual(r[2].split(), [self.path("sub/dir").encode()] * 2)

    def test_environment_and_marker(self):
        r = self.result(self.exec(6, [b"sh", b"-c", b"echo $FOO; echo $AGENTWS_JOB"], env=[b"FOO=bar=baz"]))
        foo, mark = r[2].split()
        self.assertEqual(foo, b"bar=baz")
        self.assertEqual(mark, runner.NONCE.encode() + b".6")

    def test_missing_program(self):
        r = self.result(self.exec(7, [b"agentws-no-such-program-x"]))
        self.assertEqual(r[0], 127)
        self.assertIn(b"agentws-no-such-program-x", r[3])

    def test_kill_ends_the_command_and_what_it_started(self):
        pidfile, escaped = self.path("bg.pid"), self.path("setsid.pid")
        # A background child, and one that left the session (found by the job's environment marker).
        script = b"setsid sh -c 'echo $$ > %s; exec sleep 301' & sleep 300 & echo $! > %s; wait" % (escaped.encode(), pidfile.encode())

        def kill_when_started():
            end = time.monotonic() + 10
            while not read(pidfile).strip() or not read(escaped).strip():
                runner.turn(-1, 0.02)
                self.assertLess(time.monotonic(), end)
            runner.handle([b"k", b"8"], b"")

        r = self.result(self.exec(8, [b"sh", b"-c", script], then=kill_when_started))
        self.assertEqual(r[0], 128 + 9)
        for pid in (int(read(pidfile)), int(read(escaped))):
            # Gone (or a zombie left for its reaper).
            state = read("/proc/%d/stat" % pid)
            if state:
                self.assertIn(state.rsplit(")", 1)[1].split()[0], ("Z", "X"), pid)
        self.assertEqual(runner.jobs, {})


if __name__ == "__main__":
    unittest.main()
