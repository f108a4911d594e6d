"""Path confinement: every path is walked from a descriptor of the root with O_NOFOLLOW, and a symlink is
followed only by walking its target again under the root; nothing resolves to a file outside it."""
import os
import stat
import unittest

from harness import RunnerCase, runner


class Walk(RunnerCase):
    def test_plain_paths(self):
        self.put("a/b/c.txt", b"x")
        pfd, name, parts, dangling = runner.walk("a/b/c.txt", True)
        try:
            self.assertEqual((name, parts, dangling), ("c.txt", ["a", "b"], False))
            self.assertEqual(os.path.realpath("/proc/self/fd/%d" % pfd), self.path("a/b"))
        finally:
            os.close(pfd)

    def test_dot_dot_inside_is_walked_back(self):
        self.put("a/x", b"1")
        os.mkdir(self.path("b"))
        pfd, name, parts, _ = runner.walk("b/../a/./x", True)
        os.close(pfd)
        self.assertEqual((name, parts), ("x", ["a"]))

    def test_dot_dot_above_the_root_escapes(self):
        with self.assertRaises(runner.Fail) as e:
            runner.walk("../etc/passwd", True)
        self.assertEqual(e.exception.code, "ESCAPE")
        with self.assertRaises(runner.Fail):
            runner.walk("a/../../x", True, create=True)
        self.assertNoLeak()

    def test_absolute_symlink_out_escapes(self):
        os.symlink(self.outside, self.path("out"))
        for rel in ("out/secret", "out"):
            with self.assertRaises(runner.Fail) as e:
                runner.walk(rel, True)
            self.assertEqual(e.exception.code, "ESCAPE", rel)
        self.assertNoLeak()

    def test_relative_symlink_out_escapes(self):
        os.mkdir(self.path("d"))
        os.symlink("../../../../../../" + self.outside.lstrip("/"), self.path("d/out"))
        with self.assertRaises(runner.Fail) as e:
            runner.walk("d/out/secret", True)
        self.assertEqual(e.exception.code, "ESCAPE")

    def test_absolute_symlink_into_the_root_is_walked_under_it(self):
        self.put("real/f", b"in")
        os.symlink(self.path("real"), self.path("link"))
        pfd, name, parts, _ = runner.walk("link/f", True)
        os.close(pfd)
        self.assertEqual((name, parts), ("f", ["real"]))

    def test_a_prefix_of_the_root_is_not_the_root(self):
        # ROOT="/tmp/x" must not accept a link to "/tmp/x-other/...".
        sibling = self.root + "-other"
        os.mkdir(sibling)
        # Were the prefix taken as the root, the link would land here rather than be refused.
        self.put("-other/f", b"decoy")
        try:
            os.symlink(sibling, self.path("sib"))
            with self.assertRaises(runner.Fail) as e:
                runner.walk("sib/f", True)
            self.assertEqual(e.exception.code, "ESCAPE")
        finally:
            os.rmdir(sibling)

    def test_symlink_loops_end(self):
        os.symlink("b", self.path("a"))
        os.symlink("a", self.path("b"))
        with self.assertRaises(runner.Fail) as e:
            runner.walk("a/x", True)
        self.assertEqual(e.exception.code, "ESCAPE")
        self.assertNoLeak()

    def test_dangling_symlink_inside_a_link_is_refused_for_create(self):
        os.symlink("nowhere", self.path("dl"))
        with self.assertRaises(runner.Fail) as e:
            runner.walk("dl/x", True, create=True)
        self.assertEqual(e.exception.code, "ESCAPE")
        self.assertFalse(os.path.exists(self.path("nowhere")))

    def test_create_makes_missing_folders(self):
        pfd, name, parts, _ = runner.walk("n/e/w/f", False, create=True)
        os.close(pfd)
        self.assertEqual((name, parts), ("f", ["n", "e", "w"]))
        self.assertTrue(os.path.isdir(self.path("n/e/w")))


