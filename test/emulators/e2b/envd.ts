// Size: envd's two connect-RPC services (process, filesystem) and its /files routes for one emulated
// sandbox, each a thin translation onto docker exec in the sandbox's container.
import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";
import type { Duplex } from "node:stream";
import type Docker from "dockerode";
import { RpcError, ServerStream, decodeRequest, readBody, sendUnary, sendUnaryError } from "./connect.js";
import { USER_HOME, exitCode, run, start } from "./containers.js";

const MARKER = "E2B_EMU_PROC";

interface Proc {
  pid: number;
  marker: string;
  /** Who runs it: the kill runs as the same user, since only they (or CAP_SYS_PTRACE) may read its environ. */
  user: string;
  tag?: string | undefined;
  config: { cmd: string; args: string[]; envs: Record<string, string>; cwd?: string | undefined };
  stream: Duplex;
  stdin: boolean;
  listeners: Set<(event: unknown) => void>;
  done: Promise<void>;
}

type Json = Record<string, unknown>;

/** envd of one sandbox: processes started through it, and the RPCs and file routes the SDK calls. */
export class Envd {
  readonly #procs = new Map<number, Proc>();
  /** Open Start/Connect streams: a pause drops them all, as E2B drops every connection (the processes live on). */
  readonly #streams = new Set<ServerStream>();
  #nextPid = 1000;

  constructor(
    readonly docker: Docker,
    readonly container: Docker.Container,
    readonly env: () => Record<string, string>,
    /** Told the sandbox path of every /files transfer (tests check where bytes went). */
    readonly onTransfer: (t: { route: "upload" | "download"; path: string }) => void = () => undefined,
  ) {}

