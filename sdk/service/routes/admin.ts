import { createRoute, z, type OpenAPIHono } from "@hono/zod-openapi";
import { NotFoundError } from "../../errors.js";
import { sessionView, workspaceOf, type ServiceContext, type ServiceEnv } from "../context.js";
import { ListSessionsQuery, Session, SessionIdParam } from "../schemas.js";
import { json } from "./common.js";
import { TOKEN_PROBLEMS, TokenIdParams, TokenList, tokenView } from "./tokens.js";

const userIdField = z.string().min(1).max(256);

const AdminSession = Session.extend({ userId: z.string() }).openapi("AdminSession");
const AdminSessionList = z.object({ sessions: z.array(AdminSession), total: z.number().int() }).openapi("AdminSessionList");
const AdminSessionsQuery = ListSessionsQuery.extend({ userId: userIdField.optional() });
const AdminSessionParams = z.object({
  userId: userIdField.openapi({ param: { name: "userId", in: "path" } }),
  sessionId: SessionIdParam,
});

/** Tokens every listing returns at most. */
const MAX_LISTED_TOKENS = 1000;

const PROBLEMS = {
  ...TOKEN_PROBLEMS,
  403: { ...TOKEN_PROBLEMS[403], description: "The token lacks the admin scope" },
  404: { ...TOKEN_PROBLEMS[404], description: "No such session or token" },
};

/**
 * The operator's routes (scope `admin`, checked with every other scope in app.ts): every user's
 * sessions and tokens, and deleting any session or revoking any token. An operator acts on a
 * session's workspace contents with that user's own token; these routes are for oversight and
 * clean-up.
 */
export function adminRoutes(app: OpenAPIHono<ServiceEnv>, svc: ServiceContext): void {
  app.openapi(
    createRoute({
      method: "get",
      path: "/admin/sessions",
      operationId: "adminListSessions",
      tags: ["admin"],
      summary: "Every user's sessions (or one user's), oldest first",
      request: { query: AdminSessionsQuery },
      responses: { 200: json(AdminSessionList, "Sessions"), ...PROBLEMS },
    }),
    async (c) => {
      const q = c.req.valid("query");
      const { sessions, total } = await svc.store.listAllSessions({ userId: q.userId, agentId: q.agentId, limit: q.limit, offset: q.offset });
      return c.json({ sessions: sessions.map((s) => ({ ...sessionView(s), userId: s.userId })), total }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/admin/users/{userId}/sessions/{sessionId}",
      operationId: "adminDeleteSession",
      tags: ["admin"],
      summary: "Delete any user's session, purging its MCP registrations and sessions/<id>/ files first",
      request: { params: AdminSessionParams },
      responses: { 204: { description: "Deleted" }, ...PROBLEMS },
    }),
    async (c) => {
      const { userId, sessionId } = c.req.valid("param");
      const record = await svc.store.getSession(userId, sessionId);
      if (!record) throw new NotFoundError(`session '${sessionId}' not found`, { field: "sessionId" });
      // As the owner's own delete: purge first, so a failure keeps the session for a retry.
      const ws = await workspaceOf(svc, record);
      await ws.purgeSession({ agentId: record.agentId, sessionId: record.sessionId });
      await svc.store.deleteSession(record.userId, record.sessionId);
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/admin/tokens",
      operationId: "adminListTokens",
      tags: ["admin"],
      summary: `Every user's live tokens (or one user's), oldest first, at most ${MAX_LISTED_TOKENS}`,
      request: { query: z.object({ userId: userIdField.optional() }) },
      responses: { 200: json(TokenList, "Tokens"), ...PROBLEMS },
    }),
    async (c) => c.json({ tokens: (await svc.store.listTokens(c.req.valid("query").userId, Date.now(), MAX_LISTED_TOKENS)).map(tokenView) }, 200),
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/admin/tokens/{tokenId}",
      operationId: "adminRevokeToken",
      tags: ["admin"],
      summary: "Revoke anyone's token; it fails from the very next request on",
      request: { params: TokenIdParams },
      responses: { 204: { description: "Revoked" }, ...PROBLEMS },
    }),
    async (c) => {
      const { tokenId } = c.req.valid("param");
      if (!(await svc.store.revokeToken(tokenId, Date.now()))) throw new NotFoundError(`token '${tokenId}' not found`, { field: "tokenId" });
      return c.body(null, 204);
    },
  );
}