class Ops(RunnerCase):
    def test_read_through_a_link_out_is_refused(self):
        os.symlink(os.path.join(self.outside, "secret"), self.path("s"))
        for op in (b"r", b"R"):
            self.assertError(self.call(op, 1, b"s", b"-"), "ESCAPE")
        self.assertError(self.call(b"g", 2, b"s", b"0", b"10"), "ESCAPE")
        self.assertNoLeak()

    def test_final_symlink_is_never_opened_with_follow(self):
        # open_final adds O_NOFOLLOW: a link swapped in for the last component is refused, not followed.
        os.symlink(os.path.join(self.outside, "secret"), self.path("s"))
        pfd = os.open(self.root, runner.DIRF)
        try:
            with self.assertRaises(runner.Fail) as e:
                runner.open_final(pfd, "s", os.O_RDONLY)
            self.assertEqual(e.exception.code, "ESCAPE")
        finally:
            os.close(pfd)

    def test_write_through_a_link_is_refused_and_the_target_kept(self):
        target = os.path.join(self.outside, "secret")
        os.symlink(target, self.path("s"))
        self.assertError(self.call(b"w", 1, b"s", b"a", b"-", payload=b"pwned"), "ESCAPE")
        self.assertError(self.call(b"w", 2, b"s", b"w", b"-", payload=b"pwned"), "ESCAPE")
        with open(target) as f:
            self.assertEqual(f.read(), "outside")
        self.assertNoLeak()

    def test_write_below_a_link_out_is_refused(self):
        os.symlink(self.outside, self.path("out"))
        self.assertError(self.call(b"w", 1, b"out/new", b"w", b"-", payload=b"x"), "ESCAPE")
        self.assertError(self.call(b"m", 2, b"out/dir", b"-"), "ESCAPE")
        self.assertEqual(sorted(os.listdir(self.outside)), ["secret"])

    def test_remove_does_not_follow_a_link(self):
        os.symlink(self.outside, self.path("out"))
        self.assertEqual(self.call(b"d", 1, b"out"), [(1, ["o"], b"")])
        self.assertFalse(os.path.lexists(self.path("out")))
        self.assertTrue(os.path.exists(os.path.join(self.outside, "secret")))
        self.assertError(self.call(b"d", 2, b""), "EROOT")

    def test_special_files_are_refused_without_blocking(self):
        os.mkfifo(self.path("fifo"))
        # A FIFO with no writer would block an open without O_NONBLOCK: the call returns at once.
        self.assertError(self.call(b"r", 1, b"fifo", b"-"), "SPECIAL")
        self.assertError(self.call(b"g", 2, b"fifo", b"0", b"1"), "SPECIAL")
        # An append opens O_NONBLOCK too: with no reader that is ENXIO at once, never a wait.
        self.assertError(self.call(b"w", 3, b"fifo", b"a", b"-", payload=b"x"), "ENXIO")
        os.mkdir(self.path("dir"))
        self.assertError(self.call(b"r", 4, b"dir", b"-"), "EISDIR")
        self.assertError(self.call(b"r", 5, b"", b"-"), "EISDIR")
        self.assertNoLeak()

    def test_atomic_write_keeps_an_existing_mode_and_leaves_no_temp(self):
        self.put("run.sh", b"old", 0o755)
        self.assertEqual(self.call(b"w", 1, b"run.sh", b"w", b"-", payload=b"new"), [])
        self.assertEqual(self.call(b"e", 1), [(1, ["o"], b"")])
        with open(self.path("run.sh"), "rb") as f:
            self.assertEqual(f.read(), b"new")
        self.assertEqual(stat.S_IMODE(os.stat(self.path("run.sh")).st_mode), 0o755)
        self.assertEqual(os.listdir(self.root), ["run.sh"])
        self.assertNoLeak()

    def test_exclusive_write_refuses_an_existing_file(self):
        self.put("f", b"first")
        self.call(b"w", 1, b"f", b"x", b"-", payload=b"second")
        self.assertError(self.call(b"e", 1), "EEXIST")
        with open(self.path("f"), "rb") as f:
            self.assertEqual(f.read(), b"first")
        self.assertEqual(os.listdir(self.root), ["f"])

    def test_copy_entries_must_stay_inside(self):
        self.put("src/a", b"1")
        self.assertError(self.call(b"C", 1, b"src", b"dst", payload=b"f\0../../etc/passwd\0"), "ESCAPE")
        self.assertError(self.call(b"C", 2, b"src", b"dst2", payload=b"f\0/etc/passwd\0"), "ESCAPE")

    def test_rename_refuses_an_existing_target(self):
        self.put("a", b"1")
        self.put("b", b"2")
        self.assertError(self.call(b"n", 1, b"a", b"b"), "EEXIST")
        self.assertEqual(self.call(b"n", 2, b"a", b"c"), [(2, ["o"], b"")])
        self.assertEqual(sorted(os.listdir(self.root)), ["b", "c"])


if __name__ == "__main__":
    unittest.main()
