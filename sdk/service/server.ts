import type { AddressInfo } from "node:net";
import type { IncomingMessage, Server } from "node:http";
import { serve } from "@hono/node-server";
import type { Hono } from "hono";
import { InvalidArgumentError } from "../errors.js";
import { silentLogger, type Logger } from "../logger.js";

export interface StartServiceOptions {
  app: Hono<never> | { fetch: (req: Request) => Response | Promise<Response> };
  port?: number;
  /** Default 127.0.0.1: the service is reachable from this machine only unless asked otherwise. */
  hostname?: string;
  logger?: Logger;
  /** Runs after the last in-flight request, e.g. disposing the manager (closes every workspace) and the store. */
  onClose?: () => Promise<void>;
  /** How long shutdown waits for in-flight requests before cutting connections. Default 30 s. */
  drainTimeoutMs?: number;
  /** How long and how slowly clients may hold connections, and how many. */
  connections?: Partial<ConnectionLimits>;
}

/**
 * Slow and idle clients. A whole-request deadline would cut an honest large upload on a slow
 * link, so request bodies have a minimum rate instead, measured only while the service is
 * reading (an upload waiting for its turn, or paused because the disk is behind, is not cut).
 */
export interface ConnectionLimits {
  /** Time a client has to send a request's headers. Default 20 s. */
  headersTimeoutMs: number;
  /** Idle time a kept-alive connection is held between requests. Default 65 s: longer than load balancers' 60 s, so they never reuse a socket just as it is closed. */
  keepAliveTimeoutMs: number;
  /** A request body arriving slower than this while read (bytes per second, over each bodyRateWindowMs) is cut off. 0 turns it off. Default 16 KiB/s. */
  minBodyBytesPerSecond: number;
  /** The window of minBodyBytesPerSecond. Default 10 s. */
  bodyRateWindowMs: number;
  /** A deadline for a whole request (headers and body), in ms; 0 means none (the body rate governs). Default 0. */
  requestTimeoutMs: number;
  /** Open connections at most; more are closed as they arrive. Default 1024. */
  maxConnections: number;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  headersTimeoutMs: 20_000,
  keepAliveTimeoutMs: 65_000,
  minBodyBytesPerSecond: 16 * 1024,
  bodyRateWindowMs: 10_000,
  requestTimeoutMs: 0,
  maxConnections: 1024,
};

export interface RunningService {
  url: string;
  port: number;
  /** Graceful shutdown: stop accepting, finish in-flight requests, then onClose. Idempotent. */
  close(): Promise<void>;
  /** Requests being answered now. */
  readonly inFlight: number;
}

/** Listens with @hono/node-server and tracks in-flight requests for a graceful shutdown. */
export async function startService(options: StartServiceOptions): Promise<RunningService> {
  const logger = options.logger ?? silentLogger;
  const limits = connectionLimits(options.connections);
  const bodies = new BodyRate(limits, logger);
  let inFlight = 0;
  let idle: (() => void) | undefined;
  const app = options.app as { fetch: (req: Request, env?: unknown) => Response | Promise<Response> };
  const fetch = async (req: Request, env: unknown) => {
    inFlight++;
    const incoming = (env as { incoming?: IncomingMessage } | undefined)?.incoming;
    if (incoming) bodies.watch(incoming);
    try {
      return await app.fetch(req, env);
    } finally {
      if (incoming) bodies.unwatch(incoming);
      if (--inFlight === 0) idle?.();
    }
  };
  const server = await new Promise<Server>((ok, fail) => {
    const serverOptions = {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      // Node checks the two timeouts above only this often (30 s by default).
      connectionsCheckingInterval: Math.max(50, Math.min(5000, Math.floor(limits.headersTimeoutMs / 4))),
    };
    const s = serve({ fetch, port: options.port ?? 0, hostname: options.hostname ?? "127.0.0.1", serverOptions }, () => ok(s as Server));
    (s as Server).once("error", fail);
  });
  server.maxConnections = limits.maxConnections;
  server.on("close", () => bodies.stop());
  const port = (server.address() as AddressInfo).port;
  const host = options.hostname ?? "127.0.0.1";
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    port,
    get inFlight() {
      return inFlight;
    },
    close: () =>
      (closing ??= (async () => {
        logger.info("shutting down: no new connections, finishing in-flight requests", { inFlight });
        const closed = new Promise<void>((ok) => server.close(() => ok()));
        server.closeIdleConnections();
        if (inFlight > 0) {
          const drained = new Promise<void>((ok) => (idle = ok));
          const timer = setTimeout(() => server.closeAllConnections(), options.drainTimeoutMs ?? 30_000);
          await drained;
          clearTimeout(timer);
        }
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 1000).unref();
        await closed;
        await options.onClose?.();
        logger.info("shut down");
      })()),
  };
}

