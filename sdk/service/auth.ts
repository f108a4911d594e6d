import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { z } from "zod";
import { InvalidArgumentError, UnauthenticatedError, fromZodError } from "../errors.js";
import { checkEdgeId } from "../util/identity-id.js";
import type { SessionStore } from "./stores/store.js";

/** Maps a bearer token to its user; undefined when the token is unknown. */
export interface TokenAuth {
  authenticate(token: string): Promise<string | undefined>;
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

const TokenFileSchema = z.strictObject({
  /** user id → token hashes (`sha256:<hex>`); plain tokens are refused so none sits on disk. */
  users: z.record(z.string(), z.array(z.string().regex(HASH, "must be a token hash 'sha256:<64 hex>' (run `agentws token` to make one), never a plain token"))),
});

/** Tokens from a JSON file `{ "users": { "<userId>": ["sha256:<hex>", ...] } }`, read once. */
export function tokenFileAuth(file: string): TokenAuth {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8").slice(0, 16 * 1024 * 1024));
  } catch (e) {
    throw new InvalidArgumentError("tokens", `cannot read the token file ${file}: ${e instanceof Error ? e.message : String(e)}`);
  }
  const r = TokenFileSchema.safeParse(parsed);
  if (!r.success) throw fromZodError("tokens", r.error);
  return hashedTokenAuth(r.data.users);
}

/** Tokens given as hashes per user, in memory. A hash listed for two users is refused: it could map to either. */
export function hashedTokenAuth(users: Record<string, string[]>): TokenAuth {
  const byHash = new Map<string, string>();
  for (const [userId, hashes] of Object.entries(users)) {
    checkEdgeId(userId, "userId");
    for (const h of hashes) {
      if (!HASH.test(h)) throw new InvalidArgumentError(`tokens.users.${userId}`, "must hold token hashes 'sha256:<64 hex>'");
      if (byHash.has(h) && byHash.get(h) !== userId) throw new InvalidArgumentError(`tokens.users.${userId}`, "a token hash is listed for two users");
      byHash.set(h, userId);
    }
  }
  return { authenticate: async (token) => byHash.get(hashToken(token)) };
}

/** Tokens kept (hashed) in the session store. */
export function storeTokenAuth(store: SessionStore): TokenAuth {
  return { authenticate: (token) => store.userForTokenHash(hashToken(token)) };
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

/** The user behind an `Authorization: Bearer <token>` header; 401 otherwise. */
export async function userFromHeader(auth: TokenAuth, header: string | undefined): Promise<string> {
  if (header === undefined || header === "") throw new UnauthenticatedError("an 'Authorization: Bearer <token>' header is required");
  const m = /^Bearer ([\x21-\x7e]{1,512})$/i.exec(header);
  if (!m) throw new UnauthenticatedError("the Authorization header must be 'Bearer <token>'");
  const user = await auth.authenticate(m[1]!);
  if (user === undefined) throw new UnauthenticatedError("unknown or revoked bearer token");
  return user;
}
