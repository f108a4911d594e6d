/**
 * OpenAI Agents SDK (`@openai/agents` 0.14, the newest on Node 20) integration: a workspace's tools,
 * MCP tools, skills and tool groups as function tools, its MCP servers as Agents SDK MCP servers,
 * and a `callModelInputFilter` that compresses the context into `context.jsonl`.
 * Loaded only through `agent-workspaces/openai-agents`; `@openai/agents` is an optional peer.
 */
import type { AgentInputItem, CallModelInputFilter, FunctionTool, MCPServer } from "@openai/agents";
import { requirePeer } from "../../util/peer.js";

type MCPTool = Awaited<ReturnType<MCPServer["listTools"]>>[number];
import type { Workspace } from "../../workspace/workspace.js";
import type { McpClientHandle } from "../../workspace/mcp.js";
import type { ContentBlock, Message } from "../../workspace/offload.js";
import { ContextCompressor, type CompressionOptions, type MessageCodec } from "../shared/offload-policy.js";
import { Toolkit, type ToolkitOptions, type ToolkitTool } from "../shared/toolkit.js";

export { Toolkit, BASIC_GROUP, ACTIVATE_TOOL, SKILL_TOOL, type ToolkitOptions, type ToolGroupSpec } from "../shared/toolkit.js";
export type { CompressionOptions } from "../shared/offload-policy.js";

export interface WorkspaceAgentTools {
  tools: FunctionTool[];
  toolkit: Toolkit;
  /**
   * A fresh `callModelInputFilter` for one run (`run(agent, input, { callModelInputFilter })`):
   * compresses the history over the trigger, each message offloaded once. Passes through without
   * `compression`.
   */
  callModelInputFilter(): CallModelInputFilter;
}

/** Function tools: built-ins, `mcp__<server>__<tool>`, `Skill` and `ActivateToolGroup`. */
export async function workspaceTools(workspace: Workspace, options: ToolkitOptions & { compression?: CompressionOptions }): Promise<WorkspaceAgentTools> {
  const toolkit = await Toolkit.create(workspace, options);
  const compression = options.compression;
  return {
    tools: toolkit.tools.map(toFunctionTool),
    toolkit,
    callModelInputFilter: () => {
      if (!compression) return ({ modelData }) => modelData;
      const compressor = new ContextCompressor(workspace, options.sessionId, agentsCodec, compression);
      return async ({ modelData }) => ({ ...modelData, input: await compressor.apply(modelData.input) });
    },
  };
}

function toFunctionTool(t: ToolkitTool): FunctionTool {
  // The Agents SDK takes zod only in strict mode, where optional fields turn into required nullable
  // ones the tool's own schema refuses; so the model gets the JSON Schema derived from that zod
  // schema (non-strict) and the tool validates with the zod schema itself, naming a bad field.
  // The framework is an optional peer: loaded when a tool is built, with an error naming it when missing.
  const { tool } = requirePeer<typeof import("@openai/agents")>("@openai/agents", "the OpenAI Agents adapter");
  return tool({
    name: t.name,
    description: t.description,
    parameters: { additionalProperties: true, ...t.jsonSchema } as never,
    strict: false,
    execute: (input: unknown, _ctx, details) => t.run(input, details?.toolCall?.callId),
    errorFunction: (_ctx, error) => `Error: ${t.name}: ${error instanceof Error ? error.message : "failed"}`,
  }) as FunctionTool;
}

/**
 * The workspace's MCP servers for `new Agent({ mcpServers })`, tools named `mcp__<server>__<tool>`.
 * The clients are the workspace's own: live already, closed with the workspace (connect and close
 * here do nothing). Tool groups and result offloading apply to `workspaceTools`, not to these.
 */
export async function workspaceMcpServers(workspace: Workspace, scope: { agentId?: string; sessionId: string }): Promise<MCPServer[]> {
  return (await workspace.listMcps(scope)).map((h) => new WorkspaceMcpServer(h));
}

class WorkspaceMcpServer implements MCPServer {
  readonly cacheToolsList = false;
  readonly #handle: McpClientHandle;
  constructor(handle: McpClientHandle) {
    this.#handle = handle;
  }
  get name(): string {
    return this.#handle.name;
  }
  async connect(): Promise<void> {}
  async close(): Promise<void> {}
  async invalidateToolsCache(): Promise<void> {}
  async listTools(): Promise<MCPTool[]> {
    return (await this.#handle.listTools()).map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema as MCPTool["inputSchema"] }));
  }
  async callTool(toolName: string, args: Record<string, unknown> | null) {
    const prefix = `mcp__${this.#handle.name}__`;
    const name = toolName.startsWith(prefix) ? toolName.slice(prefix.length) : toolName;
    const r = await this.#handle.callTool(name, args ?? {});
    return r.content as Awaited<ReturnType<MCPServer["callTool"]>>;
  }
}

/** Agents SDK input items as reference messages (text, tool_use and tool_result blocks). */
export function toReferenceMessage(item: AgentInputItem): Message {
  const i = item as Record<string, unknown> & { type?: string };
  if (i.type === "function_call") return { content: [{ type: "tool_use", id: String(i.callId), name: String(i.name), input: i.arguments }], role: "assistant" };
  if (i.type === "function_call_result")
    return { content: [{ type: "tool_result", id: String(i.callId), name: String(i.name), output: i.output }], role: "tool" };
  if (i.type === "message" || (i.type === undefined && "role" in i)) {
    const content = i.content;
    if (typeof content === "string") return { content, role: String(i.role) };
    const blocks: ContentBlock[] = (Array.isArray(content) ? content : []).map((p: { type: string; text?: string }) =>
      p.type === "input_text" || p.type === "output_text" ? { type: "text", text: p.text ?? "" } : { ...p },
    );
    return { content: blocks, role: String(i.role) };
  }
  return { content: [{ ...i, type: i.type ?? "unknown" }], role: "assistant" };
}

const agentsCodec: MessageCodec<AgentInputItem> = {
  toReference: toReferenceMessage,
  summary: (text) => ({ type: "message", role: "user", content: [{ type: "input_text", text }] }) as AgentInputItem,
  isPinned: (m) => (m as { role?: string }).role === "system",
  needsPrevious: (m) => (m as { type?: string }).type === "function_call_result",
};
