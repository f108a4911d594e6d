import { createRoute, z, type OpenAPIHono } from "@hono/zod-openapi";
import { McpServerSpecSchema } from "../../workspace/mcp-spec.js";
import { resolve, type ServiceContext, type ServiceEnv } from "../context.js";
import { McpServerStatus, Problem, SessionParams } from "../schemas.js";
import { WORKSPACE_PROBLEMS, json, within } from "./common.js";

const HEALTH_TIMEOUT_MS = 10_000;

/**
 * The session's MCP servers: list (each probed for its tools; a failing one is reported unhealthy
 * with its error, not hidden as the reference does), add, remove. Declarations are never echoed
 * back: their env and header values may be secrets.
 */
export function mcpRoutes(app: OpenAPIHono<ServiceEnv>, svc: ServiceContext): void {
  app.openapi(
    createRoute({
      method: "get",
      path: "/sessions/{sessionId}/workspace/mcp",
      tags: ["workspace"],
      summary: "MCP servers of this session, with health and tools",
      request: { params: SessionParams },
      responses: { 200: json(z.array(McpServerStatus), "MCP servers"), ...WORKSPACE_PROBLEMS },
    }),
    async (c) => {
      const { record, ws } = await resolve(svc, c);
      const handles = await ws.listMcps({ agentId: record.agentId, sessionId: record.sessionId });
      const out: Array<z.infer<typeof McpServerStatus>> = await Promise.all(
        handles.map(async (h): Promise<z.infer<typeof McpServerStatus>> => {
          const base = { name: h.name, stateful: h.stateful, transport: h.spec.transport.type };
          try {
            const tools = await within(HEALTH_TIMEOUT_MS, h.listTools(), `MCP '${h.name}'`);
            return { ...base, isHealthy: true, tools: tools.map((t) => ({ name: t.name, description: t.description })) };
          } catch (e) {
            return { ...base, isHealthy: false, tools: [], error: (e instanceof Error ? e.message : String(e)).slice(0, 2000) };
          }
        }),
      );
      return c.json(out, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/sessions/{sessionId}/workspace/mcp",
      tags: ["workspace"],
      summary: "Register an MCP server for this session (409 when the name is taken)",
      request: { params: SessionParams, body: { content: { "application/json": { schema: McpServerSpecSchema } }, required: true } },
      responses: {
        201: { description: "Registered" },
        ...WORKSPACE_PROBLEMS,
        // A stateful server is connected on add: the egress policy refuses loopback, private and metadata addresses unless allowed.
        403: { description: "The egress policy refuses the server's address (the host is named)", content: { "application/problem+json": { schema: Problem } } },
      },
    }),
    async (c) => {
      const spec = c.req.valid("json");
      const { record, ws } = await resolve(svc, c);
      await ws.addMcp(spec, { agentId: record.agentId, sessionId: record.sessionId });
      return c.body(null, 201);
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/sessions/{sessionId}/workspace/mcp/{name}",
      tags: ["workspace"],
      summary: "Remove an MCP server of this session (an unknown name is not an error)",
      request: { params: SessionParams.extend({ name: z.string().max(256) }) },
      responses: { 204: { description: "Removed" }, ...WORKSPACE_PROBLEMS },
    }),
    async (c) => {
      const { record, ws } = await resolve(svc, c);
      await ws.removeMcp(c.req.valid("param").name, { agentId: record.agentId, sessionId: record.sessionId });
      return c.body(null, 204);
    },
  );
}
