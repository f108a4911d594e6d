"""Shared by the runner's unit tests: imports runner.py (which, imported, serves nothing) and drives its ops
in-process against a temporary root, reading its reply frames back from a pipe that stands for stdout."""
import os
import shutil
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import runner  # noqa: E402  (the folder above, put on the path just now)


def parse_replies(buf):
    """Reply frames (u32 id, u32 header length, u32 payload length, header, payload) as (id, fields, payload);
    fails the test on bytes that do not make whole frames."""
    out = []
    pos = 0
    while pos < len(buf):
        if len(buf) - pos < 12:
            raise AssertionError("a truncated reply frame: %r" % bytes(buf[pos:]))
        rid, hl, pl = struct.unpack_from(">III", buf, pos)
        if len(buf) - pos < 12 + hl + pl:
            raise AssertionError("a reply frame shorter than its lengths")
        fields = bytes(buf[pos + 12 : pos + 12 + hl]).split(b"\0")
        payload = bytes(buf[pos + 12 + hl : pos + 12 + hl + pl])
        out.append((rid, [f.decode() for f in fields], payload))
        pos += 12 + hl + pl
    return out


def frame(fields, payload=b""):
    """One request frame as the host sends it: u32 header length, u32 payload length, header, payload."""
    h = b"\0".join(f if isinstance(f, bytes) else str(f).encode() for f in fields)
    return struct.pack(">II", len(h), len(payload)) + h + payload


class RunnerCase(unittest.TestCase):
    """A fresh root (runner.ROOT), a fresh selector and output pipe, and no state left from another test."""

    def setUp(self):
        self.root = os.path.realpath(tempfile.mkdtemp(prefix="agentws-runner-test-"))
        self.outside = os.path.realpath(tempfile.mkdtemp(prefix="agentws-runner-outside-"))
        with open(os.path.join(self.outside, "secret"), "w") as f:
            f.write("outside")
        runner.ROOT = self.root
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        os.set_blocking(self.w, False)
        runner.sel = runner.Selector()
        runner.main = runner.Out(self.w)
        runner.qlen = 0
        runner.side = None
        runner.side_pending = None
        del runner.readers[:]
        for state in (runner.held, runner.writes, runner.spares, runner.inbufs, runner.jobs):
            state.clear()
        self.got = bytearray()
        self.fds_before = set(os.listdir("/proc/self/fd"))

    def tearDown(self):
        for fd in list(runner.held.values()) + [r.fd for r in runner.readers]:
            try:
                os.close(fd)
            except OSError:
                pass
        del runner.readers[:]
        runner.held.clear()
        runner.sel.ep.close()
        os.close(self.r)
        os.close(self.w)
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.outside, ignore_errors=True)

    def path(self, rel):
        return os.path.join(self.root, rel)

    def put(self, rel, data=b"", mode=0o644):
        p = self.path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
        os.chmod(p, mode)
        return p

    def drain(self):
        """Runs the read loop as run() does and returns the replies written so far."""
        while True:
            runner.flush(runner.main)
            while True:
                try:
                    chunk = os.read(self.r, 1 << 20)
                except BlockingIOError:
                    break
                self.got.extend(chunk)
            if runner.main.q:
                continue
            if not runner.readers:
                break
            r = runner.readers.pop(0)
            if not r.step():
                runner.readers.append(r)
        out = parse_replies(self.got)
        self.got = bytearray()
        return out

    def call(self, *fields, payload=b""):
        """One request through handle(), as read_input hands it on; returns its replies."""
        runner.handle([f if isinstance(f, bytes) else str(f).encode() for f in fields], payload)
        return self.drain()

    def assertError(self, replies, code):
        self.assertEqual(len(replies), 1, replies)
        self.assertEqual(replies[0][1][0], "e", replies)
        self.assertEqual(replies[0][1][1], code, replies)

    def assertNoLeak(self):
        """Every descriptor an op opened is closed again (held ones excepted)."""
        now = set(os.listdir("/proc/self/fd"))
        extra = {fd for fd in now - self.fds_before if os.path.exists("/proc/self/fd/" + fd)}
        held = {str(fd) for fd in runner.held.values()}
        self.assertEqual(extra - held, set())
