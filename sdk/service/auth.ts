import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { z } from "zod";
import { ForbiddenError, InvalidArgumentError, UnauthenticatedError, fromZodError } from "../errors.js";
import { checkEdgeId } from "../util/identity-id.js";
import { SCOPES, type Scope, type SessionStore } from "./stores/store.js";

/** Who is calling: set on every authenticated request (Hono variable `principal`). */
export interface Principal {
  userId: string;
  scopes: readonly Scope[];
  /** The store token's public id; undefined for token-file tokens and signed download links. */
  tokenId?: string | undefined;
}

/**
 * Maps a bearer token to its principal; undefined when the token is unknown or revoked (it may
 * throw UnauthenticatedError to say why, e.g. expired). A plain user id means scopes read+write.
 */
export interface TokenAuth {
  authenticate(token: string): Promise<Principal | string | undefined>;
}

/** What a token gets when nothing says otherwise: its user's own sessions, read and write; never admin. */
export const DEFAULT_SCOPES: readonly Scope[] = ["read", "write"];

/** How often a token's last_used_at is written at most: a hot token does not write on every request. */
export const TOUCH_EVERY_MS = 60_000;

const ScopeSchema = z.enum(SCOPES);

/** A token's name: shown in listings and terminals, so 1-128 characters and no control characters. */
// eslint-disable-next-line no-control-regex -- control characters are what it refuses
export const TOKEN_NAME = /^[^\x00-\x1f\x7f]{1,128}$/;

/** `read,write` → the scopes, each known; 400 naming `field` otherwise. */
export function parseScopes(text: string, field = "scopes"): Scope[] {
  const words = text
    .split(",")
    .map((w) => w.trim())
    .filter(Boolean);
  if (words.length === 0) throw new InvalidArgumentError(`must list scopes among ${SCOPES.join(", ")}`, { field });
  for (const w of words) if (!ScopeSchema.safeParse(w).success) throw new InvalidArgumentError(`has an unknown scope (known: ${SCOPES.join(", ")})`, { field });
  return SCOPES.filter((s) => words.includes(s));
}

/** A 403 for a token without the scope a route needs; the answer's WWW-Authenticate names it too. */
export class ScopeError extends ForbiddenError {
  constructor(
    readonly scope: Scope,
    what: string,
    has: readonly Scope[],
  ) {
    super(`${what} needs a token with the '${scope}' scope; this token has ${has.length ? has.join(", ") : "no scopes"}`);
  }
}

/**
 * The scope a request needs, decided in one place: /admin routes need `admin`; reads (GET, HEAD)
 * need `read`; everything else changes something and needs `write`, except minting a download
 * link, which only grants a read.
 */
export function requiredScope(method: string, path: string): Scope {
  if (path === "/admin" || path.startsWith("/admin/")) return "admin";
  if (method === "GET" || method === "HEAD") return "read";
  if (method === "POST" && /^\/sessions\/[^/]+\/workspace\/files\/download-token$/.test(path)) return "read";
  return "write";
}

/** 403 unless the principal holds the scope the request needs. */
export function checkScope(principal: Principal, method: string, path: string): void {
  const need = requiredScope(method, path);
  if (!principal.scopes.includes(need)) throw new ScopeError(need, need === "admin" ? "this operator route" : `a ${method}`, principal.scopes);
}

const HASH = /^sha256:[0-9a-f]{64}$/;

/** How a token is kept at rest: `sha256:<hex>`. Tokens are 32 random bytes, so a plain hash is enough (no dictionary to try). */
export function hashToken(token: string): string {
  return `sha256:${createHash("sha256").update(token, "utf8").digest("hex")}`;
}

/** A fresh token (shown once) and its hash (the only thing stored). */
export function newToken(): { token: string; hash: string } {
  const token = `aws_${randomBytes(32).toString("base64url")}`;
  return { token, hash: hashToken(token) };
}

const HashSchema = z.string().regex(HASH, "must be a token hash 'sha256:<64 hex>' (run `agentws token` to make one), never a plain token");

/** A token file's entry: a hash (scopes read+write), or a hash with its scopes. */
export type TokenFileEntry = string | { hash: string; scopes: Scope[] };

const TokenFileSchema = z.strictObject({
  /** user id → token hashes (`sha256:<hex>`); plain tokens are refused so none sits on disk. */
  users: z.record(z.string(), z.array(z.union([HashSchema, z.strictObject({ hash: HashSchema, scopes: z.array(ScopeSchema).min(1) })]))),
});

