import { createRoute, z, type OpenAPIHono } from "@hono/zod-openapi";
import { ConflictError, ForbiddenError, InvalidArgumentError, NotFoundError } from "../../errors.js";
import { TOKEN_NAME, newToken } from "../auth.js";
import type { ServiceContext, ServiceEnv } from "../context.js";
import { Problem } from "../schemas.js";
import { SCOPES, type TokenRecord } from "../stores/store.js";
import { json } from "./common.js";

/** Live tokens a user may hold at once: minting is a write into the shared store. */
export const MAX_TOKENS_PER_USER = 100;
/** The longest expiry a minted token may ask for: ten years. */
const MAX_EXPIRY_SECONDS = 10 * 366 * 24 * 3600;

const problem = (description: string) => ({ description, content: { "application/problem+json": { schema: Problem } } });
export const TOKEN_PROBLEMS = {
  400: problem("Bad input (the field is named)"),
  401: problem("Missing, unknown, revoked or expired bearer token (with `WWW-Authenticate: Bearer`)"),
  403: problem("The token lacks the scope this call needs (named in the detail)"),
  404: problem("No such token of yours"),
};

export const TokenIdParams = z.object({
  tokenId: z
    .string()
    .regex(/^tok_[0-9a-f]{16}$/, "must be a token id 'tok_<16 hex>'")
    .openapi({ param: { name: "tokenId", in: "path" }, example: "tok_3f9a0c1e5b7d2a46" }),
});

const date = z.string().openapi({ format: "date-time" });

/** A token as listed: its public id and lifecycle, never its hash or secret. */
export const TokenView = z
  .object({
    tokenId: z.string(),
    userId: z.string(),
    name: z.string().nullable(),
    scopes: z.array(z.enum(SCOPES)),
    createdAt: date,
    expiresAt: date.nullable(),
    lastUsedAt: date.nullable().openapi({ description: "Updated at most once a minute." }),
  })
  .openapi("Token");

export const TokenList = z.object({ tokens: z.array(TokenView) }).openapi("TokenList");

const CreateTokenBody = z
  .strictObject({
    name: z.string().regex(TOKEN_NAME, "must be 1-128 characters, no control characters").optional(),
    scopes: z
      .array(z.enum(SCOPES))
      .min(1)
      .max(SCOPES.length)
      .optional()
      .openapi({ description: "A subset of the calling token's scopes; default all of them." }),
    expiresInSeconds: z
      .number()
      .int()
      .min(60)
      .max(MAX_EXPIRY_SECONDS)
      .optional()
      .openapi({ description: "Default: the calling token's own expiry (none if it has none); never later than it." }),
  })
  .openapi("CreateToken");

const CreatedToken = TokenView.extend({ token: z.string().openapi({ description: "The bearer token: shown this once, only its hash is kept." }) }).openapi(
  "CreatedToken",
);

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export function tokenView(t: TokenRecord) {
  return {
    tokenId: t.tokenId,
    userId: t.userId,
    name: t.name,
    scopes: t.scopes,
    createdAt: iso(t.createdAt)!,
    expiresAt: iso(t.expiresAt),
    lastUsedAt: iso(t.lastUsedAt),
  };
}

/**
 * The caller's own tokens: list the live ones, mint one (scopes within the caller's, expiry no later
 * than the caller's: a token about to expire cannot mint an eternal one), revoke one. An admin
 * token may revoke anyone's.
 */
export function tokenRoutes(app: OpenAPIHono<ServiceEnv>, svc: ServiceContext): void {
  app.openapi(
    createRoute({
      method: "get",
      path: "/tokens",
      operationId: "listTokens",
      tags: ["tokens"],
      summary: "Your live tokens (unrevoked, unexpired), oldest first",
      responses: { 200: json(TokenList, "Tokens"), ...TOKEN_PROBLEMS },
    }),
    // The principal, never a missing userId: undefined would list every user's tokens.
    async (c) => c.json({ tokens: (await svc.store.listTokens(c.get("principal").userId, Date.now(), MAX_TOKENS_PER_USER)).map(tokenView) }, 200),
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/tokens",
      operationId: "createToken",
      tags: ["tokens"],
      summary: "Mint a token for yourself; the answer holds the secret, once",
      request: { body: { content: { "application/json": { schema: CreateTokenBody } }, required: true } },
      responses: { 201: json(CreatedToken, "Created"), ...TOKEN_PROBLEMS, 409: problem(`You already hold ${MAX_TOKENS_PER_USER} live tokens`) },
    }),
    async (c) => {
      const body = c.req.valid("json");
      const principal = c.get("principal");
      const scopes = body.scopes ?? [...principal.scopes];
      const extra = scopes.find((s) => !principal.scopes.includes(s));
      if (extra) throw new ForbiddenError(`a token can only grant scopes it holds itself; this one lacks '${extra}'`, { field: "body.scopes" });
      const now = Date.now();
      const parent = principal.tokenId ? await svc.store.getToken(principal.tokenId) : undefined;
      const limit = parent?.expiresAt ?? null;
      const expiresAt = body.expiresInSeconds !== undefined ? now + body.expiresInSeconds * 1000 : limit;
      if (limit !== null && expiresAt !== null && expiresAt > limit)
        throw new InvalidArgumentError("must not outlive the calling token", { field: "body.expiresInSeconds" });
      const live = await svc.store.listTokens(principal.userId, now, MAX_TOKENS_PER_USER);
      if (live.length >= MAX_TOKENS_PER_USER) throw new ConflictError(`you already hold ${MAX_TOKENS_PER_USER} live tokens; revoke some first`);
      const { token, hash } = newToken();
      const record = await svc.store.addTokenHash(principal.userId, hash, { scopes, name: body.name ?? null, expiresAt, now });
      return c.json({ ...tokenView(record), token }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/tokens/{tokenId}",
      operationId: "revokeToken",
      tags: ["tokens"],
      summary: "Revoke one of your tokens (an admin token: anyone's); it fails from the very next request on",
      request: { params: TokenIdParams },
      responses: { 204: { description: "Revoked" }, ...TOKEN_PROBLEMS },
    }),
    async (c) => {
      const { tokenId } = c.req.valid("param");
      const principal = c.get("principal");
      const owner = principal.scopes.includes("admin") ? undefined : principal.userId;
      if (!(await svc.store.revokeToken(tokenId, Date.now(), owner))) throw new NotFoundError(`token '${tokenId}' not found`, { field: "tokenId" });
      return c.body(null, 204);
    },
  );
}
