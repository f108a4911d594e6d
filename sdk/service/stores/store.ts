import { randomBytes } from "node:crypto";
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
  /** Every user's sessions, or one user's when `userId` is given: the operator's (admin) view. */
  listAllSessions(options: ListOptions & { userId?: string | undefined }): Promise<{ sessions: SessionRecord[]; total: number }>;
  /** Whether one of the user's sessions uses this workspace (an explicit workspaceId must name one of theirs). */
  userHasWorkspace(userId: string, workspaceId: string): Promise<boolean>;
  /** Every workspace id some session still refers to (for `agentws gc`). */
  workspaceIds(): Promise<Set<string>>;
  /** The user a live (unrevoked, unexpired) token hash belongs to. */
  userForTokenHash(hash: string): Promise<string | undefined>;
  /** Stores a token by its hash (default scopes read+write, no expiry); answers its record (never the hash). */
  addTokenHash(userId: string, hash: string, options?: NewTokenOptions): Promise<TokenRecord>;
  /** The token with this hash, revoked or expired ones included (the caller decides). */
  tokenByHash(hash: string): Promise<TokenRecord | undefined>;
  getToken(tokenId: string): Promise<TokenRecord | undefined>;
  /** Live tokens (unrevoked, unexpired at `now`) of one user, or of every user, oldest first, at most `limit`. */
  listTokens(userId: string | undefined, now: number, limit: number): Promise<TokenRecord[]>;
  /** Marks a token revoked (only that user's when `userId` is given); false when there was no such live token. */
  revokeToken(tokenId: string, now: number, userId?: string): Promise<boolean>;
  /** Sets last_used_at = now unless it was set less than `everyMs` ago, so a hot token does not write on every request. */
  touchToken(tokenId: string, now: number, everyMs: number): Promise<void>;
  close(): Promise<void>;
}

export const SCOPES = ["read", "write", "admin"] as const;
/** `read`: GET and HEAD of your own sessions; `write`: every other call on them; `admin`: the /admin routes, over every user. */
export type Scope = (typeof SCOPES)[number];

/** An API token as stored, without its hash (which never leaves the store). Times are epoch milliseconds. */
export interface TokenRecord {
  /** Public and short (`tok_<16 hex>`): for listing and revoking, never a credential. */
  tokenId: string;
  userId: string;
  scopes: Scope[];
  name: string | null;
  createdAt: number;
  expiresAt: number | null;
  lastUsedAt: number | null;
  revokedAt: number | null;
}

export interface NewTokenOptions {
  scopes?: readonly Scope[] | undefined;
  name?: string | null | undefined;
  expiresAt?: number | null | undefined;
  /** Default: the store's clock. */
  now?: number | undefined;
}

/** Columns of a token row, hash excluded. */
export const TOKEN_COLUMNS = "token_id, user_id, scopes, name, created_at, expires_at, last_used_at, revoked_at";

export interface TokenRow {
  token_id: string;
  user_id: string;
  scopes: string;
  name: string | null;
  created_at: number | string;
  expires_at: number | string | null;
  last_used_at: number | string | null;
  revoked_at: number | string | null;
}

const num = (v: number | string | null): number | null => (v === null ? null : Number(v));

export function tokenFromRow(r: TokenRow): TokenRecord {
  return {
    tokenId: r.token_id,
    userId: r.user_id,
    // Unknown words (a hand-edited row) grant nothing.
    scopes: SCOPES.filter((s) => r.scopes.split(",").includes(s)),
    name: r.name,
    createdAt: Number(r.created_at),
    expiresAt: num(r.expires_at),
    lastUsedAt: num(r.last_used_at),
    revokedAt: num(r.revoked_at),
  };
}

/** A new token's row values, in the order token_id, token_hash, user_id, scopes, name, created_at, expires_at. */
export function newTokenRow(userId: string, hash: string, o: NewTokenOptions = {}): { record: TokenRecord; values: unknown[] } {
  const record: TokenRecord = {
    tokenId: `tok_${randomBytes(8).toString("hex")}`,
    userId,
    scopes: SCOPES.filter((s) => (o.scopes ?? ["read", "write"]).includes(s)),
    name: o.name ?? null,
    createdAt: o.now ?? Date.now(),
    expiresAt: o.expiresAt ?? null,
    lastUsedAt: null,
    revokedAt: null,
  };
  return { record, values: [record.tokenId, hash, userId, record.scopes.join(","), record.name, record.createdAt, record.expiresAt] };
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