function connectionLimits(given: Partial<ConnectionLimits> = {}): ConnectionLimits {
  const limits = { ...DEFAULT_CONNECTION_LIMITS, ...Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) };
  for (const [key, value] of Object.entries(limits)) {
    const positive = key === "headersTimeoutMs" || key === "bodyRateWindowMs" || key === "maxConnections";
    if (!Number.isSafeInteger(value) || value < (positive ? 1 : 0))
      throw new InvalidArgumentError(`must be ${positive ? "a positive" : "a non-negative"} integer`, { field: `connections.${key}` });
  }
  if (limits.requestTimeoutMs > 0 && limits.requestTimeoutMs < limits.headersTimeoutMs)
    throw new InvalidArgumentError("must be 0 or at least headersTimeoutMs", { field: "connections.requestTimeoutMs" });
  return limits;
}

/**
 * The minimum body rate. Each window, a request whose body is still arriving and which the service
 * read all window long (flowing, nothing left unread, no pause) must have brought
 * minBodyBytesPerSecond × window bytes; otherwise its connection is closed.
 */
class BodyRate {
  readonly #watched = new Map<IncomingMessage, { read: number; reading: boolean; paused: boolean; onPause: () => void }>();
  readonly #timer: NodeJS.Timeout | undefined;
  constructor(
    private readonly limits: ConnectionLimits,
    private readonly logger: Logger,
  ) {
    if (limits.minBodyBytesPerSecond > 0) this.#timer = setInterval(() => this.#check(), limits.bodyRateWindowMs).unref();
  }
  watch(incoming: IncomingMessage): void {
    if (!this.#timer || incoming.complete) return;
    const w = { read: incoming.socket.bytesRead, reading: false, paused: false, onPause: () => (w.paused = true) };
    incoming.on("pause", w.onPause);
    this.#watched.set(incoming, w);
  }
  unwatch(incoming: IncomingMessage): void {
    const w = this.#watched.get(incoming);
    if (w) incoming.off("pause", w.onPause);
    this.#watched.delete(incoming);
  }
  stop(): void {
    clearInterval(this.#timer);
  }
  #check(): void {
    const min = (this.limits.minBodyBytesPerSecond * this.limits.bodyRateWindowMs) / 1000;
    for (const [incoming, w] of this.#watched) {
      if (incoming.complete || incoming.destroyed) {
        this.unwatch(incoming);
        continue;
      }
      const read = incoming.socket.bytesRead;
      const reading = incoming.readableFlowing === true && incoming.readableLength === 0;
      if (w.reading && reading && !w.paused && read - w.read < min) {
        this.logger.warn("request body too slow: connection closed", {
          bytes: read - w.read,
          windowMs: this.limits.bodyRateWindowMs,
          minBytesPerSecond: this.limits.minBodyBytesPerSecond,
        });
        this.unwatch(incoming);
        incoming.socket.destroy();
        continue;
      }
      Object.assign(w, { read, reading, paused: false });
    }
  }
}
