import { z } from "zod";
import { fromZodError } from "../../errors.js";

/**
 * The pieces every backend's option schema shares: the workspace id, environment maps and the
 * resource caps. Each backend folder's schema.ts builds on them; backends/spec.ts joins the schemas.
 */
export const WORKSPACE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
export const WorkspaceIdSchema = z
  .string()
  .regex(WORKSPACE_ID_PATTERN, "workspace id must be 1-63 chars of [A-Za-z0-9_.-], starting with a letter or digit");

/** The id, checked by WorkspaceIdSchema; an InvalidArgumentError naming `workspaceId` otherwise. */
export function parseWorkspaceId(id: string): string {
  const r = WorkspaceIdSchema.safeParse(id);
  if (!r.success) throw fromZodError("workspaceId", r.error);
  return r.data;
}

export const EnvSchema = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "env names must be shell identifiers"), z.string());

/**
 * Resource caps, under the same names on every backend that can enforce them. They bound the
 * whole workspace (every process of its sandbox together), not one command.
 */
export const DEFAULT_MAX_PROCESSES = 512;
export const DEFAULT_MEMORY_BYTES = 2 * 1024 ** 3;
export const DEFAULT_CPUS = 2;
/** Tasks alive at once: processes and threads (a Node.js MCP server alone holds about a dozen). */
export const MaxProcessesSchema = z.number().int().min(16).max(4_194_304).default(DEFAULT_MAX_PROCESSES);
/** Memory in bytes (swap included: it cannot stretch the cap); an allocation past it fails or the allocator is killed. */
export const MemoryBytesSchema = z.number().int().min(64 * 1024 ** 2).max(2 ** 50).default(DEFAULT_MEMORY_BYTES);
/** CPU time as a number of cores (a CFS quota: 1.5 = one and a half cores' worth per period). */
export const CpusSchema = z.number().min(0.01).max(1024).default(DEFAULT_CPUS);

