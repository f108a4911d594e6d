import { randomUUID } from "node:crypto";
import { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import { InvalidArgumentError, TooLargeError, WorkspaceError, fromZodError, NotFoundError } from "../errors.js";
import { retryAfterHeader, toProblem } from "../errors-http.js";
import { silentLogger, type Logger } from "../logger.js";
import type { WorkspaceManager } from "../manager/manager.js";
import { checkRelativePath } from "../paths.js";
import type { Workspace } from "../workspace/workspace.js";
import { ScopeError, checkScope, principalFromHeader, storeTokenAuth, type Principal, type TokenAuth } from "./auth.js";
import { DEFAULT_LIMITS, Semaphore, type ServiceContext, type ServiceEnv, type ServiceLimits } from "./context.js";
import { DownloadTokens } from "./download-tokens.js";
import { ServiceQuotas } from "./limits.js";
import { mcpEndpoint } from "./mcp-endpoint.js";
import { ServiceMetrics } from "./metrics.js";
import { adminRoutes } from "./routes/admin.js";
import { fileRoutes } from "./routes/files.js";
import { mcpRoutes } from "./routes/mcp.js";
import { offloadRoutes } from "./routes/offload.js";
import { DOCUMENT, describeUnroutedPaths } from "./routes/openapi-common.js";
import { sessionRoutes } from "./routes/sessions.js";
import { skillRoutes } from "./routes/skills.js";
import { statusRoutes } from "./routes/status.js";
import { tokenRoutes } from "./routes/tokens.js";
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
  /**
   * Host names (no port) the MCP endpoint answers besides loopback ones; `["*"]` allows any. Unset,
   * a request arriving on a loopback address must name a loopback host (DNS-rebinding protection).
   * Behind a reverse proxy on the same machine that forwards the public Host, list that name.
   */
  allowedHosts?: string[];
  /** Browser origins allowed on the MCP endpoint besides its own (a request without Origin is not a browser's). */
  allowedOrigins?: string[];
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
    quotas: new ServiceQuotas(limits, options.workspaceManager, options.sessionStore, (limit) => metrics.limitRefusals.inc({ limit })),
  };
  const unfollow = metrics.follow(options.workspaceManager, options.backend ?? "unknown");

  const app = new OpenAPIHono<ServiceEnv>({
    // Bad bodies, queries and params: a problem naming the field (json.agentId, query.limit, ...), never a key the caller chose.
    defaultHook: (result, c) => {
      if (!result.success) return problem(c, fromZodError(result.target, result.error, { nameKeysOnly: true }));
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
    logger.info("request", {
      requestId,
      method: c.req.method,
      path: c.req.path,
      route,
      status: c.res.status,
      durationMs: Math.round(ms * 10) / 10,
      userId: c.get("userId"),
    });
  });

  app.get("/healthz", (c) => c.json({ ok: true }));
  app.get("/metrics", async (c) => c.text(await metrics.text(), 200, { "content-type": metrics.registry.contentType }));

  // Authentication: a bearer token for everything under /sessions, /tokens and /admin; a file
  // download may carry a signed token for exactly that session and path instead (a read). Then
  // the scope the route needs, decided in one place (auth.ts requiredScope).
  const authenticate = async (c: Context<ServiceEnv>, next: () => Promise<void>) => {
    const token = c.req.query("token");
    let principal: Principal;
    if (
      token !== undefined &&
      (c.req.method === "GET" || c.req.method === "HEAD") &&
      /^\/sessions\/[^/]+\/workspace\/files$/.test(c.req.path) &&
      c.req.header("authorization") === undefined
    ) {
      const sessionId = c.req.path.split("/")[2]!;
      principal = { userId: svc.downloads.verify(token, sessionId, checkRelativePath(c.req.query("path") ?? "", "path")), scopes: ["read"] };
    } else principal = await principalFromHeader(svc.auth, c.req.header("authorization"));
    c.set("principal", principal);
    c.set("userId", principal.userId);
    checkScope(principal, c.req.method, c.req.path);
    await next();
  };
  for (const prefix of ["/sessions/*", "/tokens/*", "/admin/*"]) app.use(prefix, authenticate);
  // Request rate per user and in all, in memory (sdk/service/limits.ts): 429 with Retry-After.
  const rateLimit = svc.quotas.rateLimit();
  for (const prefix of ["/sessions/*", "/tokens/*", "/admin/*"]) app.use(prefix, rateLimit);

  // Request size: JSON bodies are small. A skill upload is streamed to disk by its route, which
  // counts it there (bodyLimit would buffer a chunked body whole).
  const tooLarge = (limit: number) => (c: Context<ServiceEnv>) => problem(c, new TooLargeError(`the request body is over the limit of ${limit} bytes`));
  app.use("/sessions/*", async (c, next) => {
    if (c.req.method === "POST" && c.req.path.endsWith("/workspace/skills")) return next();
    return bodyLimit({ maxSize: limits.maxJsonBytes, onError: tooLarge(limits.maxJsonBytes) })(c, next);
  });
  app.use("/tokens/*", bodyLimit({ maxSize: limits.maxJsonBytes, onError: tooLarge(limits.maxJsonBytes) }));

  sessionRoutes(app, svc);
  mcpRoutes(app, svc);
  skillRoutes(app, svc);
  fileRoutes(app, svc);
  statusRoutes(app, svc);
  offloadRoutes(app, svc);
  mcpEndpoint(app, svc, { allowedHosts: options.allowedHosts, allowedOrigins: options.allowedOrigins });
  tokenRoutes(app, svc);
  adminRoutes(app, svc);

  describeUnroutedPaths(app.openAPIRegistry);
  app.doc31("/openapi.json", DOCUMENT);

  app.notFound((c) => problem(c, new NotFoundError(`no route ${c.req.method} ${c.req.path}`)));
  app.onError((e, c) => {
    if (e instanceof HTTPException) {
      // Hono's own refusals (a malformed JSON body, ...) keep their status, as a problem body.
      const error =
        e.status === 413
          ? new TooLargeError(e.message || "request body too large")
          : new InvalidArgumentError(e.message || "malformed request", { field: "body" });
      return problem(c, error, e.status);
    }
    if (!(e instanceof WorkspaceError))
      logger.error("unexpected error", { requestId: c.get("requestId"), error: e instanceof Error ? (e.stack ?? e.message).slice(0, 4000) : String(e) });
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
      headers: {
        "content-type": "application/problem+json",
        ...(retry ? { "retry-after": retry } : {}),
        ...(body.status === 413 ? { connection: "close" } : {}),
        ...bearerChallenge(c, e, body.status),
      },
    });
  }

  return { app, metrics, dispose: unfollow };
}

/**
 * RFC 6750's WWW-Authenticate on a 401 (without it MCP clients such as the Inspector fall back to
 * OAuth discovery and give up) and on a 403 for a missing scope.
 */
function bearerChallenge(c: Context<ServiceEnv>, e: unknown, status: number): Record<string, string> {
  const realm = 'Bearer realm="agent-workspaces"';
  if (status === 401) return { "www-authenticate": c.req.header("authorization") === undefined ? realm : `${realm}, error="invalid_token"` };
  if (e instanceof ScopeError) return { "www-authenticate": `${realm}, error="insufficient_scope", scope="${e.scope}"` };
  return {};
}