/**
 * Tokens from a JSON file, read once: `{ "users": { "<userId>": ["sha256:<hex>", ...] } }`; an
 * entry `{ "hash": "sha256:<hex>", "scopes": ["read", "write", "admin"] }` sets its scopes.
 * They do not expire and are revoked by editing the file (and restarting).
 */
export function tokenFileAuth(file: string): TokenAuth {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8").slice(0, 16 * 1024 * 1024));
  } catch (e) {
    throw new InvalidArgumentError(`cannot read the token file ${file}: ${e instanceof Error ? e.message : String(e)}`, { field: "tokens" });
  }
  const r = TokenFileSchema.safeParse(parsed);
  if (!r.success) throw fromZodError("tokens", r.error);
  return hashedTokenAuth(r.data.users);
}

/** Tokens given as hashes per user, in memory. A hash listed for two users is refused: it could map to either. */
export function hashedTokenAuth(users: Record<string, TokenFileEntry[]>): TokenAuth {
  const byHash = new Map<string, Principal>();
  for (const [userId, entries] of Object.entries(users)) {
    checkEdgeId(userId, "userId");
    for (const entry of entries) {
      const { hash, scopes } = typeof entry === "string" ? { hash: entry, scopes: DEFAULT_SCOPES } : entry;
      if (!HASH.test(hash)) throw new InvalidArgumentError("must hold token hashes 'sha256:<64 hex>'", { field: "tokens.users" });
      if (!scopes.every((s) => ScopeSchema.safeParse(s).success))
        throw new InvalidArgumentError(`has an unknown scope (known: ${SCOPES.join(", ")})`, { field: "tokens.users" });
      const known = byHash.get(hash);
      if (known && known.userId !== userId) throw new InvalidArgumentError("a token hash is listed for two users", { field: "tokens.users" });
      byHash.set(hash, { userId, scopes: [...scopes] });
    }
  }
  return { authenticate: async (token) => byHash.get(hashToken(token)) };
}

/**
 * Tokens kept (hashed) in the session store, looked up on every request with no cache, so a
 * revocation holds on the very next request on every replica. last_used_at is written at most
 * once per `touchEveryMs` per token.
 */
export function storeTokenAuth(store: SessionStore, options: { touchEveryMs?: number } = {}): TokenAuth {
  const every = options.touchEveryMs ?? TOUCH_EVERY_MS;
  return {
    authenticate: async (token) => {
      const t = await store.tokenByHash(hashToken(token));
      if (!t || t.revokedAt !== null) return undefined;
      const now = Date.now();
      if (t.expiresAt !== null && t.expiresAt <= now) throw new UnauthenticatedError("the bearer token has expired");
      // Bookkeeping only: a failed write does not fail the request.
      if (t.lastUsedAt === null || now - t.lastUsedAt >= every) await store.touchToken(t.tokenId, now, every).catch(() => undefined);
      return { userId: t.userId, scopes: t.scopes, tokenId: t.tokenId };
    },
  };
}

/** Tries each in turn. */
export function anyTokenAuth(...auths: TokenAuth[]): TokenAuth {
  return {
    authenticate: async (token) => {
      for (const a of auths) {
        const user = await a.authenticate(token);
        if (user !== undefined) return user;
      }
      return undefined;
    },
  };
}

/** The principal behind an `Authorization: Bearer <token>` header; 401 otherwise. */
export async function principalFromHeader(auth: TokenAuth, header: string | undefined): Promise<Principal> {
  if (header === undefined || header === "") throw new UnauthenticatedError("an 'Authorization: Bearer <token>' header is required");
  const m = /^Bearer ([\x21-\x7e]{1,512})$/i.exec(header);
  if (!m) throw new UnauthenticatedError("the Authorization header must be 'Bearer <token>'");
  const found = await auth.authenticate(m[1]!);
  if (found === undefined) throw new UnauthenticatedError("unknown or revoked bearer token");
  return typeof found === "string" ? { userId: found, scopes: DEFAULT_SCOPES } : found;
}

/** Hono variables set by the service's middleware. */
export interface ServiceEnv {
  /** `userId` is `principal.userId`; `principal` also carries the token's scopes and id. */
  Variables: { userId: string; requestId: string; principal: Principal };
}
