import { createRoute, z, type OpenAPIHono } from "@hono/zod-openapi";
import { McpServerSpecSchema } from "../../workspace/mcp-spec.js";
import { resolve, type ServiceContext, type ServiceEnv } from "../context.js";
import { McpServerStatus, SessionParams } from "../schemas.js";
import { within } from "./common.js";
import { JSON_BODY, WORKSPACE, json, problem, problemResponses } from "./openapi-common.js";

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
      operationId: "listMcpServers",
      tags: ["workspace"],
      summary: "MCP servers of this session, with health and tools",
      request: { params: SessionParams },
      responses: { 200: json(z.array(McpServerStatus), "MCP servers"), ...problemResponses(...WORKSPACE) },
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
      operationId: "addMcpServer",
      tags: ["workspace"],
      summary: "Register an MCP server for this session (409 when the name is taken)",
      request: { params: SessionParams, body: { content: { "application/json": { schema: McpServerSpecSchema } }, required: true } },
      responses: {
        201: { description: "Registered" },
        ...problemResponses(...WORKSPACE, ...JSON_BODY),
        // A stateful server is connected on add: the egress policy refuses loopback, private and metadata addresses unless allowed.
        403: problem("The egress policy refuses the server's address (the host is named)"),
        409: problem("An MCP server of that name is already registered"),
        502: problem("The server could not be connected to or listed"),
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
      operationId: "removeMcpServer",
      tags: ["workspace"],
      summary: "Remove an MCP server of this session (an unknown name is not an error)",
      request: { params: SessionParams.extend({ name: z.string().max(256) }) },
      responses: { 204: { description: "Removed" }, ...problemResponses(...WORKSPACE) },
    }),
    async (c) => {
      const { record, ws } = await resolve(svc, c);
      await ws.removeMcp(c.req.valid("param").name, { agentId: record.agentId, sessionId: record.sessionId });
      return c.body(null, 204);
    },
  );
}
