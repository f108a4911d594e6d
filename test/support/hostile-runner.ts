/**
 * A runner replaced by the agent's own program (what an agent that took over its runner would run):
 * Python, stdlib only, started by a backend's own transport start function in place of RUNNER_SOURCE.
 * It parses requests as the real runner does and answers each with the forged frames of its MODE.
 */
export type HostileMode = "header" | "size" | "claim" | "kallsyms" | "fuzz";

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
    elif MODE == "fuzz":
        fuzz(op, rid, f)
seen = []
def honest(op, rid):
    if op == b"s":
        send(frame(rid, [b"o", b"f", 2, 1000, b"x"]))
    elif op == b"x":
        send(frame(rid, [b"x", 0, 0, 2], b"ok"))
    elif op in (b"r", b"R"):
        send(frame(rid, [b"s", 2]) + frame(rid, [b"d"], b"hi") + frame(rid, [b"o", 2]))
    elif op in (b"l", b"t"):
        send(frame(rid, [b"o"], b"f\0a"))
    elif op == b"p":
        send(frame(rid, [b"1"], b"hi") + frame(rid, [b"q", 0]))
    else:
        send(frame(rid, [b"o"]))
def fuzz(op, rid, f):
    # One attack per request, at random; the host must answer each by ending this runner, or by a
    # deadline, never by taking the bytes. Some requests are answered honestly (so calls also succeed).
    seen.append(rid)
    a = random.randrange(14)
    kinds = [b"o", b"x", b"d", b"s", b"h", b"1", b"e", b"hello", b"q", b"a"]
    if a == 0 or a == 1:
        honest(op, rid)
    elif a == 2:
        send(struct.pack(">III", rid, random.choice([65537, 600 << 20, 0xFFFFFFFF]), 0))
        junk(random.choice([1, 4, 64]) << 20)
    elif a == 3:
        k = random.choice(kinds)
        send(struct.pack(">III", rid, len(k), random.choice([200 << 20, 1 << 30, 0xFFFFFFFF])) + k)
        junk(random.choice([1, 16, 256]) << 20)
    elif a == 4:
        # A frame the call may take, half sent, then silence: held only until the call's deadline.
        k = b"o" if op in (b"l", b"t") else b"x\0" + b"0\0" + b"0\0" + b"0" if op == b"x" else b"o"
        n = random.choice([1 << 20, 8 << 20, 60 << 20])
        send(struct.pack(">III", rid, len(k), n) + k)
        junk(n // 2)
        time.sleep(5)
    elif a == 5:
        send(frame(rid, [b"s", random.choice([b"-1", b"NaN", b"1e9", b"4294967297", b"99999999999999999999", b""])]))
    elif a == 6:
        send(frame(random.choice([rid + 1, rid + 1000, 0, 0xFFFFFFFF]), [random.choice(kinds), 1, 2, 3]))
    elif a == 7:
        honest(op, rid)
        honest(op, rid)
    elif a == 8:
        other = random.choice(seen)
        send(frame(other, [random.choice(kinds), 0, 0, 0]))
    elif a == 9:
        piece = frame(rid, [b"d"], os.urandom(1 << 20)) if op in (b"r", b"R") else frame(rid, [b"1"], os.urandom(65536))
        if op in (b"r", b"R"):
            send(frame(rid, [b"s", 1]))
        for _ in range(256):
            send(piece)
    elif a == 10:
        b = frame(rid, [b"o", b"f", 2, 1000, b"x"])
        for i in range(len(b) - 1):
            send(b[i:i + 1])
            time.sleep(0.1)
    elif a == 11:
        b = frame(rid, [b"o", b"f", 2, 1000, b"x"])
        send(b[: random.randrange(len(b))])
        os._exit(random.choice([0, 1, 9]))
    elif a == 12:
        send(os.urandom(random.randint(1, 4096)))
    # a == 13: no answer at all (a wedged runner)
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
