import { posix } from "node:path";
import { z } from "zod";
import { WorkspaceError, fromZodError, isWorkspaceError } from "../../errors.js";
import { toWorkspacePath } from "../../paths.js";
import type { Sandbox } from "../../sandbox.js";

export interface ToolResult {
  ok: boolean;
  output: string;
  metadata?: Record<string, unknown>;
}

/**
 * A built-in tool. `execute` validates its input (a bad field is an InvalidArgumentError naming
 * it; a path leaving the workspace is a PathEscapeError) and otherwise reports outcomes, failures
 * included, as a result the model can read: no other error escapes it.
 */
export interface WorkspaceTool {
  name: string;
  description: string;
  inputSchema: z.ZodType;
  /** JSON Schema of the input, for models. */
  jsonSchema: Record<string, unknown>;
  execute(input: unknown): Promise<ToolResult>;
}

export type Track = <T>(fn: () => Promise<T>) => Promise<T>;

export interface ToolContext {
  sandbox: Sandbox;
  track: Track;
}

export const OUTPUT_CAP = 30_000;
export const TRUNCATION_SUFFIX = "\n... (output truncated)";

export function defineTool<S extends z.ZodType>(
  ctx: ToolContext,
  def: { name: string; description: string; inputSchema: S; run: (input: z.output<S>) => Promise<ToolResult> },
): WorkspaceTool {
  return {
    name: def.name,
    description: def.description,
    inputSchema: def.inputSchema,
    jsonSchema: z.toJSONSchema(def.inputSchema, { io: "input" }) as Record<string, unknown>,
    execute: (input) =>
      ctx.track(async () => {
        const parsed = def.inputSchema.safeParse(input ?? {});
        if (!parsed.success) throw fromZodError(def.name, parsed.error);
        try {
          return await def.run(parsed.data);
        } catch (e) {
          if (isWorkspaceError(e, "path_escape")) throw e;
          return errorResult(def.name, e);
        }
      }),
  };
}

/**
 * An error a tool did not turn into a result itself. Our own errors carry messages written for the
 * caller (a field, a reason, no secrets); anything else (a raw errno error names host paths, a bug
 * may say anything) is reduced to the tool and its error code.
 */
export function errorResult(tool: string, e: unknown): ToolResult {
  if (e instanceof WorkspaceError) return { ok: false, output: `Error: ${e.message}`, metadata: { code: e.code } };
  const code = (e as NodeJS.ErrnoException)?.code;
  return { ok: false, output: `Error: ${tool} failed${typeof code === "string" && /^[A-Z0-9_]{1,32}$/.test(code) ? ` (${code})` : ""}` };
}

/** Cuts text at the 30 000-character cap with the reference's suffix. */
export function capOutput(text: string, cap = OUTPUT_CAP): { text: string; truncated: boolean } {
  if (text.length <= cap) return { text, truncated: false };
  return { text: text.slice(0, cap) + TRUNCATION_SUFFIX, truncated: true };
}

/** A path as the agent gives it (absolute under workdir, or workspace-relative) → checked relative + absolute forms. */
export function resolvePath(sandbox: Sandbox, path: string, field: string): { rel: string; abs: string } {
  const rel = toWorkspacePath(sandbox.workdir, path, field);
  return { rel, abs: absPath(sandbox, rel) };
}

export function absPath(sandbox: Sandbox, rel: string): string {
  return rel === "" ? sandbox.workdir : posix.join(sandbox.workdir, rel);
}

export { normalizeNewlines } from "../frontmatter.js";

/** Maximum size Read/Edit load into memory. */
export const MAX_TEXT_BYTES = 32 * 1024 * 1024;

/** Grep/Glob paging: `limit` 0 = all; the suffix appears only when entries were cut off after the page. */
export function paginate(lines: string[], limit: number, offset: number): { text: string; truncated: boolean } {
  const page = lines.slice(offset, limit > 0 ? offset + limit : undefined);
  const truncated = limit > 0 && lines.length - offset > limit;
  let text = page.join("\n");
  if (truncated) text += `\n\n[Showing results with pagination = limit: ${limit}${offset > 0 ? `, offset: ${offset}` : ""}]`;
  return { text, truncated };
}
