/**
 * Vercel AI SDK (`ai` 6) integration: a workspace's tools, MCP tools, skills and tool groups as a
 * ToolSet, and a `prepareStep` that compresses the context into `context.jsonl`.
 * Loaded only through `agent-workspaces/ai-sdk`; `ai` is an optional peer dependency.
 */
import type { ModelMessage, Tool, ToolSet } from "ai";
import { requirePeer } from "../../util/peer.js";
import type { Workspace } from "../../workspace/workspace.js";
import type { ContentBlock, Message } from "../../workspace/offload.js";
import { ContextCompressor, type CompressionOptions, type MessageCodec } from "../shared/offload-policy.js";
import { Toolkit, type ToolkitOptions, type ToolkitTool } from "../shared/toolkit.js";

export { Toolkit, BASIC_GROUP, ACTIVATE_TOOL, SKILL_TOOL, type ToolkitOptions, type ToolGroupSpec } from "../shared/toolkit.js";
export type { CompressionOptions } from "../shared/offload-policy.js";

export interface WorkspaceToolkit {
  tools: ToolSet;
  toolkit: Toolkit;
  /**
   * For `generateText`/`streamText({ prepareStep })`: compresses the history when it grows over the
   * trigger (the compressed messages go to `context.jsonl`, a summary with the reference's reminder
   * takes their place). Without `compression` it passes the messages through.
   */
  prepareStep: (step: { messages: ModelMessage[] }) => Promise<{ messages: ModelMessage[] }>;
}

/** The tool set alone: built-in tools, `mcp__<server>__<tool>`, `Skill` and `ActivateToolGroup`. */
export async function workspaceToolSet(workspace: Workspace, options: ToolkitOptions): Promise<ToolSet> {
  return (await workspaceToolkit(workspace, options)).tools;
}

export async function workspaceToolkit(workspace: Workspace, options: ToolkitOptions & { compression?: CompressionOptions }): Promise<WorkspaceToolkit> {
  const toolkit = await Toolkit.create(workspace, options);
  const tools: ToolSet = {};
  for (const t of toolkit.tools) tools[t.name] = toAiTool(t);
  const compressor = options.compression ? new ContextCompressor(workspace, options.sessionId, aiCodec, options.compression) : undefined;
  return {
    tools,
    toolkit,
    prepareStep: async ({ messages }) => ({ messages: compressor ? await compressor.apply(messages) : messages }),
  };
}

function toAiTool(t: ToolkitTool): Tool {
  const execute = (input: unknown, { toolCallId }: { toolCallId: string }) => t.run(input, toolCallId);
  // Built-ins keep their zod schema (the AI SDK validates with it and reports a failing field as a
  // tool error the model reads); MCP tools have only JSON Schema, validated by their server.
  // The framework is an optional peer: loaded when a tool is built, with an error naming it when missing.
  const { jsonSchema, tool } = requirePeer<typeof import("ai")>("ai", "the AI SDK adapter");
  if (t.zodSchema) return tool({ description: t.description, inputSchema: t.zodSchema as never, execute });
  return tool({ description: t.description, inputSchema: jsonSchema(t.jsonSchema as never), execute });
}

/** AI SDK messages as reference messages (`{content, role}`; parts as text/tool_use/tool_result blocks). */
export function toReferenceMessage(m: ModelMessage): Message {
  if (typeof m.content === "string") return { content: m.content, role: m.role };
  const blocks: ContentBlock[] = m.content.map((p): ContentBlock => {
    switch (p.type) {
      case "text":
        return { type: "text", text: p.text };
      case "tool-call":
        return { type: "tool_use", id: p.toolCallId, name: p.toolName, input: p.input };
      case "tool-result":
        return { type: "tool_result", id: p.toolCallId, name: p.toolName, output: p.output };
      default:
        return { ...(p as object), type: p.type } as ContentBlock;
    }
  });
  return { content: blocks, role: m.role };
}

const aiCodec: MessageCodec<ModelMessage> = {
  toReference: toReferenceMessage,
  summary: (text) => ({ role: "user", content: [{ type: "text", text }] }),
  isPinned: (m) => m.role === "system",
  needsPrevious: (m) => m.role === "tool",
};
