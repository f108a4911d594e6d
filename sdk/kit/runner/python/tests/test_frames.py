"""The runner's channel: request frames in (whole, split, truncated, hostile), reply frames out."""
import os
import struct
import unittest

from harness import RunnerCase, frame, parse_replies, runner


class NextFrame(unittest.TestCase):
    def test_whole_frame(self):
        buf = bytearray(frame([b"s", b"7", b"a/b"], b"pay"))
        h, payload, pos = runner.next_frame(buf, 0)
        self.assertEqual(h, [b"s", b"7", b"a/b"])
        self.assertEqual(payload, b"pay")
        self.assertEqual(pos, len(buf))

    def test_frames_back_to_back(self):
        buf = bytearray(frame([b"s", b"1", b"x"]) + frame([b"w", b"2", b"f", b"w", b"-"], b"\0\1\2"))
        first = runner.next_frame(buf, 0)
        second = runner.next_frame(buf, first[2])
        self.assertEqual(first[0], [b"s", b"1", b"x"])
        self.assertEqual(second[:2], ([b"w", b"2", b"f", b"w", b"-"], b"\0\1\2"))
        self.assertIsNone(runner.next_frame(buf, second[2]))

    def test_every_truncation_waits(self):
        whole = frame([b"r", b"3", b"file", b"-"], b"payload")
        for cut in range(len(whole)):
            self.assertIsNone(runner.next_frame(bytearray(whole[:cut]), 0), cut)

    def test_huge_lengths_wait_without_allocating(self):
        # A header claiming 4 GiB is a frame not yet whole: nothing is sized after it.
        buf = bytearray(struct.pack(">II", 0xFFFFFFFF, 0xFFFFFFFF) + b"abc")
        self.assertIsNone(runner.next_frame(buf, 0))

    def test_empty_header(self):
        h, payload, pos = runner.next_frame(bytearray(struct.pack(">II", 0, 0)), 0)
        self.assertEqual((h, payload, pos), ([b""], b"", 8))


class ReadInput(RunnerCase):
    def feed(self, data):
        r, w = os.pipe()
        try:
            os.write(w, data)
            runner.read_input(r)
        finally:
            os.close(r)
            os.close(w)
        return r

    def test_handles_whole_frames_and_keeps_the_rest(self):
        self.put("a.txt", b"hello")
        data = frame([b"s", b"1", b"a.txt"]) + frame([b"s", b"2", b"missing"])
        partial = frame([b"s", b"3", b"a.txt"])
        fd = self.feed(data + partial[:5])
        replies = self.drain()
        self.assertEqual([r[0] for r in replies], [1, 2])
        self.assertEqual(replies[0][1][:3], ["o", "f", "5"])
        self.assertEqual(replies[1][1], ["o"])
        # The partial frame stays buffered for the next read of that descriptor.
        self.assertEqual(bytes(runner.inbufs[fd]), partial[:5])

    def test_split_frame_completes_on_the_next_read(self):
        self.put("a.txt", b"hello")
        whole = frame([b"s", b"9", b"a.txt"])
        r, w = os.pipe()
        try:
            os.write(w, whole[:6])
            runner.read_input(r)
            self.assertEqual(self.drain(), [])
            os.write(w, whole[6:])
            runner.read_input(r)
            replies = self.drain()
        finally:
            os.close(r)
            os.close(w)
        self.assertEqual(replies[0][0], 9)
        self.assertEqual(runner.inbufs[r], bytearray())

    def test_end_of_input_ends_the_runner(self):
        r, w = os.pipe()
        os.close(w)
        try:
            with self.assertRaises(SystemExit):
                runner.read_input(r)
        finally:
            os.close(r)


class HostileRequests(RunnerCase):
    def test_unknown_op(self):
        self.assertError(self.call(b"?", 4), "EINVAL")

    def test_missing_fields_fail_that_request_only(self):
        self.assertError(self.call(b"r", 5), "EIO")
        self.assertError(self.call(b"g", 6, b"f"), "EIO")
        # The runner still serves.
        self.put("f", b"x")
        self.assertEqual(self.call(b"s", 7, b"f")[0][1][:2], ["o", "f"])

    def test_bad_numbers(self):
        self.put("f", b"data")
        self.assertError(self.call(b"g", 1, b"f", b"zero", b"4"), "EIO")
        self.assertError(self.call(b"g", 2, b"f", b"-1", b"4"), "EINVAL")
        self.assertError(self.call(b"g", 3, b"f", b"0", b"-4"), "EINVAL")
        self.assertError(self.call(b"r", 4, b"f", b"lots"), "EIO")
        self.assertError(self.call(b"m", 5, b"d", b"999"), "EIO")
        self.assertNoLeak()

    def test_write_of_an_unknown_kind_through_hand_off_is_refused(self):
        self.assertError(self.call(b"W", 1, b"f", b"a", b"-"), "EINVAL")
        self.assertError(self.call(b"F", 2, b"f", b"w", b"-", b"99"), "EINVAL")
        self.assertError(self.call(b"Q", 3, b"f", b"w", b"-", b"99", b"1"), "EINVAL")
        self.assertFalse(os.path.exists(self.path("f")))

    def test_commands_for_unknown_ids_are_ignored(self):
        for op in (b"k", b"i", b"I", b"c", b"e", b"z"):
            self.assertEqual(self.call(op, 12345), [])


class Replies(RunnerCase):
    def test_reply_frame(self):
        runner.reply(42, ["o", 7, b"bytes", "text"], b"payload")
        self.assertEqual(self.drain(), [(42, ["o", "7", "bytes", "text"], b"payload")])

    def test_errors_name_errno_or_our_codes(self):
        runner.fail(1, runner.Fail("ESCAPE", "why"))
        runner.fail(2, FileNotFoundError(2, "No such file"))
        runner.fail(3, ValueError("boom"))
        self.assertEqual(
            self.drain(),
            [(1, ["e", "ESCAPE", "why"], b""), (2, ["e", "ENOENT", "No such file"], b""), (3, ["e", "EIO", "ValueError: boom"], b"")],
        )

    def test_parse_replies_refuses_a_truncated_frame(self):
        with self.assertRaises(AssertionError):
            parse_replies(struct.pack(">III", 1, 5, 0) + b"ab")


if __name__ == "__main__":
    unittest.main()
