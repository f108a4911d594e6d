import { z } from "zod";

/**
 * MCP server declarations. The API is camelCase; `.mcp` on disk keeps the reference's
 * snake_case JSON byte for byte (see toMcpJson / fromMcpJson) so existing workspaces stay readable.
 */
export const MCP_NAME_PATTERN = /^[a-zA-Z0-9_-]+$/;

export const StdioTransportSchema = z.strictObject({
  type: z.literal("stdio"),
  command: z.string().min(1, "command must not be empty"),
  args: z.array(z.string()).optional(),
  env: z.record(z.string(), z.string()).optional(),
  /** Workspace-relative working directory for the server process. */
  cwd: z.string().optional(),
  encodingErrorHandler: z.enum(["strict", "ignore", "replace"]).optional(),
});

export const HttpTransportSchema = z.strictObject({
  type: z.literal("http"),
  url: z.url({ protocol: /^https?$/, error: "url must be an http(s) URL" }),
  headers: z.record(z.string(), z.string()).optional(),
  /** Seconds. */
  timeout: z.number().positive().optional(),
});

export const McpServerSpecSchema = z
  .strictObject({
    name: z.string().regex(MCP_NAME_PATTERN, "MCP name must match ^[a-zA-Z0-9_-]+$"),
    /** Stateful servers keep one live client per (agent, session); stdio servers must be stateful. */
    stateful: z.boolean().optional(),
    transport: z.discriminatedUnion("type", [StdioTransportSchema, HttpTransportSchema]),
    enableTools: z.array(z.string()).nullable().optional(),
    disableTools: z.array(z.string()).nullable().optional(),
    /** Seconds per tool call. */
    executionTimeout: z.number().positive().nullable().optional(),
    /** Kept for `.mcp` compatibility with AgentScope 2.0.x (`stream_progress`); results are always final here. */
    streamProgress: z.boolean().optional(),
  })
  .superRefine((v, ctx) => {
    if (v.transport.type === "stdio" && v.stateful === false)
      ctx.addIssue({ code: "custom", path: ["stateful"], message: "stdio MCP servers must be stateful" });
    const overlap = (v.enableTools ?? []).filter((t) => (v.disableTools ?? []).includes(t));
    if (overlap.length) ctx.addIssue({ code: "custom", path: ["disableTools"], message: `overlaps enableTools: ${overlap.join(", ")}` });
  });

export type McpServerSpec = z.infer<typeof McpServerSpecSchema>;

/** The reference's MCPClient JSON, key order as it emits it. */
export interface McpClientJson {
  name: string;
  is_stateful: boolean;
  mcp_config:
    | { type: "stdio_mcp"; command: string; args: string[] | null; env: Record<string, string> | null; cwd: string | null; encoding_error_handler: string }
    | { type: "http_mcp"; url: string; headers: Record<string, string> | null; timeout: number | null };
  enable_tools: string[] | null;
  disable_tools: string[] | null;
  execution_timeout: number | null;
  stream_progress: boolean;
}

export function isStateful(spec: McpServerSpec): boolean {
  return spec.stateful ?? spec.transport.type === "stdio";
}

export function toMcpJson(spec: McpServerSpec): McpClientJson {
  const t = spec.transport;
  return {
    name: spec.name,
    is_stateful: isStateful(spec),
    mcp_config:
      t.type === "stdio"
        ? {
            type: "stdio_mcp",
            command: t.command,
            args: t.args ?? null,
            env: t.env ?? null,
            cwd: t.cwd ?? null,
            encoding_error_handler: t.encodingErrorHandler ?? "strict",
          }
        : { type: "http_mcp", url: t.url, headers: t.headers ?? null, timeout: t.timeout ?? 30.0 },
    enable_tools: spec.enableTools ?? null,
    disable_tools: spec.disableTools ?? null,
    execution_timeout: spec.executionTimeout ?? null,
    stream_progress: spec.streamProgress ?? false,
  };
}

/** Parses one `.mcp` entry; throws a zod error naming the bad field. */
export function fromMcpJson(value: unknown): McpServerSpec {
  const raw = z
    .object({
      name: z.string(),
      is_stateful: z.boolean().optional(),
      mcp_config: z.discriminatedUnion("type", [
        z.object({
          type: z.literal("stdio_mcp"),
          command: z.string(),
          args: z.array(z.string()).nullish(),
          env: z.record(z.string(), z.string()).nullish(),
          cwd: z.string().nullish(),
          encoding_error_handler: z.enum(["strict", "ignore", "replace"]).nullish(),
        }),
        z.object({
          type: z.literal("http_mcp"),
          url: z.string(),
          headers: z.record(z.string(), z.string()).nullish(),
          timeout: z.number().nullish(),
        }),
      ]),
      enable_tools: z.array(z.string()).nullish(),
      disable_tools: z.array(z.string()).nullish(),
      execution_timeout: z.number().nullish(),
      stream_progress: z.boolean().nullish(),
    })
    .parse(value);
  const c = raw.mcp_config;
  const strip = <T extends object>(o: T): T => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined)) as T;
  return McpServerSpecSchema.parse(
    strip({
      name: raw.name,
      stateful: raw.is_stateful,
      transport:
        c.type === "stdio_mcp"
          ? strip({ type: "stdio" as const, command: c.command, args: c.args, env: c.env, cwd: c.cwd, encodingErrorHandler: c.encoding_error_handler })
          : strip({ type: "http" as const, url: c.url, headers: c.headers, timeout: c.timeout }),
      enableTools: raw.enable_tools,
      disableTools: raw.disable_tools,
      executionTimeout: raw.execution_timeout,
      streamProgress: raw.stream_progress,
    }),
  );
}
