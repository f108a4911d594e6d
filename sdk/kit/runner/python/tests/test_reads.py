"""The read ops (r, R, g) share one open (open_read) and one read loop (Reader): sizes, caps, ranges."""
import os
import unittest

from harness import RunnerCase, runner


def body(replies):
    """The bytes of a streamed read: "s" size, "d" chunks, then "o" total (checked here)."""
    kinds = [r[1][0] for r in replies]
    assert kinds[0] == "s" and kinds[-1] == "o" and set(kinds[1:-1]) <= {"d"}, kinds
    data = b"".join(r[2] for r in replies if r[1][0] == "d")
    assert int(replies[-1][1][1]) == len(data), (replies[-1], len(data))
    return int(replies[0][1][1]), data


class WholeReads(RunnerCase):
    def test_small_file(self):
        self.put("f", b"hello\0world")
        self.assertEqual(body(self.call(b"r", 1, b"f", b"-")), (11, b"hello\0world"))
        self.assertNoLeak()

    def test_empty_file(self):
        self.put("f")
        self.assertEqual(body(self.call(b"r", 1, b"f", b"-")), (0, b""))

    def test_big_file_comes_in_chunks(self):
        data = os.urandom(runner.CHUNK * 2 + 17)
        self.put("big", data)
        replies = self.call(b"r", 1, b"big", b"-")
        self.assertEqual(body(replies), (len(data), data))
        self.assertTrue(all(len(r[2]) <= runner.CHUNK for r in replies))
        self.assertEqual(sum(1 for r in replies if r[1][0] == "d"), 3)
        self.assertNoLeak()

    def test_cap_at_open(self):
        self.put("f", b"x" * 100)
        self.assertEqual(self.call(b"r", 1, b"f", b"99"), [(1, ["e", "TOOBIG", "100"], b"")])
        self.assertEqual(body(self.call(b"r", 2, b"f", b"100")), (100, b"x" * 100))
        self.assertNoLeak()

    def test_cap_counts_bytes_actually_read(self):
        # A file that grows after the open (the agent appends while we read) stops at the cap.
        p = self.put("grow", b"a" * 10)
        runner.handle([b"r", b"1", b"grow", b"10"], b"")
        with open(p, "ab") as f:
            f.write(b"b" * 10)
        replies = self.drain()
        self.assertEqual(replies[0][1], ["s", "10"])
        self.assertEqual(replies[-1][1], ["e", "TOOBIG", "20"])
        self.assertNoLeak()

    def test_hand_off_holds_the_descriptor_until_z(self):
        data = os.urandom(runner.HANDOFF + 1)
        self.put("big", data)
        replies = self.call(b"R", 5, b"big", b"-")
        self.assertEqual(len(replies), 1)
        kind, fd, dev, ino, size = replies[0][1]
        st = os.stat(self.path("big"))
        self.assertEqual((kind, int(dev), int(ino), int(size)), ("h", st.st_dev, st.st_ino, len(data)))
        with open("/proc/self/fd/%s" % fd, "rb") as f:
            self.assertEqual(f.read(), data)
        self.assertEqual(self.call(b"z", 5), [])
        self.assertNotIn(5, runner.held)
        self.assertFalse(os.path.exists("/proc/self/fd/%s" % fd) and int(fd) not in (self.r, self.w))
        self.assertNoLeak()

    def test_small_file_is_not_handed_off(self):
        self.put("small", b"abc")
        self.assertEqual(body(self.call(b"R", 1, b"small", b"-")), (3, b"abc"))


class RangeReads(RunnerCase):
    def setUp(self):
        RunnerCase.setUp(self)
        self.data = bytes(range(256)) * 40
        self.put("f", self.data)

    def test_range_inside(self):
        self.assertEqual(body(self.call(b"g", 1, b"f", b"100", b"50")), (50, self.data[100:150]))

    def test_range_past_the_end_is_cut(self):
        n = len(self.data)
        self.assertEqual(body(self.call(b"g", 1, b"f", str(n - 5), b"50")), (5, self.data[-5:]))
        self.assertEqual(body(self.call(b"g", 2, b"f", str(n + 100), b"50")), (0, b""))
        self.assertEqual(body(self.call(b"g", 3, b"f", b"0", b"0")), (0, b""))
        self.assertNoLeak()

    def test_range_of_a_file_bigger_than_a_chunk_stops_at_its_length(self):
        big = os.urandom(runner.CHUNK * 3)
        self.put("big", big)
        length = runner.CHUNK + 3
        replies = self.call(b"g", 1, b"big", b"7", str(length))
        self.assertEqual(body(replies), (length, big[7 : 7 + length]))
        self.assertNoLeak()

    def test_range_of_a_growing_file_stops_at_its_length(self):
        p = self.path("f")
        runner.handle([b"g", b"1", b"f", b"0", b"10"], b"")
        with open(p, "ab") as f:
            f.write(b"more")
        self.assertEqual(body(self.drain()), (10, self.data[:10]))


class ReadLoop(RunnerCase):
    def test_reader_step_by_step(self):
        p = self.put("f", b"abc")
        fd = os.open(p, os.O_RDONLY)
        r = runner.Reader(1, fd, -1)
        self.assertFalse(r.step())
        self.assertTrue(r.step())
        self.assertEqual([x[1][0] for x in self.drain()], ["d", "o"])
        with self.assertRaises(OSError):
            os.fstat(fd)  # closed by the loop at the end

    def test_a_read_error_fails_the_request_and_closes(self):
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        r = runner.Reader(3, fd, -1)
        self.assertTrue(r.step())
        replies = self.drain()
        self.assertEqual(replies[0][1][:2], ["e", "EISDIR"])
        with self.assertRaises(OSError):
            os.fstat(fd)


if __name__ == "__main__":
    unittest.main()
