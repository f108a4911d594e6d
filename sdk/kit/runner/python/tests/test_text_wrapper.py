"""text_wrapper.py: the runner's bytes as base64 lines out, and (when asked) base64 lines in as bytes."""
import base64
import os
import subprocess
import sys
import unittest

WRAPPER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "text_wrapper.py")
# Stands in for the runner: echoes its stdin, then says its argv[1] (the root) and exits 3.
ECHO = "import os, sys\nwhile True:\n    d = os.read(0, 65536)\n    if not d:\n        break\n    os.write(1, d)\nos.write(1, b'root=' + os.fsencode(sys.argv[1]))\nsys.exit(3)\n"


def run(stdin, b64in):
    return subprocess.run([sys.executable, "-I", "-S", WRAPPER, ECHO, "/the/root", "1" if b64in else "0"], input=stdin, capture_output=True, timeout=60)


def decode(out):
    assert out.endswith(b"\n") or not out, out[-20:]
    return b"".join(base64.b64decode(line) for line in out.split(b"\n") if line)


class TextWrapper(unittest.TestCase):
    def test_every_byte_value_both_ways(self):
        data = bytes(range(256)) * 3
        # A big write crosses as lines split anywhere, even in the middle of a line.
        lines = base64.b64encode(data[:300]) + b"\n" + base64.b64encode(data[300:]) + b"\n"
        p = run(lines, True)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertEqual(decode(p.stdout), data + b"root=/the/root")
        self.assertTrue(all(line.isascii() for line in p.stdout.split(b"\n")))

    def test_raw_stdin(self):
        p = run(b"\0\xff raw\n", False)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertEqual(decode(p.stdout), b"\0\xff raw\nroot=/the/root")

    def test_big_output_comes_in_bounded_lines(self):
        data = os.urandom(3 << 20)
        p = run(base64.b64encode(data) + b"\n", True)
        self.assertEqual(decode(p.stdout), data + b"root=/the/root")
        # At most 768 KiB of bytes a line: the host's reader caps a line at 4 MiB of characters.
        self.assertLessEqual(max(len(line) for line in p.stdout.split(b"\n")), 4 * (3 << 18) // 3)

    def test_blank_lines_are_skipped(self):
        p = run(b"\n\n" + base64.b64encode(b"x") + b"\n\n", True)
        self.assertEqual(decode(p.stdout), b"xroot=/the/root")


if __name__ == "__main__":
    unittest.main()
