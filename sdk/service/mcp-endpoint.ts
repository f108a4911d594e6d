import type { IncomingMessage } from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, type CallToolResult, type Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Context, Hono } from "hono";
import { z } from "zod";
import { InvalidArgumentError, NotFoundError, TimeoutError, WorkspaceError, ForbiddenError, UnsupportedError } from "../errors.js";
import { toProblem } from "../errors-http.js";
import type { Logger } from "../logger.js";
import type { Workspace } from "../workspace/workspace.js";
import { resolve, type ServiceContext, type ServiceEnv } from "./context.js";

const SkillInput = z.strictObject({ name: z.string().min(1).max(256).optional() });
const SKILL_TOOL = "Skill";
/** A reason quoted in a tool description is cut here: a server's error text is not the model's to read whole. */
const MAX_REASON_CHARS = 500;

export interface McpEndpointOptions {
  /**
   * Host names (no port) the endpoint answers besides loopback ones; `["*"]` allows any. Unset, a
   * request that arrived on a loopback address must name a loopback host (DNS-rebinding protection)
   * and others are not checked; set, every request must name a loopback host or one of these.
   */
  allowedHosts?: string[] | undefined;
  /** Origins (`https://app.example.com`) allowed besides the endpoint's own; `["*"]` allows any. */
  allowedOrigins?: string[] | undefined;
}

interface Scope {
  agentId: string;
  sessionId: string;
}
type Call = (args: Record<string, unknown>) => Promise<CallToolResult>;

/**
 * One MCP endpoint per session's workspace, `/sessions/{sessionId}/mcp` (streamable HTTP,
 * stateless: each POST is answered on its own, so any replica can serve it; there is no SSE stream,
 * so GET and DELETE are 405). It offers the built-in tools, the tools of the session's registered
 * MCP servers (`mcp__<server>__<tool>`) and a `Skill` tool over the agent's skills. The caller's
 * bearer token decides the user; another user's session is a 404 before any MCP message is read.
 * A server that fails costs only its own tools: tools/list shows it as one `mcp__<server>__unavailable`
 * entry whose description gives the reason, and a call resolves only the tool named.
 */
export function mcpEndpoint(app: Hono<ServiceEnv>, svc: ServiceContext, options: McpEndpointOptions = {}): void {
  const hosts = new Set((options.allowedHosts ?? []).map((h) => h.toLowerCase()));
  const origins = new Set((options.allowedOrigins ?? []).map((o) => o.toLowerCase().replace(/\/+$/, "")));
  app.all("/sessions/:sessionId/mcp", async (c) => {
    if (!hostAllowed(c, options.allowedHosts ? hosts : undefined))
      throw new ForbiddenError("the Host header names a host this MCP endpoint does not serve; an operator can list it in allowedHosts");
    if (!originAllowed(c, origins))
      throw new ForbiddenError("the Origin header names an origin this MCP endpoint does not allow; an operator can list it in allowedOrigins");
    if (c.req.method !== "POST") {
      const body = {
        ...toProblem(new UnsupportedError("this MCP endpoint is stateless: it answers POST only and offers no SSE stream")),
        status: 405,
        requestId: c.get("requestId"),
      };
      return new Response(JSON.stringify(body), { status: 405, headers: { allow: "POST", "content-type": "application/problem+json" } });
    }
    const { record, ws } = await resolve(svc, c);
    const scope = { agentId: record.agentId, sessionId: record.sessionId };
    const server = new Server({ name: `agent-workspaces/${record.workspaceId}`, version: "0.1.0" }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: await listTools(ws, scope, svc.limits.mcpListTimeoutMs, svc.logger) }));
    server.setRequestHandler(CallToolRequestSchema, async (req) => {
      const name = req.params.name;
      const call = await findTool(ws, scope, name);
      // An unknown tool is a protocol error (the spec's -32602 "Unknown tool"); everything else, bad input included, is a result the model can read.
      if (!call) throw unknownTool(name);
      try {
        return await call(req.params.arguments ?? {});
      } catch (e) {
        if (e instanceof ProtocolError) throw e;
        return { content: [{ type: "text", text: `Error: ${e instanceof Error ? e.message : String(e)}` }], isError: true };
      }
    });
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
      maxRequestBodySize: svc.limits.maxJsonBytes,
    });
    await server.connect(transport);
    try {
      return await transport.handleRequest(c.req.raw);
    } finally {
      await server.close();
    }
  });
}

/** A JSON-RPC error answered with exactly this code and message (the SDK's McpError prefixes "MCP error <code>: "). */
class ProtocolError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

function unknownTool(name: string): ProtocolError {
  return new ProtocolError(ErrorCode.InvalidParams, `Unknown tool: ${name.slice(0, 128)}`);
}

