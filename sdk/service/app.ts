import { randomUUID } from "node:crypto";
import { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import { InvalidArgumentError, TooLargeError, WorkspaceError, fromZodError } from "../errors.js";
import { retryAfterHeader, toProblem } from "../errors-http.js";
import { silentLogger, type Logger } from "../logger.js";
import type { WorkspaceManager } from "../manager/manager.js";
import { checkRelativePath } from "../paths.js";
import type { Workspace } from "../workspace/workspace.js";
import { storeTokenAuth, userFromHeader, type TokenAuth } from "./auth.js";
import { DEFAULT_LIMITS, Semaphore, type ServiceContext, type ServiceEnv, type ServiceLimits } from "./context.js";
import { DownloadTokens } from "./download-tokens.js";
import { mcpEndpoint } from "./mcp-endpoint.js";
import { ServiceMetrics } from "./metrics.js";
import { fileRoutes } from "./routes/files.js";
import { mcpRoutes } from "./routes/mcp.js";
import { offloadRoutes } from "./routes/offload.js";
import { sessionRoutes } from "./routes/sessions.js";
import { skillRoutes } from "./routes/skills.js";
import { statusRoutes } from "./routes/status.js";
import type { SessionStore } from "./stores/store.js";

export interface CreateAppOptions {
  /** Resolves every route's workspace (isolation policy, owner checks, cache, TTL). */
  workspaceManager: WorkspaceManager<Workspace>;
  sessionStore: SessionStore;
  /** Bearer tokens → users. Default: the hashed tokens in the session store. */
  auth?: TokenAuth;
  /** HMAC secret of download tokens; set the same one on every replica. Default: random per process. */
  downloadSecret?: string;
  /** Seconds a download token lives. Default 60. */
  downloadTtlSeconds?: number;
  /** Backend kind label of the manager's workspaces in /metrics. Default "unknown" until a workspace reports its kind. */
  backend?: string;
  limits?: Partial<ServiceLimits>;
  logger?: Logger;
  /** Node process metrics in /metrics too. Default true. */
  processMetrics?: boolean;
}

export interface ServiceApp {
  app: OpenAPIHono<ServiceEnv>;
  metrics: ServiceMetrics;
  /** Stops following the manager's events. The caller owns (and closes) the manager and the store. */
  dispose(): void;
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * The agent service over a workspace manager: sessions (each records its workspace id once),
 * the session's workspace routes (MCP servers, skills, directories and files, status), one MCP
 * endpoint per session's workspace, bearer authentication, /openapi.json and /metrics. Errors are
 * application/problem+json bodies from the SDK's error family (sdk/errors-http.ts).
 */
export function createApp(options: CreateAppOptions): ServiceApp {
  const logger = options.logger ?? silentLogger;
  const metrics = new ServiceMetrics({ defaultMetrics: options.processMetrics ?? true });
  const limits: ServiceLimits = { ...DEFAULT_LIMITS, ...options.limits };
  const svc: ServiceContext = {
    manager: options.workspaceManager,
    store: options.sessionStore,
    auth: options.auth ?? storeTokenAuth(options.sessionStore),
    downloads: new DownloadTokens({ secret: options.downloadSecret, ttlSeconds: options.downloadTtlSeconds }),
    metrics,
    logger,
    limits,
    installs: new Semaphore(limits.maxConcurrentInstalls),
  };
  const unfollow = metrics.follow(options.workspaceManager, options.backend ?? "unknown");

  const app = new OpenAPIHono<ServiceEnv>({
    // Bad bodies, queries and params: a problem naming the field (body.agentId, query.limit, ...).
    defaultHook: (result, c) => {
      if (!result.success) return problem(c, fromZodError(result.target, result.error));
      return undefined;
    },
  });

  app.use("*", async (c, next) => {
    const given = c.req.header("x-request-id");
    const requestId = given && REQUEST_ID.test(given) ? given : randomUUID();
    c.set("requestId", requestId);
    const started = performance.now();
    await next();
    c.header("x-request-id", requestId);
    const ms = performance.now() - started;
    const route = c.req.routePath;
    metrics.requests.observe({ method: c.req.method, route, status: String(c.res.status) }, ms / 1000);
    // The path only: a download token travels in the query and never reaches a log.
    logger.info("request", { requestId, method: c.req.method, path: c.req.path, route, status: c.res.status, durationMs: Math.round(ms * 10) / 10, userId: c.get("userId") });
  });

  app.get("/healthz", (c) => c.json({ ok: true }));
  app.get("/metrics", async (c) => c.text(await metrics.text(), 200, { "content-type": metrics.registry.contentType }));

  // Authentication: a bearer token for everything under /sessions; a file download may carry a
  // signed token for exactly that session and path instead.
  app.use("/sessions/*", async (c, next) => {
    const token = c.req.query("token");
    if (token !== undefined && (c.req.method === "GET" || c.req.method === "HEAD") && /^\/sessions\/[^/]+\/workspace\/files$/.test(c.req.path) && c.req.header("authorization") === undefined) {
      const sessionId = c.req.path.split("/")[2]!;
      c.set("userId", svc.downloads.verify(token, sessionId, checkRelativePath(c.req.query("path") ?? "", "path")));
    } else c.set("userId", await userFromHeader(svc.auth, c.req.header("authorization")));
    await next();
  });

  // Request size: JSON bodies are small. A skill upload is streamed to disk by its route, which
  // counts it there (bodyLimit would buffer a chunked body whole).
  const tooLarge = (limit: number) => (c: Context<ServiceEnv>) => problem(c, new TooLargeError(`the request body is over the limit of ${limit} bytes`));
  app.use("/sessions/*", async (c, next) => {
    if (c.req.method === "POST" && c.req.path.endsWith("/workspace/skills")) return next();
    return bodyLimit({ maxSize: limits.maxJsonBytes, onError: tooLarge(limits.maxJsonBytes) })(c, next);
  });

  sessionRoutes(app, svc);
  mcpRoutes(app, svc);
  skillRoutes(app, svc);
  fileRoutes(app, svc);
  statusRoutes(app, svc);
  offloadRoutes(app, svc);
  mcpEndpoint(app, svc);

  app.openAPIRegistry.registerComponent("securitySchemes", "bearer", { type: "http", scheme: "bearer" });
  app.doc31("/openapi.json", {
    openapi: "3.1.0",
    info: { title: "agent-workspaces service", version: "0.1.0", description: "Sessions and their workspaces. Every route under /sessions needs `Authorization: Bearer <token>`; errors are application/problem+json." },
    security: [{ bearer: [] }],
  });

  app.notFound((c) => problem(c, new WorkspaceError("not_found", `no route ${c.req.method} ${c.req.path}`)));
  app.onError((e, c) => {
    if (e instanceof HTTPException) {
      // Hono's own refusals (a malformed JSON body, ...) keep their status, as a problem body.
      const error = e.status === 413 ? new TooLargeError(e.message || "request body too large") : new InvalidArgumentError("body", e.message || "malformed request");
      return problem(c, error, e.status);
    }
    if (!(e instanceof WorkspaceError)) logger.error("unexpected error", { requestId: c.get("requestId"), error: e instanceof Error ? (e.stack ?? e.message).slice(0, 4000) : String(e) });
    return problem(c, e);
  });

  function problem(c: Context<ServiceEnv>, e: unknown, status?: number): Response {
    const body = { ...toProblem(e), requestId: c.get("requestId") };
    if (status !== undefined) body.status = status;
    metrics.errors.inc({ code: body.title });
    const retry = retryAfterHeader(e);
    return new Response(JSON.stringify(body), {
      status: body.status,
      // A refused large body may still be arriving: the connection is not reused for another request.
      headers: { "content-type": "application/problem+json", ...(retry ? { "retry-after": retry } : {}), ...(body.status === 413 ? { connection: "close" } : {}) },
    });
  }

  return { app, metrics, dispose: unfollow };
}
