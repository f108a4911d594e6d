import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { SandboxProcess } from "../sandbox.js";

const STDERR_TAIL_BYTES = 4096;

/**
 * MCP client transport over any spawned sandbox process: newline-delimited JSON on its
 * stdin/stdout, exactly the stdio framing, so a stdio MCP server runs wherever `Sandbox.spawn` does.
 * The process is started lazily in `start()` (called by `Client.connect`).
 */
export class SandboxProcessTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  readonly #spawn: () => SandboxProcess;
  readonly #closeGraceMs: number;
  readonly #buffer = new ReadBuffer();
  #process: SandboxProcess | undefined;
  #closed = false;
  #exitCode: number | null | undefined;
  #stderrTail = Buffer.alloc(0);
  #stderrTruncated = false;

  constructor(spawn: () => SandboxProcess, options: { closeGraceMs?: number } = {}) {
    this.#spawn = spawn;
    this.#closeGraceMs = options.closeGraceMs ?? 2000;
  }

  /** Whether the process is gone or the transport was closed. */
  get closed(): boolean {
    return this.#closed;
  }
  /** Exit code once the process has exited (null when killed by a signal); undefined while running. */
  get exitCode(): number | null | undefined {
    return this.#exitCode;
  }
  /** The last few KiB the server wrote to stderr, for error messages. */
  get stderrTail(): string {
    return this.#stderrTail.toString("utf8");
  }
  /** Whether older stderr was dropped, so the tail may begin in the middle of something. */
  get stderrTruncated(): boolean {
    return this.#stderrTruncated;
  }

  async start(): Promise<void> {
    // eslint-disable-next-line no-restricted-syntax -- the MCP SDK's Transport contract; mapMcpError wraps it with the server's name
    if (this.#process) throw new Error("SandboxProcessTransport already started");
    const proc = this.#spawn();
    this.#process = proc;
    proc.stdout.on("data", (chunk: Buffer) => {
      try {
        this.#buffer.append(chunk);
      } catch (e) {
        // Oversized line: the stream is no longer framed; give up on this server.
        this.onerror?.(e as Error);
        void this.close();
        return;
      }
      for (;;) {
        let message: JSONRPCMessage | null;
        try {
          message = this.#buffer.readMessage();
        } catch (e) {
          // A non-JSON line (e.g. a stray log on stdout) is reported and skipped.
          this.onerror?.(e as Error);
          continue;
        }
        if (message === null) break;
        this.onmessage?.(message);
      }
    });
    // Always drain stderr, or a chatty server blocks on a full pipe.
    proc.stderr.on("data", (chunk: Buffer) => {
      const joined = Buffer.concat([this.#stderrTail, chunk]);
      if (joined.length > STDERR_TAIL_BYTES) this.#stderrTruncated = true;
      this.#stderrTail = joined.length > STDERR_TAIL_BYTES ? joined.subarray(joined.length - STDERR_TAIL_BYTES) : joined;
    });
    for (const stream of [proc.stdin, proc.stdout, proc.stderr]) stream.on("error", () => undefined);
    // 'exit' can come before the pipes drain: give stdout/stderr a moment so the last messages and
    // the stderr tail (the crash reason) are not lost.
    const drained = Promise.all(
      [proc.stdout, proc.stderr].map(
        (s) =>
          new Promise<void>((resolve) => {
            if (s.readableEnded || s.destroyed) return resolve();
            s.once("end", resolve);
            s.once("close", resolve);
          }),
      ),
    );
    void proc.exited.then(
      async (code) => {
        if (this.#exitCode === undefined) this.#exitCode = code;
        await Promise.race([drained, delay(250)]);
        this.#markClosed();
      },
      () => {
        if (this.#exitCode === undefined) this.#exitCode = null;
        this.#markClosed();
      },
    );
  }

  async send(message: JSONRPCMessage): Promise<void> {
    const proc = this.#process;
    // eslint-disable-next-line no-restricted-syntax -- the MCP SDK's Transport contract; mapMcpError wraps it with the server's name
    if (!proc || this.#closed) throw new Error("MCP server process is not running");
    // Resolve as soon as the stream takes the line (as the SDK's stdio transport does); write
    // errors surface through the stream's error event and the process exit.
    if (!proc.stdin.write(serializeMessage(message))) await new Promise<void>((resolve) => proc.stdin.once("drain", resolve));
  }

  /** Ends stdin, waits briefly for a clean exit, then kills. */
  async close(): Promise<void> {
    const proc = this.#process;
    if (!proc || this.#exitCode !== undefined) {
      this.#markClosed();
      return;
    }
    try {
      proc.stdin.end();
    } catch {
      // already gone
    }
    const exited = await Promise.race([proc.exited.then(() => true), delay(this.#closeGraceMs).then(() => false)]);
    if (!exited) {
      proc.kill();
      await Promise.race([proc.exited, delay(this.#closeGraceMs)]);
    }
    if (this.#exitCode === undefined) this.#exitCode = null;
    this.#markClosed();
  }

  /** Kills the process without a grace period (after a failed start or a timeout). */
  async terminate(): Promise<void> {
    const proc = this.#process;
    if (proc && this.#exitCode === undefined) {
      proc.kill();
      await Promise.race([proc.exited, delay(this.#closeGraceMs)]);
    }
    if (this.#exitCode === undefined) this.#exitCode = null;
    this.#markClosed();
  }

  #markClosed(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#buffer.clear();
    this.onclose?.();
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
