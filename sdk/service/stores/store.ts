import { RateLimitedError } from "../../errors.js";

/** A session as the service stores it: the workspace id is recorded once, at creation, and never changes. */
export interface SessionRecord {
  sessionId: string;
  userId: string;
  agentId: string;
  workspaceId: string;
  name: string;
  /** A viewing anchor inside the workspace (workspace-relative), or null for the root. */
  cwd: string | null;
  /** Epoch milliseconds. */
  createdAt: number;
  updatedAt: number;
}

export interface SessionPatch {
  name?: string | undefined;
  cwd?: string | null | undefined;
}

export interface CreateOptions {
  /** Sessions a user may have in the store; unset means no limit. */
  maxPerUser?: number | undefined;
}

/** Retry-After of a quota refusal: room comes back when the caller deletes sessions (or idle workspaces are evicted), at a time nobody can tell. */
export const QUOTA_RETRY_AFTER_MS = 60_000;

/** The refusal of a session over the per-user quota: a 429 with Retry-After. */
export function sessionQuotaError(max: number): RateLimitedError {
  return new RateLimitedError(`the quota of ${max} sessions per user is reached: delete sessions to create more`, {
    retryAfterMs: QUOTA_RETRY_AFTER_MS,
    details: { limit: "sessions_per_user", max },
  });
}

export interface ListOptions {
  agentId?: string | undefined;
  limit: number;
  offset: number;
}

/**
 * Where sessions and API tokens live. Every read and write of a session names its user: a
 * session of another user is simply not found, whatever id the caller sends. Tokens are kept as
 * SHA-256 hashes only.
 */
export interface SessionStore {
  /** "sqlite" or "postgres", for logs and metrics. */
  readonly kind: string;
  /**
   * Stores a new session. With `maxPerUser`, atomically with the insert: when the user already has
   * that many sessions nothing is stored and a RateLimitedError (sessionQuotaError) is thrown, so
   * concurrent creates on any number of replicas never pass the quota.
   */
  createSession(record: SessionRecord, options?: CreateOptions): Promise<void>;
  getSession(userId: string, sessionId: string): Promise<SessionRecord | undefined>;
  listSessions(userId: string, options: ListOptions): Promise<{ sessions: SessionRecord[]; total: number }>;
  updateSession(userId: string, sessionId: string, patch: SessionPatch, now: number): Promise<SessionRecord | undefined>;
  deleteSession(userId: string, sessionId: string): Promise<boolean>;
  /** Every workspace id some session still refers to (for `agentws gc`). */
  workspaceIds(): Promise<Set<string>>;
  /** The user a token hash belongs to. */
  userForTokenHash(hash: string): Promise<string | undefined>;
  addTokenHash(userId: string, hash: string): Promise<void>;
  close(): Promise<void>;
}

export const SESSION_COLUMNS = ["session_id", "user_id", "agent_id", "workspace_id", "name", "cwd", "created_at", "updated_at"] as const;

export interface SessionRow {
  session_id: string;
  user_id: string;
  agent_id: string;
  workspace_id: string;
  name: string;
  cwd: string | null;
  created_at: number | string;
  updated_at: number | string;
}

export function fromRow(r: SessionRow): SessionRecord {
  return {
    sessionId: r.session_id,
    userId: r.user_id,
    agentId: r.agent_id,
    workspaceId: r.workspace_id,
    name: r.name,
    cwd: r.cwd,
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

export function toRow(s: SessionRecord): unknown[] {
  return [s.sessionId, s.userId, s.agentId, s.workspaceId, s.name, s.cwd, s.createdAt, s.updatedAt];
}

/** The patched record, or the same one when the patch is empty. */
export function applyPatch(record: SessionRecord, patch: SessionPatch, now: number): SessionRecord {
  return {
    ...record,
    ...(patch.name !== undefined ? { name: patch.name } : {}),
    ...(patch.cwd !== undefined ? { cwd: patch.cwd } : {}),
    updatedAt: now,
  };
}
