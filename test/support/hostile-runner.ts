/**
 * A runner replaced by the agent's own program (what an agent that took over its runner would run):
 * Python, stdlib only, started by a backend's own transport start function in place of RUNNER_SOURCE.
 * It parses requests as the real runner does and answers each with the forged frames of its MODE.
 */
export type HostileMode = "header" | "size" | "claim" | "kallsyms" | "random";

export function hostileRunnerSource(mode: HostileMode): string {
  return String.raw`
import os, struct, sys, time, random
MODE = "${mode}"
def frame(rid, fields, payload=b""):
    h = b"\0".join(f if isinstance(f, bytes) else str(f).encode() for f in fields)
    return struct.pack(">III", rid, len(h), len(payload)) + h + payload
def send(b):
    v = memoryview(b)
    while v:
        v = v[os.write(1, v):]
def junk(total):
    # Fresh bytes, a MiB at a time, until the host stops reading (EPIPE ends this process).
    piece = os.urandom(1 << 20)
    for _ in range(total >> 20):
        send(piece)
def handle(op, rid, f):
    if op == b"S":
        # No private pipe pair (Docker asks for one first): every attack stays on the transport's stream.
        send(frame(rid, [b"e", b"EINVAL", b"no"]))
    elif MODE == "header":
        # A header of 600 MiB: a reader that buffers it builds one 600 MiB string.
        send(struct.pack(">III", rid, 600 << 20, 0))
        junk(600 << 20)
    elif MODE == "size":
        send(frame(rid, [b"s", b"-1"]))
    elif MODE == "claim":
        # A 4 GiB data frame, 1 GiB of it sent.
        send(frame(rid, [b"s", b"100"]))
        send(struct.pack(">III", rid, 1, 0xFFFFFFFF) + b"d")
        junk(1 << 30)
    elif MODE == "kallsyms":
        if op == b"R":
            fd = os.open("/proc/kallsyms", os.O_RDONLY)
            st = os.fstat(fd)
            # Its own numbers for the file: a host that trusts them reads with its own credentials.
            send(frame(rid, [b"h", fd, st.st_dev, st.st_ino, 100000]))
        elif op == b"r":
            with open("/proc/kallsyms", "rb") as k:
                data = k.read(1 << 20)
            send(frame(rid, [b"s", len(data)]))
            send(frame(rid, [b"d"], data))
            send(frame(rid, [b"o", len(data)]))
    elif MODE == "random":
        for _ in range(random.randint(1, 4)):
            send(os.urandom(random.randint(1, 64)))
send(frame(0, [b"hello", b"1", os.getpid()]))
buf = b""
while True:
    c = os.read(0, 1 << 20)
    if not c:
        sys.exit(0)
    buf += c
    while len(buf) >= 8:
        hl, pl = struct.unpack_from(">II", buf)
        if len(buf) < 8 + hl + pl:
            break
        f = buf[8:8 + hl].split(b"\0")
        buf = buf[8 + hl + pl:]
        if f[0] in (b"z", b"Z", b"q", b"G", b"a", b"k"):
            continue
        handle(f[0], int(f[1]), f)
`;
}
