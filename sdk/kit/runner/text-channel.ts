/**
 * The runner over a backend whose command streams carry text, not bytes (E2B's SDK decodes a command's
 * output as UTF-8; Daytona's session input and logs are strings). A small wrapper inside the sandbox
 * starts the runner as its child and turns its binary stdout into base64 lines (and, when asked, base64
 * lines on stdin back into bytes), so the runner's frames survive any text decoding on the way. The host
 * side decodes with `textChannelReader` / encodes with `textChannelWriter`. Only stdlib in the sandbox.
 */
import { Transform, type TransformCallback } from "node:stream";
import { RUNNER_SOURCE } from "./source.js";
import { ExecFailedError } from "../../errors.js";

const WRAPPER = String.raw`
import base64, os, subprocess, sys, threading
src, root, b64in = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
# The runner as a child: it keeps its own process group and marker logic; stderr passes through.
child = subprocess.Popen([sys.executable, "-I", "-S", "-c", src, root],
                         stdin=subprocess.PIPE if b64in else 0, stdout=subprocess.PIPE, bufsize=0)
if b64in:
    def feed():
        parts = []  # of the line being received: joined once its newline comes (a big write is one long line)
        try:
            while True:
                chunk = os.read(0, 1 << 20)
                if not chunk:
                    break
                if b"\n" not in chunk:
                    parts.append(chunk)
                    continue
                parts.append(chunk)
                *lines, rest = b"".join(parts).split(b"\n")
                parts = [rest]
                for line in lines:
                    if line:
                        data = memoryview(base64.b64decode(line))
                        while data:
                            data = data[os.write(child.stdin.fileno(), data):]
        except OSError:
            pass
        try:
            child.stdin.close()
        except OSError:
            pass
    threading.Thread(target=feed, daemon=True).start()
out = child.stdout.fileno()
while True:
    data = os.read(out, 3 << 18)
    if not data:
        break
    line = base64.b64encode(data) + b"\n"
    while line:
        line = line[os.write(1, line):]
sys.exit(child.wait())
`;

/**
 * argv that runs the runner behind the base64 wrapper; `b64Stdin` when the backend's stdin is text too.
 * The runner's source travels as an argument (about 40 KB, under Linux's 128 KiB limit for one argument).
 */
export function textRunnerArgv(python: string, root: string, b64Stdin: boolean, source: string = RUNNER_SOURCE): string[] {
  return [python, "-I", "-S", "-c", WRAPPER, source, root, b64Stdin ? "1" : "0"];
}

/**
 * The wrapper's stdout (text, in whatever chunks the backend delivers) back into the runner's bytes.
 * A big reply is one long line: only each new chunk is searched for its end, and whole 4-character groups
 * are decoded as they arrive, so nothing is scanned or held twice.
 */
export function textChannelReader(maxLine = MAX_LINE_CHARS): Transform {
  let pending = "";
  // Characters of the line being received: the wrapper's lines are at most 1 MiB (768 KiB of bytes).
  let lineLen = 0;
  return new Transform({
    readableObjectMode: false,
    writableObjectMode: true,
    transform(chunk: string | Buffer, _enc: BufferEncoding, cb: TransformCallback) {
      const text = typeof chunk === "string" ? chunk : chunk.toString("latin1");
      let from = 0;
      for (let nl = text.indexOf("\n"); nl >= 0; nl = text.indexOf("\n", from)) {
        if (lineLen + nl - from > maxLine) return cb(tooLong(maxLine));
        lineLen = 0;
        const line = pending + text.slice(from, nl);
        pending = "";
        if (line) this.push(Buffer.from(line, "base64"));
        from = nl + 1;
      }
      lineLen += text.length - from;
      // A runner that never ends its line ends its channel (the client then ends the runner).
      if (lineLen > maxLine) return cb(tooLong(maxLine));
      pending += text.slice(from);
      // A line's whole groups of 4 decode on their own (only the last group of a line carries padding).
      const whole = pending.length - (pending.length % 4);
      if (whole >= 65536) {
        this.push(Buffer.from(pending.slice(0, whole), "base64"));
        pending = pending.slice(whole);
      }
      cb();
    },
    flush(cb: TransformCallback) {
      if (pending) this.push(Buffer.from(pending, "base64"));
      pending = "";
      cb();
    },
  });
}

/** Longest line the reader takes: 4x the wrapper's longest (a base64 line of 768 KiB of bytes). */
export const MAX_LINE_CHARS = 4 << 20;

function tooLong(max: number): Error {
  return new ExecFailedError(`the runner's text channel sent a line over ${max} characters`);
}

/** Bytes for the runner as base64 lines, for a backend whose stdin takes text (pairs with `b64Stdin`). */
export function textChannelWriter(): Transform {
  return new Transform({
    transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback) {
      cb(null, `${chunk.toString("base64")}\n`);
    },
  });
}
