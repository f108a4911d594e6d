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
