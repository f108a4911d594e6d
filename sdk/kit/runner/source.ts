/**
 * Source of the in-sandbox runner (`python3 -I -S -c <source> <root>`): one long-lived process per sandbox
 * handle that runs commands and does every file operation inside the sandbox's own view, so the host never
 * opens a sandbox-controlled path. Its source is sdk/kit/runner/python/runner.py (linted, unit-tested by
 * sdk/kit/runner/python/tests); it ships as a string constant generated from that file
 * (python.generated.ts, by scripts/runner-source.ts), so the compiled package needs no data file. Standard
 * library only, and only modules that load in a few ms (no json; no selectors, signal or subprocess: their
 * imports were a third of a cold start). ctypes loads first: the runner makes itself non-dumpable before
 * anything else (about 4 ms of its start); imported rather than run (its tests), it does nothing.
 *
 * Requests on stdin, every frame: u32 BE header length, u32 BE payload length, header, payload. The header
 * is NUL-separated fields, the first two the op and a request id. Replies on stdout, every frame: u32 id,
 * u32 header length, u32 payload length, header, payload; the header's first field is the reply kind:
 *   "x" code trunc outlen    an exec's result; payload = stdout then stderr
 *   "o" [fields]             success (payload = the op's data)
 *   "s" size / "d"           a read's size, then its bytes in chunks (payload), ended by "o"
 *   "e" code message         failure; code is an errno name or ESCAPE / TOOBIG / SPECIAL
 * Id 0 carries one "hello" frame at start-up (hello, version, the runner's pid in its own view). Ops:
 *   x id max cwd argc argv... K=V...   run a command (cwd workspace-relative, K=V over the runner's own
 *                                      environment); payload = its stdin
 *   k id                               kill that command (or spawned process) and everything it started
  p id window cwd argc argv... K=V...  spawn a long-lived process with streamed stdio: replies "1" / "2"
                                     (payload = stdout / stderr bytes), "a" n (n stdin bytes written), and
                                     last "q" code (negative: killed by that signal); at most `window`
                                     unacknowledged bytes per output stream are in flight
  i id / I id                        bytes for a spawned process's stdin (payload) / end its stdin
  a id stream n                      the host consumed n more bytes of stream 1 or 2 (no reply)
  S id                               make a private pipe pair: replies "o" wfd ino rfd ino, the ends the
                                     host opens through /proc/<runner pid>/fd (host to runner, runner to host)
  G id from                          the host holds them: requests from id "from" on come over the pair and
                                     their replies go back over it ("-": it could not; the pair is dropped)
 *   r id path max                      read ("-" = no cap); the cap counts bytes actually read
 *   g id path offset length            read at most length bytes from offset (a range of a file of any
 *                                      size): replies "s" with the slice's size at open, then as "r"
 *   R id path max                      read, offering a descriptor hand-off for a file over HANDOFF bytes:
 *                                      replies "h" fd dev ino size and holds the descriptor until "z id"
 *                                      (the host reads /proc/<runner pid>/fd/<fd>); smaller files as "r"
 *   W id path kind mode                start a write of kind w or x by hand-off: replies "h" fd dev ino for
 *                                      the temp file (the host writes it through /proc/<pid>/fd/<fd>); then
 *                                      "c" frames (the fallback) and "e" as for "w"
 *   z id                               close a held read descriptor (no reply)
 *   P id                               make a spare: an unnamed file (O_TMPFILE) in the root, reply "h" fd
 *                                      dev ino; the host fills it through its descriptor before a write
 *   F id path kind mode fd             commit spare fd as a write of kind w or x: linked under a temp name
 *                                      in the target's folder, then renamed (w) or linked (x) into place
 *   Z id fd                            drop spare fd (no reply)
 *   Y id                               make an upload pipe: replies "o" rfd wfd; the host's file service
 *                                      writes into /proc/<pid>/fd/<wfd> as into a file
 *   Q id path kind mode rfd size       a write of kind w or x whose bytes come through upload pipe rfd:
 *                                      read as they land into an unnamed file (O_TMPFILE) in the target's
 *                                      folder, named into place as the size-th byte lands ("o"); the pipe
 *                                      is drained from then on, so a writer is never blocked
 *   q id rfd ok                        the host's upload into rfd ended (ok 1: every byte is in the pipe,
 *                                      a write still short fails; 0: it failed, the write is dropped and
 *                                      the pipe kept, drained, so its numbers are never reused); no reply
 *   w id path kind mode                start a write: kind w (atomic replace), x (exclusive), a (append),
 *                                      c (exclusive create in place); payload = first bytes
 *   c id / e id                        more bytes for write id / commit it
 *   l, t, s, d id path                 list (stat each) / typed readdir / lstat / remove recursively
 *   m id path mode                     mkdir -p (mode "-" = default)
 *   n id from to                       rename, refusing an existing target
 *   T id path                          regular files and folders below path (no symlinks followed)
 *   C id from to; payload type\0path\0 copy those entries from `from` into a new folder `to`
 * Paths are walked from a descriptor of the root, one component at a time with O_NOFOLLOW; a symlink met on
 * the way is followed only by walking its target again under the root (at most 40 hops), and refused when it
 * leads out. Special files are opened with O_NONBLOCK and refused after fstat, so nothing ever blocks.
 * Commands get their own pipes and session; when a command ends or is killed, its process group, its
 * descendants and every process carrying its environment marker are killed (setsid does not escape that).
 */
export { RUNNER_SOURCE } from "./python.generated.js";
