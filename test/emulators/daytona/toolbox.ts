import { randomUUID } from "node:crypto";
import path from "node:path";
import type { IncomingMessage } from "node:http";
import busboy from "busboy";
import type Docker from "dockerode";
import type { WebSocket } from "ws";
import { RunnerClient } from "../../../sdk/kit/runner/index.js";
import { startDockerRunner } from "../../../sdk/backends/docker/runner.js";
import { execAttached, type Attached, type Captured } from "./docker.js";
import { HttpError, type Reply } from "./http.js";

/** One command of a session: its log as Daytona frames it (stdout and stderr chunks, in order) and its process. */
interface SessionCommand {
  id: string;
  command: string;
  exitCode?: number | undefined;
  log: Array<{ stream: "stdout" | "stderr"; data: Buffer }>;
  proc?: Attached | undefined;
  followers: Set<WebSocket>;
  done: Promise<void>;
}

export interface ToolboxBox {
  id: string;
  containerId: string;
  workDir: string;
  sessions: Map<string, Map<string, SessionCommand>>;
  /** The in-sandbox process doing this toolbox's work (the real daemon lives in the sandbox too). */
  daemon?: { client: RunnerClient; env: Record<string, string> } | undefined;
}

const STDOUT_PREFIX = Buffer.from([1, 1, 1]);
const STDERR_PREFIX = Buffer.from([2, 2, 2]);
const MARKER = "DAYTONA_EMU_CMD";
/** Bytes one session command's log keeps (a real daemon writes it to a file; here memory is bounded). */
const MAX_LOG = 16 * 1024 * 1024;
const MAX_UPLOAD = 256 * 1024 * 1024;

/**
 * The in-sandbox daemon's REST API (Daytona calls it the toolbox), done by `docker exec` in the
 * sandbox's container: commands, sessions with stdin and followed logs, and the file API.
 */
export class Toolbox {
  constructor(
    private readonly docker: Docker,
    private readonly faults: { procFdRefused: boolean; transferDelayMs: number } = { procFdRefused: false, transferDelayMs: 0 },
  ) {}

  /** The sandbox paths the file routes were last asked for, oldest first (for tests that check where bytes went). */
  readonly transfers: Array<{ route: "upload" | "download"; path: string }> = [];

