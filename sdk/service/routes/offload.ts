import { createRoute, z, type OpenAPIHono } from "@hono/zod-openapi";
import { resolve, workspacePath, type ServiceContext, type ServiceEnv } from "../context.js";
import { SessionParams } from "../schemas.js";
import { JSON_BODY, WORKSPACE, json, problemResponses } from "./openapi-common.js";

const ToolResultBody = z
  .strictObject({ id: z.string().min(1).max(256), name: z.string().max(256).optional(), output: z.string() })
  .openapi("OffloadToolResult");
const ContextBody = z
  .strictObject({
    messages: z
      .array(z.object({ role: z.string().min(1).max(64), content: z.string(), name: z.string().max(256).optional() }))
      .min(1)
      .max(10_000),
  })
  .openapi("OffloadContext");
const Offloaded = z.object({ path: z.string().openapi({ description: "Workspace-relative, e.g. sessions/<id>/context.jsonl" }) }).openapi("Offloaded");

/**
 * Context offloading for the session, over HTTP: a large tool result becomes
 * `sessions/<id>/tool_result-<call>.txt` (create-exclusive, a clash gets a suffix), compressed
 * context is appended to `sessions/<id>/context.jsonl` in one write per call.
 */
export function offloadRoutes(app: OpenAPIHono<ServiceEnv>, svc: ServiceContext): void {
  app.openapi(
    createRoute({
      method: "post",
      path: "/sessions/{sessionId}/workspace/offload/tool-result",
      operationId: "offloadToolResult",
      tags: ["workspace"],
      summary: "Write a large tool result to sessions/<id>/tool_result-<call>.txt",
      request: { params: SessionParams, body: { content: { "application/json": { schema: ToolResultBody } }, required: true } },
      responses: { 201: json(Offloaded, "Where it was written"), ...problemResponses(...WORKSPACE, ...JSON_BODY) },
    }),
    async (c) => {
      const { record, ws } = await resolve(svc, c);
      return c.json({ path: workspacePath(ws, await ws.offloadToolResult(record.sessionId, c.req.valid("json"))) }, 201);
    },
  );
  app.openapi(
    createRoute({
      method: "post",
      path: "/sessions/{sessionId}/workspace/offload/context",
      operationId: "offloadContext",
      tags: ["workspace"],
      summary: "Append compressed context to sessions/<id>/context.jsonl",
      request: { params: SessionParams, body: { content: { "application/json": { schema: ContextBody } }, required: true } },
      responses: { 201: json(Offloaded, "Where it was appended"), ...problemResponses(...WORKSPACE, ...JSON_BODY) },
    }),
    async (c) => {
      const { record, ws } = await resolve(svc, c);
      return c.json({ path: workspacePath(ws, await ws.offloadContext(record.sessionId, c.req.valid("json").messages)) }, 201);
    },
  );
}
