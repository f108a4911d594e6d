import { randomUUID } from "node:crypto";
import { createRoute, type OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { NotFoundError } from "../../errors.js";
import { checkRelativePath } from "../../paths.js";
import { sessionOf, sessionView, workspaceOf, type ServiceContext, type ServiceEnv } from "../context.js";
import { CreateSessionBody, ListSessionsQuery, PatchSessionBody, Session, SessionList, SessionParams } from "../schemas.js";
import type { SessionRecord } from "../stores/store.js";
import { AUTHED, JSON_BODY, WORKSPACE, json, problem, problemResponses } from "./openapi-common.js";

/** The session routes: create (the workspace id is decided once and stored), get, list, patch, delete (purges). */
export function sessionRoutes(app: OpenAPIHono<ServiceEnv>, svc: ServiceContext): void {
  app.openapi(
    createRoute({
      method: "post",
      path: "/sessions",
      operationId: "createSession",
      tags: ["sessions"],
      summary: "Create a session; its workspace is assigned once (the policy's id, or an explicit workspaceId of yours) and provisioned",
      request: { body: { content: { "application/json": { schema: CreateSessionBody } }, required: true } },
      responses: {
        201: json(Session, "Created"),
        // Provisioning answers as the backend does; there is no session yet to be a 404.
        ...problemResponses(...AUTHED, 429, 502, 503, 504, ...JSON_BODY),
        409: problem("The workspace belongs to another user"),
      },
    }),
    async (c) => {
      const body = c.req.valid("json");
      const userId = c.get("userId");
      const sessionId = randomUUID().replace(/-/g, "");
      const derived = svc.manager.resolveWorkspaceId(userId, body.agentId, sessionId);
      const workspaceId = body.workspaceId === undefined ? derived : await explicitWorkspaceId(svc, c, body.workspaceId, derived);
      const now = Date.now();
      const record: SessionRecord = {
        sessionId,
        userId,
        agentId: body.agentId,
        workspaceId,
        name: body.name ?? new Date(now).toISOString().slice(0, 19).replace("T", " "),
        cwd: cwdOf(body.cwd) ?? null,
        createdAt: now,
        updatedAt: now,
      };
      // Provisioned before it is stored: another user's workspace id is refused here, and nothing is recorded.
      await svc.quotas.createSession(
        userId,
        () => workspaceOf(svc, record),
        (maxPerUser) => svc.store.createSession(record, { maxPerUser }),
      );
      return c.json(sessionView(record), 201);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/sessions",
      operationId: "listSessions",
      tags: ["sessions"],
      summary: "Your sessions, oldest first",
      request: { query: ListSessionsQuery },
      responses: { 200: json(SessionList, "Sessions"), ...problemResponses(...AUTHED) },
    }),
    async (c) => {
      const q = c.req.valid("query");
      const { sessions, total } = await svc.store.listSessions(c.get("userId"), { agentId: q.agentId, limit: q.limit, offset: q.offset });
      return c.json({ sessions: sessions.map(sessionView), total }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/sessions/{sessionId}",
      operationId: "getSession",
      tags: ["sessions"],
      summary: "One session of yours",
      request: { params: SessionParams },
      responses: { 200: json(Session, "The session"), ...problemResponses(...AUTHED, 404) },
    }),
    async (c) => c.json(sessionView(await sessionOf(svc, c.get("userId"), c.req.valid("param").sessionId)), 200),
  );

  app.openapi(
    createRoute({
      method: "patch",
      path: "/sessions/{sessionId}",
      operationId: "updateSession",
      tags: ["sessions"],
      summary: "Change the name or cwd (the workspace id never changes)",
      request: { params: SessionParams, body: { content: { "application/json": { schema: PatchSessionBody } }, required: true } },
      responses: { 200: json(Session, "The updated session"), ...problemResponses(...AUTHED, 404, ...JSON_BODY) },
    }),
    async (c) => {
      const body = c.req.valid("json");
      const { sessionId } = c.req.valid("param");
      const next = await svc.store.updateSession(c.get("userId"), sessionId, { name: body.name, cwd: cwdOf(body.cwd) }, Date.now());
      if (!next) throw new NotFoundError(`session '${sessionId}' not found`, { field: "sessionId" });
      return c.json(sessionView(next), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/sessions/{sessionId}",
      operationId: "deleteSession",
      tags: ["sessions"],
      summary: "Delete a session: its MCP registrations and sessions/<id>/ files are purged first",
      request: { params: SessionParams },
      responses: { 204: { description: "Deleted" }, ...problemResponses(...WORKSPACE) },
    }),
    async (c) => {
      const record = await sessionOf(svc, c.get("userId"), c.req.valid("param").sessionId);
      // Purge first: if it fails the session is kept and the delete can be retried, nothing half-done.
      const ws = await workspaceOf(svc, record);
      await ws.purgeSession({ agentId: record.agentId, sessionId: record.sessionId });
      await svc.store.deleteSession(record.userId, record.sessionId);
      return c.body(null, 204);
    },
  );
}

/**
 * Hook for the token layer: a caller allowed to name workspace ids that are not yet theirs (an
 * operator token: the `admin` scope) may; everyone else may only name their own.
 */
export function mayCreateExplicitIds(c: Context<ServiceEnv>): boolean {
  return c.get("principal").scopes.includes("admin");
}

/**
 * An explicit workspace id names a workspace of the caller's: the one the policy derives for them,
 * one of their sessions' or one the stack declared for them. Derived ids are an unkeyed hash anyone
 * can compute, so a new or foreign id would let a caller occupy another user's future workspace
 * (their first session then a 409 forever) or probe which agents they have. Both cases get the same
 * 404, byte for byte, so nothing can be learnt from it.
 */
async function explicitWorkspaceId(svc: ServiceContext, c: Context<ServiceEnv>, workspaceId: string, derived: string): Promise<string> {
  if (workspaceId === derived || mayCreateExplicitIds(c)) return workspaceId;
  const userId = c.get("userId");
  const declared = svc.manager.declared(workspaceId);
  const ours = declared ? declared.userId === userId : await svc.store.userHasWorkspace(userId, workspaceId);
  if (ours) return workspaceId;
  throw new NotFoundError("workspaceId: no workspace of yours has this id (leave it out to get the one your isolation policy assigns)", {
    field: "workspaceId",
  });
}

/** A session's cwd: workspace-relative (checked like every path); "" or null is the root, undefined leaves it. */
function cwdOf(value: string | null | undefined): string | null | undefined {
  if (value === undefined) return undefined;
  if (value === null) return null;
  return checkRelativePath(value, "cwd") || null;
}