/** Built-ins, then each server's tools (listed in parallel, each bounded by `timeoutMs`), then Skill. */
async function listTools(ws: Workspace, scope: Scope, timeoutMs: number, logger: Logger): Promise<Tool[]> {
  const builtins: Tool[] = ws.listTools().map((t) => ({ name: t.name, description: t.description, inputSchema: t.jsonSchema as Tool["inputSchema"] }));
  const servers = await Promise.all(
    (await ws.listMcpNames(scope)).map(async (server): Promise<Tool[]> => {
      try {
        const tools = await bounded(
          ws.getMcp(server, scope).then((h) => h?.listTools() ?? []),
          timeoutMs,
          server,
        );
        return tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema as Tool["inputSchema"] }));
      } catch (e) {
        // The SDK's MCP errors already mask the spec's secrets (headers, env, URL credentials); anything else is not quoted.
        const reason = (e instanceof WorkspaceError ? e.message : "unexpected error").slice(0, MAX_REASON_CHARS);
        logger.warn("MCP server unavailable for tools/list", { mcp: server, sessionId: scope.sessionId, error: reason });
        return [
          {
            name: `mcp__${server}__unavailable`,
            description: `MCP server '${server}' is unavailable, so none of its tools are listed: ${reason}. List the tools again later to see whether it is back.`,
            inputSchema: { type: "object", properties: {} },
            annotations: { readOnlyHint: true },
          },
        ];
      }
    }),
  );
  const skills = await ws.listSkills({ agentId: scope.agentId });
  const skill: Tool = {
    name: SKILL_TOOL,
    description: `Loads a skill's instructions (SKILL.md) by name; without a name, lists them. Skills: ${
      skills
        .map((s) => `${s.name}: ${s.description}`)
        .join("; ")
        .slice(0, 8000) || "(none)"
    }`,
    inputSchema: z.toJSONSchema(SkillInput, { io: "input" }) as Tool["inputSchema"],
  };
  return [...builtins, ...servers.flat(), skill];
}

/** Settles with `p`, or with a timeout naming the server; `p` runs on under its own bounds. */
function bounded<T>(p: Promise<T>, ms: number, server: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  p.catch(() => undefined);
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new TimeoutError(`MCP server '${server}' did not list its tools within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Resolves the named tool alone: a built-in directly, `mcp__<server>__<tool>` through that server only, Skill through the skills. */
async function findTool(ws: Workspace, scope: Scope, name: string): Promise<Call | undefined> {
  const builtin = ws.listTools().find((t) => t.name === name);
  if (builtin)
    return async (args) => {
      const r = await builtin.execute(args);
      return { content: [{ type: "text", text: r.output }], isError: !r.ok };
    };
  if (name === SKILL_TOOL) return (args) => callSkill(ws, scope, args);
  if (!name.startsWith("mcp__")) return undefined;
  // Server names may hold "__" themselves: the longest declared name that prefixes the tool wins.
  const server = (await ws.listMcpNames(scope))
    .filter((s) => name.startsWith(`mcp__${s}__`) && name.length > `mcp__${s}__`.length)
    .sort((a, b) => b.length - a.length)[0];
  if (server === undefined) return undefined;
  const toolName = name.slice(`mcp__${server}__`.length);
  return async (args) => {
    const handle = await ws.getMcp(server, scope);
    if (!handle) throw unknownTool(name);
    // The server's tool filters hold here as in the listing.
    const { enableTools, disableTools } = handle.spec;
    if ((enableTools && !enableTools.includes(toolName)) || disableTools?.includes(toolName)) throw unknownTool(name);
    const r = await handle.callTool(toolName, args);
    return { content: r.content as CallToolResult["content"], isError: !r.ok, ...(r.structuredContent ? { structuredContent: r.structuredContent } : {}) };
  };
}

async function callSkill(ws: Workspace, scope: Scope, args: Record<string, unknown>): Promise<CallToolResult> {
  const parsed = SkillInput.safeParse(args);
  if (!parsed.success) throw new InvalidArgumentError(parsed.error.issues[0]?.message ?? "invalid", { field: "name" });
  const skills = await ws.listSkills({ agentId: scope.agentId });
  if (parsed.data.name === undefined)
    return { content: [{ type: "text", text: skills.map((s) => `${s.name}: ${s.description} (${s.dir})`).join("\n") || "(no skills)" }] };
  const skill = skills.find((s) => s.name === parsed.data.name);
  if (!skill) throw new NotFoundError(`skill '${parsed.data.name}' not found`, { field: "name" });
  return { content: [{ type: "text", text: `# ${skill.name}\n(folder: ${skill.dir})\n\n${skill.markdown}` }] };
}

const LOOPBACK_HOSTS = new Set(["localhost", "[::1]"]);
const isLoopbackHost = (host: string) => LOOPBACK_HOSTS.has(host) || host.endsWith(".localhost") || /^127(\.\d{1,3}){3}$/.test(host);
const isLoopbackAddress = (address: string) => address === "::1" || /^(::ffff:)?127\./.test(address);

/** The Host header's name, lower-cased, without the port ("[::1]" keeps its brackets). */
function hostName(host: string): string {
  const h = host.trim().toLowerCase();
  if (h.startsWith("[")) return h.slice(0, h.indexOf("]") + 1);
  return h.replace(/:\d*$/, "");
}

/** DNS rebinding: a page on another name that resolves to this host must not reach the endpoint. */
function hostAllowed(c: Context<ServiceEnv>, allowed: Set<string> | undefined): boolean {
  if (allowed?.has("*")) return true;
  const host = hostName(c.req.header("host") ?? "");
  if (isLoopbackHost(host) || allowed?.has(host)) return true;
  if (allowed) return false;
  // Unconfigured: only a connection that arrived on loopback is held to loopback names.
  const local = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming?.socket?.localAddress;
  return local === undefined || !isLoopbackAddress(local);
}

/** A browser's Origin must be the endpoint's own (same host and port) or listed. */
function originAllowed(c: Context<ServiceEnv>, allowed: Set<string>): boolean {
  const origin = c.req.header("origin");
  if (origin === undefined) return true;
  if (allowed.has("*") || allowed.has(origin.toLowerCase())) return true;
  try {
    return new URL(origin).host === (c.req.header("host") ?? "").toLowerCase();
  } catch {
    return false;
  }
}
