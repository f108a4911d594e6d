import type { Context } from "hono";
import { NotFoundError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { WorkspaceManager } from "../manager/manager.js";
import type { Workspace } from "../workspace/workspace.js";
import type { TokenAuth } from "./auth.js";
import type { DownloadTokens } from "./download-tokens.js";
import type { ServiceMetrics } from "./metrics.js";
import type { SessionRecord, SessionStore } from "./stores/store.js";

/** Hono variables set by the service's middleware. */
export interface ServiceEnv {
  Variables: { userId: string; requestId: string };
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
  return svc.manager.getWorkspace(record.userId, record.agentId, record.sessionId, record.workspaceId);
}

/** The caller's session and its workspace, from the `sessionId` path parameter. */
export async function resolve(svc: ServiceContext, c: Context<ServiceEnv>): Promise<{ record: SessionRecord; ws: Workspace }> {
  const record = await sessionOf(svc, c.get("userId"), c.req.param("sessionId") ?? "");
  return { record, ws: await workspaceOf(svc, record) };
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
