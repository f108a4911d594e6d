import type { Context } from "hono";
import { NotFoundError } from "../errors.js";
import type { Logger } from "../logger.js";
import { toWorkspacePath } from "../paths.js";
import type { WorkspaceManager } from "../manager/manager.js";
import type { Workspace } from "../workspace/workspace.js";
import type { Principal, TokenAuth } from "./auth.js";
import type { DownloadTokens } from "./download-tokens.js";
import type { ServiceQuotas } from "./limits.js";
import type { ServiceMetrics } from "./metrics.js";
import type { SessionRecord, SessionStore } from "./stores/store.js";

/** Hono variables set by the service's middleware. */
export interface ServiceEnv {
  /** `userId` is `principal.userId`; `principal` also carries the token's scopes and id. */
  Variables: { userId: string; requestId: string; principal: Principal };
}

export interface ServiceLimits {
  /** JSON request bodies. Default 1 MiB. */
  maxJsonBytes: number;
  /** A skill upload request, all parts together. Default 500 MiB (the reference's total). */
  maxUploadBytes: number;
  /** One file of a folder upload. Default 50 MiB. */
  maxUploadFileBytes: number;
  /** Files in a folder upload. Default 100. */
  maxUploadFiles: number;
  /** Skill installs running at once; more wait. Default 5. */
  maxConcurrentInstalls: number;
  /** Skill uploads whose bodies are read (streamed to disk) at once; more wait unread. Default 4. */
  maxConcurrentUploads: number;
  /** A whole file read through GET .../files, and each Range of a bigger one. Default 64 MiB. */
  maxReadBytes: number;
  /** Entries a directory listing returns. Default 10 000. */
  maxListEntries: number;
  /** How long the MCP endpoint's tools/list waits for one MCP server before listing it as unavailable. Default 20 s. */
  mcpListTimeoutMs: number;
  // Quotas and rate limits (sdk/service/limits.ts): each refusal is a 429 with Retry-After; 0 turns one off.
  /** Requests per second of one user, sustained (token bucket refill, per replica). Default 100. */
  userRequestsPerSecond: number;
  /** Requests one user may send at once above the rate (bucket size). Default 200. */
  userRequestBurst: number;
  /** Requests per second of all users together, per replica. Default 2000. */
  globalRequestsPerSecond: number;
  /** Bucket size of the global rate. Default 4000. */
  globalRequestBurst: number;
  /** Sessions one user may have stored (counted in the store: shared by replicas). Default 1000. */
  maxSessionsPerUser: number;
  /** Workspaces one user may have open in this replica's manager. Default 20. */
  maxLiveWorkspacesPerUser: number;
  /** Workspaces open in this replica's manager, all users together. Default 200. */
  maxLiveWorkspaces: number;
}

export const DEFAULT_LIMITS: ServiceLimits = {
  maxJsonBytes: 1024 * 1024,
  maxUploadBytes: 500 * 1024 * 1024,
  maxUploadFileBytes: 50 * 1024 * 1024,
  maxUploadFiles: 100,
  maxConcurrentInstalls: 5,
  maxConcurrentUploads: 4,
  maxReadBytes: 64 * 1024 * 1024,
  maxListEntries: 10_000,
  mcpListTimeoutMs: 20_000,
  userRequestsPerSecond: 100,
  userRequestBurst: 200,
  globalRequestsPerSecond: 2000,
  globalRequestBurst: 4000,
  maxSessionsPerUser: 1000,
  maxLiveWorkspacesPerUser: 20,
  maxLiveWorkspaces: 200,
};

/** Everything a route needs. */
export interface ServiceContext {
  manager: WorkspaceManager<Workspace>;
  store: SessionStore;
  auth: TokenAuth;
  downloads: DownloadTokens;
  metrics: ServiceMetrics;
  logger: Logger;
  limits: ServiceLimits;
  /** Skill installs: a counting semaphore. */
  installs: Semaphore;
  quotas: ServiceQuotas;
}

/** The caller's session; another user's session is simply not found. */
export async function sessionOf(svc: ServiceContext, userId: string, sessionId: string): Promise<SessionRecord> {
  const record = await svc.store.getSession(userId, sessionId);
  if (!record) throw new NotFoundError(`session '${sessionId}'`, { field: "sessionId" });
  return record;
}

/** The session's workspace, through the manager (its owner check included). */
export async function workspaceOf(svc: ServiceContext, record: SessionRecord): Promise<Workspace> {
  svc.metrics.lookups.inc();
  const get = () => svc.manager.getWorkspace(record.userId, record.agentId, record.sessionId, record.workspaceId);
  // Open already: served from the cache, never refused by a live-workspace limit.
  if (svc.manager.peek(record.workspaceId) !== undefined) {
    svc.metrics.cacheHits.inc();
    return get();
  }
  return svc.quotas.openWorkspace(record.userId, record.workspaceId, get);
}

/** The caller's session and its workspace, from the `sessionId` path parameter. */
export async function resolve(svc: ServiceContext, c: Context<ServiceEnv>): Promise<{ record: SessionRecord; ws: Workspace }> {
  const record = await sessionOf(svc, c.get("userId"), c.req.param("sessionId") ?? "");
  return { record, ws: await workspaceOf(svc, record) };
}

/** A path the workspace answered with (absolute under its workdir) as HTTP shows it: workspace-relative, never a host path. */
export function workspacePath(ws: Workspace, agentPath: string): string {
  return toWorkspacePath(ws.workdir, agentPath);
}

export function sessionView(r: SessionRecord) {
  return {
    sessionId: r.sessionId,
    agentId: r.agentId,
    workspaceId: r.workspaceId,
    name: r.name,
    cwd: r.cwd,
    createdAt: new Date(r.createdAt).toISOString(),
    updatedAt: new Date(r.updatedAt).toISOString(),
  };
}

export class Semaphore {
  #free: number;
  readonly #waiting: Array<() => void> = [];
  constructor(size: number) {
    this.#free = size;
  }
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((r) => this.#waiting.push(r));
    try {
      return await fn();
    } finally {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#free++;
    }
  }
}
