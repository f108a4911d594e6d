import type { Context } from "hono";
import { NotFoundError } from "../errors.js";
import type { Logger } from "../logger.js";
import { toWorkspacePath } from "../paths.js";
import type { WorkspaceManager } from "../manager/manager.js";
import type { Workspace } from "../workspace/workspace.js";
import type { ServiceEnv, TokenAuth } from "./auth.js";
import type { DownloadTokens } from "./download-tokens.js";
import type { ServiceLimits, ServiceQuotas } from "./limits.js";
import type { ServiceMetrics } from "./metrics.js";
import type { SessionRecord, SessionStore } from "./stores/store.js";

export type { ServiceEnv } from "./auth.js";
export { DEFAULT_LIMITS, type ServiceLimits } from "./limits.js";

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
  if (!record) throw new NotFoundError(`session '${sessionId}' not found`, { field: "sessionId" });
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
