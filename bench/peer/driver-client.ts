/**
 * A long-lived driver process spoken to over JSON lines (one request, one reply, matched by id).
 * Used for the reference (Python, reference_ops.py) and for our side (ours.ts --serve), so both
 * runtimes are measured the same way: each times its own operation; process start is never timed.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { execFile } from "node:child_process";
import { createInterface } from "node:readline";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

export const PEER_DIR = path.dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = path.resolve(PEER_DIR, "..", "..");

export interface Reply {
  id: number;
  ok: boolean;
  error?: string;
  trace?: string;
  [k: string]: unknown;
}

export class DriverClient {
  readonly #child: ChildProcess;
  readonly #pending = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();
  #next = 1;
  #stderr = "";
  #exited: Error | undefined;

  constructor(
    readonly label: string,
    command: string,
    args: string[],
  ) {
    this.#child = spawn(command, args, { cwd: REPO_ROOT, stdio: ["pipe", "pipe", "pipe"] });
    this.#child.stderr!.setEncoding("utf8");
    this.#child.stderr!.on("data", (d: string) => {
      this.#stderr = (this.#stderr + d).slice(-8000);
    });
    createInterface({ input: this.#child.stdout! }).on("line", (line) => {
      let reply: Reply;
      try {
        reply = JSON.parse(line) as Reply;
      } catch {
        this.#stderr += `\n[non-JSON stdout] ${line.slice(0, 200)}`;
        return;
      }
      const p = this.#pending.get(reply.id);
      if (!p) return;
      this.#pending.delete(reply.id);
      p.resolve(reply);
    });
    this.#child.on("exit", (code, signal) => {
      this.#exited = new Error(`${label} driver exited (code ${code}, signal ${signal}); stderr tail:\n${this.#stderr}`);
      for (const p of this.#pending.values()) p.reject(this.#exited);
      this.#pending.clear();
    });
    this.#child.on("error", (e) => {
      this.#exited = e;
      for (const p of this.#pending.values()) p.reject(e);
      this.#pending.clear();
    });
  }

  /** Sends one request; rejects when the driver reports an error or dies. */
  async request<T extends Reply = Reply>(req: Record<string, unknown>): Promise<T> {
    if (this.#exited) throw this.#exited;
    const id = this.#next++;
    const reply = await new Promise<Reply>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#child.stdin!.write(`${JSON.stringify({ ...req, id })}\n`);
    });
    if (!reply.ok) throw new Error(`${this.label}: ${reply.error}\n${reply.trace ?? ""}`);
    return reply as T;
  }

  get stderrTail(): string {
    return this.#stderr;
  }

  async close(): Promise<void> {
    if (this.#exited) return;
    const done = new Promise<void>((r) => this.#child.once("exit", () => r()));
    this.#child.stdin!.end();
    const t = setTimeout(() => this.#child.kill("SIGKILL"), 10_000);
    await done;
    clearTimeout(t);
  }
}

/** Creates (or reuses) the cached venv; returns its python, or throws with the script's output. */
export async function ensurePeerVenv(): Promise<string> {
  const script = path.join(REPO_ROOT, "scripts", "peer-venv.sh");
  const { stdout } = await promisify(execFile)("bash", [script], { maxBuffer: 16 * 1024 * 1024, timeout: 15 * 60_000 });
  const py = stdout.trim().split("\n").pop() ?? "";
  if (!py) throw new Error("scripts/peer-venv.sh printed no interpreter path");
  return py;
}

export function startReference(python: string): DriverClient {
  return new DriverClient("reference", python, ["-u", path.join(PEER_DIR, "reference_ops.py")]);
}

export function startOurs(): DriverClient {
  return new DriverClient("ours", process.execPath, ["--expose-gc", "--import", "tsx", path.join(PEER_DIR, "ours.ts"), "--serve"]);
}