  /** Routes one envd request (already known to target this sandbox). */
  async handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const user = userOf(req);
    if (url.pathname === "/health") {
      res.writeHead(204).end();
      return;
    }
    if (url.pathname === "/files") return req.method === "GET" ? this.#download(res, url, user) : this.#upload(req, res, url, user);
    const m = /^\/(process\.Process|filesystem\.Filesystem)\/(\w+)$/.exec(url.pathname);
    if (!m || req.method !== "POST") {
      res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ code: 404, message: `no route ${url.pathname}` }));
      return;
    }
    const streaming = String(req.headers["content-type"] ?? "").startsWith("application/connect+json");
    const method = `${m[1]}/${m[2]}`;
    try {
      const msg = decodeRequest(await readBody(req), streaming);
      if (streaming) {
        const stream = new ServerStream(res);
        const timeout = Number(req.headers["connect-timeout-ms"] ?? 0);
        try {
          if (method === "process.Process/Start") await this.#start(msg, stream, user, timeout);
          else if (method === "process.Process/Connect") await this.#connect(msg, stream, timeout);
          else throw new RpcError("unimplemented", `${method} is not emulated`);
        } catch (e) {
          stream.end(e instanceof RpcError ? e : new RpcError("internal", String(e)));
        }
        return;
      }
      sendUnary(res, await this.#unary(method, msg, user));
    } catch (e) {
      sendUnaryError(res, e instanceof RpcError ? e : new RpcError("internal", String((e as Error)?.message ?? e)));
    }
  }

  /** Drops every open process stream without an end (the sandbox is being paused: its processes keep running). */
  dropStreams(): void {
    for (const s of this.#streams) s.res.destroy();
    this.#streams.clear();
  }

  /** Kills every process of this sandbox (the sandbox is being removed). */
  dropAll(): void {
    for (const p of this.#procs.values()) p.stream.destroy();
    this.#procs.clear();
  }

  async #unary(method: string, msg: Json, user: string): Promise<unknown> {
    switch (method) {
      case "process.Process/List":
        return { processes: [...this.#procs.values()].map((p) => ({ pid: p.pid, config: p.config, ...(p.tag ? { tag: p.tag } : {}) })) };
      case "process.Process/SendInput": {
        const p = this.#proc(msg);
        const input = (msg.input as Json | undefined)?.stdin;
        if (!p.stdin) throw new RpcError("failed_precondition", "process was started without stdin");
        if (typeof input === "string") await new Promise<void>((r) => p.stream.write(Buffer.from(input, "base64"), () => r()));
        return {};
      }
      case "process.Process/CloseStdin":
        this.#proc(msg).stream.end();
        return {};
      case "process.Process/SendSignal": {
        const p = this.#proc(msg);
        const sig = msg.signal === "SIGNAL_SIGTERM" || msg.signal === 15 ? "TERM" : "KILL";
        await this.#killMarker(p, sig);
        return {};
      }
      case "filesystem.Filesystem/Stat":
        return { entry: await this.#entry(this.#path(msg.path, user), user) };
      case "filesystem.Filesystem/ListDir": {
        const dir = this.#path(msg.path, user);
        const depth = Math.max(1, Math.min(Number(msg.depth ?? 1) || 1, 16));
        const r = await this.#py(LIST_PY, [dir, String(depth)], user);
        return { entries: JSON.parse(r) as unknown[] };
      }
      case "filesystem.Filesystem/MakeDir": {
        const p = this.#path(msg.path, user);
        const r = await run(this.docker, this.container, ["sh", "-c", '[ -e "$1" ] && exit 17; mkdir -p -- "$1"', "sh", p], { user });
        if (r.code === 17) throw new RpcError("already_exists", `directory ${p} already exists`);
        if (r.code !== 0) throw new RpcError("internal", r.stderr.toString());
        return { entry: await this.#entry(p, user) };
      }
      case "filesystem.Filesystem/Remove": {
        const p = this.#path(msg.path, user);
        const r = await run(this.docker, this.container, ["rm", "-rf", "--", p], { user });
        if (r.code !== 0) throw new RpcError("internal", r.stderr.toString());
        return {};
      }
      case "filesystem.Filesystem/Move": {
        const [a, b] = [this.#path(msg.source, user), this.#path(msg.destination, user)];
        const r = await run(
          this.docker,
          this.container,
          ["sh", "-c", '[ -e "$1" ] || [ -L "$1" ] || exit 2; mkdir -p -- "$(dirname -- "$2")" && mv -T -- "$1" "$2"', "sh", a, b],
          { user },
        );
        if (r.code === 2) throw new RpcError("not_found", `${a} not found`);
        if (r.code !== 0) throw new RpcError("internal", r.stderr.toString());
        return { entry: await this.#entry(b, user) };
      }
    }
    throw new RpcError("unimplemented", `${method} is not emulated`);
  }

  async #entry(p: string, user: string): Promise<unknown> {
    const out = await this.#py(STAT_PY, [p], user);
    return JSON.parse(out) as unknown;
  }

  async #py(source: string, args: string[], user: string): Promise<string> {
    const r = await run(this.docker, this.container, ["python3", "-I", "-c", source, ...args], { user });
    if (r.code === 2) throw new RpcError("not_found", `${args[0]} not found`);
    if (r.code !== 0) throw new RpcError("internal", r.stderr.toString().slice(0, 500));
    return r.stdout.toString();
  }

  #proc(msg: Json): Proc {
    const pid = Number((msg.process as Json | undefined)?.pid);
    const p = this.#procs.get(pid);
    if (!p) throw new RpcError("not_found", `process with pid ${pid} not found`);
    return p;
  }

  /** Relative paths are the user's home's, as envd has them. */
  #path(p: unknown, user: string): string {
    if (typeof p !== "string" || p === "") throw new RpcError("invalid_argument", "path is required");
    return path.posix.resolve(user === "root" ? "/root" : USER_HOME, p);
  }

  async #start(msg: Json, stream: ServerStream, user: string, timeoutMs: number): Promise<void> {
    const cfg = (msg.process ?? {}) as { cmd?: string; args?: string[]; envs?: Record<string, string>; cwd?: string };
    if (!cfg.cmd) throw new RpcError("invalid_argument", "process.cmd is required");
    const marker = randomBytes(8).toString("hex");
    const env = { ...this.env(), ...cfg.envs, [MARKER]: marker };
    const stdin = msg.stdin === true;
    let s;
    try {
      s = await start(this.docker, this.container, [cfg.cmd, ...(cfg.args ?? [])], {
        user,
        env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
        cwd: cfg.cwd ? this.#path(cfg.cwd, user) : user === "root" ? "/root" : USER_HOME,
        stdin,
      });
    } catch (e) {
      throw new RpcError("internal", `failed to start process: ${String((e as Error).message)}`);
    }
    const pid = this.#nextPid++;
    const listeners = new Set<(event: unknown) => void>();
    const emit = (event: unknown) => {
      for (const l of listeners) l(event);
    };
    const proc: Proc = {
      pid,
      marker,
      user,
      tag: typeof msg.tag === "string" ? msg.tag : undefined,
      config: { cmd: cfg.cmd, args: cfg.args ?? [], envs: cfg.envs ?? {}, ...(cfg.cwd ? { cwd: cfg.cwd } : {}) },
      stream: s.stream,
      stdin,
      listeners,
      done: Promise.resolve(),
    };
    this.#procs.set(pid, proc);
    s.stdout.on("data", (b: Buffer) => emit({ event: { data: { stdout: b.toString("base64") } } }));
    s.stderr.on("data", (b: Buffer) => emit({ event: { data: { stderr: b.toString("base64") } } }));
    const outputsDone = Promise.all([new Promise((r) => s.stdout.once("end", r)), new Promise((r) => s.stderr.once("end", r))]);
    proc.done = (async () => {
      await outputsDone;
      const code = await exitCode(s.exec);
      this.#procs.delete(pid);
      emit({ event: { end: { exitCode: code, exited: true, status: `exit status ${code}` } } });
      emit(END);
    })();
    stream.send({ event: { start: { pid } } });
    await this.#follow(proc, stream, timeoutMs);
  }

  async #connect(msg: Json, stream: ServerStream, timeoutMs: number): Promise<void> {
    const proc = this.#proc(msg);
    stream.send({ event: { start: { pid: proc.pid } } });
    await this.#follow(proc, stream, timeoutMs);
  }

  /** Relays a process's events to one stream until it ends, the client goes away, or its deadline passes (then the process is killed). */
  async #follow(proc: Proc, stream: ServerStream, timeoutMs: number): Promise<void> {
    await new Promise<void>((resolve) => {
      this.#streams.add(stream);
      const finish = (error?: RpcError) => {
        this.#streams.delete(stream);
        proc.listeners.delete(listener);
        clearTimeout(timer);
        clearInterval(ping);
        stream.end(error);
        resolve();
      };
      const listener = (event: unknown) => (event === END ? finish() : stream.send(event));
      proc.listeners.add(listener);
      const timer =
        timeoutMs > 0
          ? setTimeout(() => {
              void this.#killMarker(proc, "KILL");
              finish(new RpcError("deadline_exceeded", "the operation timed out"));
            }, timeoutMs)
          : undefined;
      const ping = setInterval(() => stream.send({ event: { keepalive: {} } }), 50_000);
      stream.res.once("close", () => finish());
      if (!this.#procs.has(proc.pid)) void proc.done.then(() => finish());
    });
  }

  async #killMarker({ marker, user }: Proc, sig: "KILL" | "TERM"): Promise<void> {
    const script = `for d in /proc/[0-9]*; do grep -qsxz "${MARKER}=$1" "$d/environ" 2>/dev/null && kill -${sig} "\${d#/proc/}" 2>/dev/null; done; exit 0`;
    await run(this.docker, this.container, ["sh", "-c", script, "sh", marker], { user }).catch(() => undefined);
  }

  async #download(res: ServerResponse, url: URL, user: string): Promise<void> {
    const p = this.#path(url.searchParams.get("path") ?? "", user);
    this.onTransfer({ route: "download", path: p });
    const r = await run(this.docker, this.container, ["sh", "-c", '[ -e "$1" ] || exit 44; [ -d "$1" ] && exit 45; exec cat -- "$1"', "sh", p], {
      ...as(user, p),
      max: 1024 ** 3,
    });
    if (r.code === 44) return jsonError(res, 404, `path '${p}' does not exist`);
    if (r.code === 45) return jsonError(res, 400, `path '${p}' is a directory`);
    if (r.code !== 0) return jsonError(res, 500, r.stderr.toString().slice(0, 500));
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": r.stdout.length });
    res.end(r.stdout);
  }

  async #upload(req: IncomingMessage, res: ServerResponse, url: URL, user: string): Promise<void> {
    const body = await readBody(req);
    const type = String(req.headers["content-type"] ?? "");
    const files: { path: string; data: Buffer }[] = [];
    if (type.startsWith("multipart/form-data")) {
      const form = await new Response(body, { headers: { "content-type": type } }).formData();
      for (const [, v] of form.entries()) {
        if (typeof v === "string") continue;
        files.push({ path: url.searchParams.get("path") || v.name, data: Buffer.from(await v.arrayBuffer()) });
      }
    } else {
      files.push({
        path: url.searchParams.get("path") ?? "",
        data: req.headers["content-encoding"] === "gzip" ? (await import("node:zlib")).gunzipSync(body) : body,
      });
    }
    const out: unknown[] = [];
    for (const f of files) {
      const p = this.#path(f.path, user);
      this.onTransfer({ route: "upload", path: p });
      const r = await run(this.docker, this.container, ["sh", "-c", 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"', "sh", p], {
        ...as(user, p),
        stdin: f.data,
      });
      if (r.code !== 0) return jsonError(res, 500, r.stderr.toString().slice(0, 500));
      out.push({ name: path.posix.basename(p), type: "file", path: p });
    }
    const json = JSON.stringify(out);
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(json) }).end(json);
  }
}