  /** The file routes' fault switches (see Faults in server.ts); `p` is recorded first. */
  async #transferFaults(route: "upload" | "download", p: string): Promise<void> {
    this.transfers.push({ route, path: p });
    if (this.transfers.length > 200) this.transfers.shift();
    if (this.faults.transferDelayMs > 0) await new Promise((r) => setTimeout(r, this.faults.transferDelayMs));
    if (this.faults.procFdRefused && /^\/proc(\/|$)/.test(p)) throw new HttpError(400, `open ${p}: permission denied`);
  }

  /**
   * Runs argv in the sandbox to completion. One long-lived process inside the container answers
   * (the project's runner, started with one attached `docker exec`), as Daytona's daemon does:
   * a `docker exec` per call would cost the engine's overhead every time.
   */
  async run(
    box: ToolboxBox,
    argv: string[],
    options: { env?: Record<string, string> | undefined; cwd?: string | undefined; stdin?: Buffer | undefined; timeoutMs?: number } = {},
  ): Promise<Captured> {
    if (!box.daemon?.client.alive) {
      const info = await this.docker.getContainer(box.containerId).inspect();
      const env = Object.fromEntries((info.Config.Env ?? []).map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]));
      const client = new RunnerClient(startDockerRunner(this.docker, this.docker.getContainer(box.containerId), [], "/"));
      await client.ready;
      box.daemon = { client, env };
    }
    const { client, env } = box.daemon;
    // The runner's cwd is relative to its root ("/"): a `cd` in the process itself keeps $PWD right.
    const r = await client.exec({
      argv: ["sh", "-c", 'cd -- "$1" || exit 1; shift; exec "$@"', "sh", options.cwd ?? box.workDir, ...argv],
      cwd: "",
      env: { ...env, ...(options.env ?? {}) },
      stdin: options.stdin,
      maxOutputBytes: 64 * 1024 * 1024,
      timeoutMs: options.timeoutMs,
    });
    return { exitCode: r.timedOut ? -1 : r.exitCode, stdout: r.stdout, stderr: r.stderr };
  }

  /** Stops the box's in-sandbox process (its container stops or goes). */
  stopDaemon(box: ToolboxBox): void {
    void box.daemon?.client.stop();
    box.daemon = undefined;
  }

  abs(box: ToolboxBox, p: string | null | undefined): string {
    if (!p) throw new HttpError(400, "path is required");
    return path.posix.isAbsolute(p) ? p : path.posix.join(box.workDir, p);
  }

  async handle(box: ToolboxBox, method: string, route: string, url: URL, req: IncomingMessage, body: () => Promise<unknown>): Promise<Reply> {
    const q = url.searchParams;
    if (method === "GET" && (route === "/work-dir" || route === "/user-home-dir")) return { json: { dir: box.workDir } };
    if (method === "GET" && route === "/version") return { json: { version: "emulator" } };
    if (method === "POST" && route === "/process/execute") return { json: await this.#execute(box, (await body()) as ExecuteBody) };
    if (route === "/process/session") {
      if (method === "GET") return { json: [...box.sessions.keys()].map((sid) => this.#session(box, sid)) };
      if (method === "POST") {
        const { sessionId } = (await body()) as { sessionId?: string };
        if (!sessionId) throw new HttpError(400, "sessionId is required");
        if (box.sessions.has(sessionId)) throw new HttpError(409, `session ${sessionId} already exists`);
        box.sessions.set(sessionId, new Map());
        return { status: 201, json: {} };
      }
    }
    let m = /^\/process\/session\/([^/]+)$/.exec(route);
    if (m) {
      const sid = decodeURIComponent(m[1]!);
      if (method === "GET") return { json: this.#session(box, sid) };
      if (method === "DELETE") {
        await this.deleteSession(box, sid);
        return { status: 204 };
      }
    }
    m = /^\/process\/session\/([^/]+)\/exec$/.exec(route);
    if (m && method === "POST") return { json: await this.#sessionExec(box, decodeURIComponent(m[1]!), (await body()) as SessionExecBody) };
    m = /^\/process\/session\/([^/]+)\/command\/([^/]+)(\/logs|\/input)?$/.exec(route);
    if (m) {
      const cmd = this.#command(box, decodeURIComponent(m[1]!), decodeURIComponent(m[2]!));
      if (!m[3] && method === "GET") return { json: { id: cmd.id, command: cmd.command, ...(cmd.exitCode !== undefined ? { exitCode: cmd.exitCode } : {}) } };
      if (m[3] === "/logs" && method === "GET") return { json: logsOf(cmd) };
      if (m[3] === "/input" && method === "POST") {
        const { data } = (await body()) as { data?: string };
        if (typeof data !== "string") throw new HttpError(400, "data is required");
        if (!cmd.proc || cmd.exitCode !== undefined) throw new HttpError(410, "command already completed");
        cmd.proc.stdin.write(data);
        return { status: 200, json: {} };
      }
    }
    if (method === "POST" && route === "/files/bulk-upload") return this.#upload(box, req);
    if (method === "POST" && route === "/files/bulk-download") return this.#download(box, ((await body()) as { paths?: string[] }).paths ?? []);
    if (route === "/files" && method === "GET") return { json: await this.#list(box, this.abs(box, q.get("path"))) };
    if (route === "/files/info" && method === "GET") return { json: await this.#info(box, this.abs(box, q.get("path"))) };
    if (route === "/files" && method === "DELETE") {
      const p = this.abs(box, q.get("path"));
      await this.#sh(
        box,
        `[ -e "$1" ] || [ -L "$1" ] || exit 66; if [ "$2" = true ]; then rm -rf -- "$1"; else rm -d -- "$1" 2>/dev/null || rm -f -- "$1"; fi`,
        [p, q.get("recursive") ?? "false"],
      );
      return { status: 204 };
    }
    if (route === "/files/folder" && method === "POST") {
      await this.#sh(box, `mkdir -p -m "$2" -- "$1"`, [this.abs(box, q.get("path")), q.get("mode") || "755"]);
      return { status: 201, json: {} };
    }
    throw new HttpError(404, `no toolbox route ${method} ${route}`);
  }

  /** WebSocket `.../logs?follow=true`: the log so far, then live chunks; closed when the command ends. */
  follow(box: ToolboxBox, route: string, ws: WebSocket): void {
    const m = /^\/process\/session\/([^/]+)\/command\/([^/]+)\/logs$/.exec(route);
    if (!m) return ws.close(1008, "no such stream");
    let cmd: SessionCommand;
    try {
      cmd = this.#command(box, decodeURIComponent(m[1]!), decodeURIComponent(m[2]!));
    } catch {
      return ws.close(1008, "no such command");
    }
    for (const chunk of cmd.log) ws.send(frame(chunk.stream, chunk.data));
    if (cmd.exitCode !== undefined) return ws.close(1000);
    cmd.followers.add(ws);
    ws.on("close", () => cmd.followers.delete(ws));
  }

  async deleteSession(box: ToolboxBox, sid: string): Promise<void> {
    const cmds = box.sessions.get(sid);
    if (!cmds) throw new HttpError(404, `session ${sid} not found`);
    box.sessions.delete(sid);
    await Promise.all([...cmds.values()].filter((c) => c.exitCode === undefined).map((c) => this.#kill(box, c)));
  }

  /** A stopped container ends every session (its processes are gone). */
  dropSessions(box: ToolboxBox): void {
    for (const cmds of box.sessions.values()) for (const c of cmds.values()) c.proc?.stdin.destroy();
    box.sessions.clear();
    this.stopDaemon(box);
  }

  async #execute(box: ToolboxBox, b: ExecuteBody): Promise<{ exitCode: number; result: string }> {
    if (typeof b?.command !== "string") throw new HttpError(400, "command is required");
    const run = this.run(box, ["sh", "-c", b.command], { env: b.envs, cwd: b.cwd ? this.abs(box, b.cwd) : box.workDir });
    const r = b.timeout && b.timeout > 0 ? await withTimeout(run, b.timeout * 1000) : await run;
    // The daemon answers with stdout and stderr combined.
    return { exitCode: r.exitCode, result: Buffer.concat([r.stdout, r.stderr]).toString("utf8") };
  }

  #session(box: ToolboxBox, sid: string) {
    const cmds = box.sessions.get(sid);
    if (!cmds) throw new HttpError(404, `session ${sid} not found`);
    return {
      sessionId: sid,
      commands: [...cmds.values()].map((c) => ({ id: c.id, command: c.command, ...(c.exitCode !== undefined ? { exitCode: c.exitCode } : {}) })),
    };
  }

  #command(box: ToolboxBox, sid: string, cid: string): SessionCommand {
    const cmd = box.sessions.get(sid)?.get(cid);
    if (!cmd) throw new HttpError(404, `command ${cid} not found in session ${sid}`);
    return cmd;
  }

  async #sessionExec(box: ToolboxBox, sid: string, b: SessionExecBody) {
    const cmds = box.sessions.get(sid);
    if (!cmds) throw new HttpError(404, `session ${sid} not found`);
    if (typeof b?.command !== "string") throw new HttpError(400, "command is required");
    const id = randomUUID();
    const proc = await execAttached(this.docker, box.containerId, ["sh", "-c", b.command], { [MARKER]: id }, box.workDir);
    const cmd: SessionCommand = { id, command: b.command, log: [], proc, followers: new Set(), done: Promise.resolve() };
    let logged = 0;
    const push = (stream: "stdout" | "stderr") => (data: Buffer) => {
      // Followers get every chunk; only what a later reader replays is bounded (the daemon's log file is on disk).
      logged += data.length;
      if (logged <= MAX_LOG) cmd.log.push({ stream, data });
      for (const ws of cmd.followers) ws.send(frame(stream, data));
    };
    proc.stdout.on("data", push("stdout"));
    proc.stderr.on("data", push("stderr"));
    cmd.done = proc.exited.then((code) => {
      cmd.exitCode = code ?? -1;
      cmd.proc = undefined;
      for (const ws of cmd.followers) ws.close(1000);
      cmd.followers.clear();
    });
    cmds.set(id, cmd);
    if (b.runAsync || b.async) return { cmdId: id };
    await cmd.done;
    return { cmdId: id, exitCode: cmd.exitCode, ...logsOf(cmd) };
  }

  async #kill(box: ToolboxBox, c: SessionCommand): Promise<void> {
    c.proc?.stdin.end();
    const script = `for d in /proc/[0-9]*; do grep -qsxz "${MARKER}=$1" "$d/environ" 2>/dev/null && kill -9 "\${d#/proc/}" 2>/dev/null; done; exit 0`;
    await this.run(box, ["sh", "-c", script, "sh", c.id]).catch(() => undefined);
  }

  async #sh(box: ToolboxBox, script: string, args: string[], stdin?: Buffer): Promise<Buffer> {
    const r = await this.run(box, ["sh", "-c", script, "sh", ...args], { stdin });
    if (r.exitCode === 66) throw new HttpError(404, `no such file or directory: ${args[0]}`);
    if (r.exitCode === 67) throw new HttpError(400, `is a directory: ${args[0]}`);
    if (r.exitCode !== 0) throw new HttpError(400, r.stderr.toString().trim().slice(0, 500) || `failed (${r.exitCode})`);
    return r.stdout;
  }

  async #upload(box: ToolboxBox, req: IncomingMessage): Promise<Reply> {
    const paths = new Map<string, string>();
    const files = new Map<string, Buffer>();
    await new Promise<void>((resolve, reject) => {
      const bb = busboy({ headers: req.headers, limits: { fileSize: MAX_UPLOAD } });
      bb.on("field", (name, value) => {
        const m = /^files\[(\d+)\]\.path$/.exec(name);
        if (m) paths.set(m[1]!, value);
      });
      bb.on("file", (name, stream) => {
        const m = /^files\[(\d+)\]\.file$/.exec(name);
        const chunks: Buffer[] = [];
        stream.on("data", (c: Buffer) => chunks.push(c));
        stream.on("limit", () => reject(new HttpError(413, "file too large")));
        stream.on("end", () => m && files.set(m[1]!, Buffer.concat(chunks)));
      });
      bb.on("close", resolve);
      bb.on("error", reject);
      req.pipe(bb);
    });
    for (const [i, data] of files) {
      const dest = paths.get(i);
      if (!dest) throw new HttpError(400, `files[${i}].path is missing`);
      await this.#transferFaults("upload", this.abs(box, dest));
      // The daemon creates missing parents and writes the bytes as they came.
      await this.#sh(box, `mkdir -p -- "$(dirname -- "$1")" && [ ! -d "$1" ] || exit 67; cat > "$1"`, [this.abs(box, dest)], data);
    }
    return { status: 200, json: {} };
  }

  async #download(box: ToolboxBox, paths: string[]): Promise<Reply> {
    const boundary = `emu${randomUUID().replaceAll("-", "")}`;
    const parts: Buffer[] = [];
    for (const p of paths) {
      let data: Buffer;
      let name = "file";
      let type = "application/octet-stream";
      try {
        await this.#transferFaults("download", this.abs(box, p));
        data = await this.#sh(box, `[ -e "$1" ] || exit 66; [ -d "$1" ] && exit 67; exec cat -- "$1"`, [this.abs(box, p)]);
      } catch (e) {
        const he = e instanceof HttpError ? e : new HttpError(500, String(e));
        name = "error";
        type = "application/json";
        data = Buffer.from(JSON.stringify({ message: he.message, statusCode: he.status, code: he.status === 404 ? "FILE_NOT_FOUND" : "BAD_REQUEST" }));
      }
      parts.push(
        Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="${p.replaceAll('"', "%22")}"\r\nContent-Type: ${type}\r\n\r\n`),
        data,
        Buffer.from("\r\n"),
      );
    }
    parts.push(Buffer.from(`--${boundary}--\r\n`));
    return { status: 200, raw: Buffer.concat(parts), contentType: `multipart/form-data; boundary=${boundary}` };
  }

  async #list(box: ToolboxBox, p: string) {
    const out = await this.#sh(
      box,
      `[ -e "$1" ] || exit 66; [ -d "$1" ] || exit 68; exec find "$1" -mindepth 1 -maxdepth 1 -printf '%f\\t%y\\t%s\\t%m\\t%u\\t%g\\t%T@\\0'`,
      [p],
    );
    return out
      .toString()
      .split("\0")
      .filter(Boolean)
      .map((row) => fileInfo(row, p));
  }

  async #info(box: ToolboxBox, p: string) {
    const out = await this.#sh(box, `[ -e "$1" ] || exit 66; exec find "$1" -maxdepth 0 -printf '%f\\t%y\\t%s\\t%m\\t%u\\t%g\\t%T@\\0'`, [p]);
    return fileInfo(out.toString().split("\0")[0]!, path.posix.dirname(p));
  }
}

interface ExecuteBody {
  command: string;
  cwd?: string;
  envs?: Record<string, string>;
  timeout?: number;
}
interface SessionExecBody {
  command: string;
  runAsync?: boolean;
  async?: boolean;
}

function frame(stream: "stdout" | "stderr", data: Buffer): Buffer {
  return Buffer.concat([stream === "stdout" ? STDOUT_PREFIX : STDERR_PREFIX, data]);
}

function logsOf(cmd: SessionCommand) {
  const pick = (s?: "stdout" | "stderr") => Buffer.concat(cmd.log.filter((c) => !s || c.stream === s).map((c) => c.data)).toString("utf8");
  return { output: pick(), stdout: pick("stdout"), stderr: pick("stderr") };
}

function fileInfo(row: string, dir: string) {
  const [name = "", type, size, mode, owner, group, mtime] = row.split("\t");
  const modTime = new Date(Number(mtime) * 1000).toISOString();
  return {
    name,
    isDir: type === "d",
    size: Number(size),
    mode: mode ?? "",
    permissions: mode ?? "",
    owner: owner ?? "",
    group: group ?? "",
    modTime,
    modifiedAt: modTime,
    path: path.posix.join(dir, name),
  };
}

async function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new HttpError(408, "command execution timeout")), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
