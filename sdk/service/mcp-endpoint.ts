import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema, McpError, type CallToolResult, type Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Hono } from "hono";
import { z } from "zod";
import { InvalidArgumentError, NotFoundError, WorkspaceError } from "../errors.js";
import { toMcpError } from "../errors-http.js";
import type { Workspace } from "../workspace/workspace.js";
import { resolve, type ServiceContext, type ServiceEnv } from "./context.js";
import type { SessionRecord } from "./stores/store.js";

const SkillInput = z.strictObject({ name: z.string().min(1).max(256).optional() });
const SKILL_TOOL = "Skill";

interface EndpointTool {
  tool: Tool;
  call(args: Record<string, unknown>): Promise<CallToolResult>;
}

/**
 * One MCP endpoint per session's workspace, `/sessions/{sessionId}/mcp` (streamable HTTP,
 * stateless: each POST is answered on its own, so any replica can serve it). It offers the
 * built-in tools, the tools of the session's registered MCP servers (`mcp__<server>__<tool>`) and a
 * `Skill` tool over the agent's skills. The caller's bearer token decides the user; another
 * user's session is a 404 before any MCP message is read.
 */
export function mcpEndpoint(app: Hono<ServiceEnv>, svc: ServiceContext): void {
  app.all("/sessions/:sessionId/mcp", async (c) => {
    const { record, ws } = await resolve(svc, c);
    const server = new Server({ name: `agent-workspaces/${record.workspaceId}`, version: "0.1.0" }, { capabilities: { tools: {} } });
    let tools: Map<string, EndpointTool> | undefined;
    const load = async () => (tools ??= await toolsOf(ws, record));
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [...(await load()).values()].map((t) => t.tool) }));
    server.setRequestHandler(CallToolRequestSchema, async (req) => {
      const tool = (await load()).get(req.params.name);
      try {
        if (!tool) throw new NotFoundError(`tool '${req.params.name}'`, { field: "name" });
        return await tool.call(req.params.arguments ?? {});
      } catch (e) {
        // Bad input is a protocol error with our code mapping; anything else the model can read.
        if (e instanceof WorkspaceError && ["invalid_argument", "not_found", "path_escape"].includes(e.code)) {
          const m = toMcpError(e);
          throw new McpError(m.code, m.message, m.data);
        }
        return { content: [{ type: "text", text: `Error: ${e instanceof Error ? e.message : String(e)}` }], isError: true };
      }
    });
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true, maxRequestBodySize: svc.limits.maxJsonBytes });
    await server.connect(transport);
    try {
      return await transport.handleRequest(c.req.raw);
    } finally {
      await server.close();
    }
  });
}

async function toolsOf(ws: Workspace, record: SessionRecord): Promise<Map<string, EndpointTool>> {
  const out = new Map<string, EndpointTool>();
  for (const t of ws.listTools())
    out.set(t.name, {
      tool: { name: t.name, description: t.description, inputSchema: t.jsonSchema as Tool["inputSchema"] },
      call: async (args) => {
        const r = await t.execute(args);
        return { content: [{ type: "text", text: r.output }], isError: !r.ok };
      },
    });
  for (const handle of await ws.listMcps({ agentId: record.agentId, sessionId: record.sessionId }))
    for (const t of await handle.listTools())
      out.set(t.name, {
        tool: { name: t.name, description: t.description, inputSchema: t.inputSchema as Tool["inputSchema"] },
        call: async (args) => {
          const r = await t.call(args);
          return { content: r.content as CallToolResult["content"], isError: !r.ok, ...(r.structuredContent ? { structuredContent: r.structuredContent } : {}) };
        },
      });
  const skills = await ws.listSkills({ agentId: record.agentId });
  out.set(SKILL_TOOL, {
    tool: {
      name: SKILL_TOOL,
      description: `Loads a skill's instructions (SKILL.md) by name; without a name, lists them. Skills: ${skills.map((s) => `${s.name}: ${s.description}`).join("; ").slice(0, 8000) || "(none)"}`,
      inputSchema: z.toJSONSchema(SkillInput, { io: "input" }) as Tool["inputSchema"],
    },
    call: async (args) => {
      const parsed = SkillInput.safeParse(args);
      if (!parsed.success) throw new InvalidArgumentError("name", parsed.error.issues[0]?.message ?? "invalid");
      const now = await ws.listSkills({ agentId: record.agentId });
      if (parsed.data.name === undefined) return { content: [{ type: "text", text: now.map((s) => `${s.name}: ${s.description} (${s.dir})`).join("\n") || "(no skills)" }] };
      const skill = now.find((s) => s.name === parsed.data.name);
      if (!skill) throw new NotFoundError(`skill '${parsed.data.name}'`, { field: "name" });
      return { content: [{ type: "text", text: `# ${skill.name}\n(folder: ${skill.dir})\n\n${skill.markdown}` }] };
    },
  });
  return out;
}
