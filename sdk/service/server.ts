import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { serve } from "@hono/node-server";
import type { Hono } from "hono";
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
}

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
  let inFlight = 0;
  let idle: (() => void) | undefined;
  const app = options.app as { fetch: (req: Request, env?: unknown) => Response | Promise<Response> };
  const fetch = async (req: Request, env: unknown) => {
    inFlight++;
    try {
      return await app.fetch(req, env);
    } finally {
      if (--inFlight === 0) idle?.();
    }
  };
  const server = await new Promise<Server>((ok, fail) => {
    const s = serve({ fetch, port: options.port ?? 0, hostname: options.hostname ?? "127.0.0.1" }, () => ok(s as Server));
    (s as Server).once("error", fail);
  });
  // Long keep-alive: a client reusing a socket just as the server times it out gets ECONNRESET (a
  // race that shows under load). Shutdown closes idle sockets itself, so this never delays it.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
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