const END = Symbol("end");

/**
 * Who moves a transfer's bytes. envd is root with every capability in its VM: it opens a runner's
 * /proc/<pid>/fd/<n> though the runner is not dumpable, which the sandbox's user cannot. Emulated by an
 * exec as root (which alone holds the container's CAP_SYS_PTRACE) for those paths only.
 */
function as(user: string, p: string): { user: string } {
  return /^\/proc\/\d+\/fd\/\d+$/.test(p) ? { user: "root" } : { user };
}

function jsonError(res: ServerResponse, code: number, message: string): void {
  const body = JSON.stringify({ code, message });
  res.writeHead(code, { "content-type": "application/json", "content-length": Buffer.byteLength(body) }).end(body);
}

/** The user from `Authorization: Basic base64("<user>:")`; envd's default is `user`. */
function userOf(req: IncomingMessage): string {
  const h = String(req.headers.authorization ?? "");
  const m = /^Basic\s+(\S+)$/.exec(h);
  if (!m) return "user";
  const name = Buffer.from(m[1]!, "base64").toString().split(":")[0] ?? "";
  return /^[a-z_][a-z0-9_-]*$/.test(name) ? name : "user";
}

/** EntryInfo as envd's JSON has it: lstat of one path (exit 2 when missing). */
const ENTRY_PY = `
import os, stat, sys, json, pwd, grp, datetime
def entry(p):
    st = os.lstat(p)
    t = "FILE_TYPE_SYMLINK" if stat.S_ISLNK(st.st_mode) else "FILE_TYPE_DIRECTORY" if stat.S_ISDIR(st.st_mode) else "FILE_TYPE_FILE"
    def name(f, i):
        try: return f(i)[0]
        except KeyError: return str(i)
    e = {"name": os.path.basename(p) or "/", "type": t, "path": p, "size": str(st.st_size), "mode": st.st_mode & 0o7777,
         "permissions": stat.filemode(st.st_mode), "owner": name(pwd.getpwuid, st.st_uid), "group": name(grp.getgrgid, st.st_gid),
         "modifiedTime": datetime.datetime.fromtimestamp(st.st_mtime, datetime.timezone.utc).isoformat().replace("+00:00", "Z")}
    if t == "FILE_TYPE_SYMLINK": e["symlinkTarget"] = os.path.realpath(p)
    return e
`;
const STAT_PY = `${ENTRY_PY}
try: print(json.dumps(entry(sys.argv[1])))
except FileNotFoundError: sys.exit(2)
`;
const LIST_PY = `${ENTRY_PY}
root, depth = sys.argv[1], int(sys.argv[2])
if not os.path.isdir(root): sys.exit(2)
out = []
def walk(d, level):
    for n in sorted(os.listdir(d)):
        p = os.path.join(d, n)
        e = entry(p); out.append(e)
        if level < depth and e["type"] == "FILE_TYPE_DIRECTORY": walk(p, level + 1)
walk(root, 1)
print(json.dumps(out))
`;
