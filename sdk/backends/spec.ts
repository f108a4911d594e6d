import { z } from "zod";
import { BACKEND_SCHEMAS } from "./registry.js";

/**
 * Backend options: the union of every registered backend's schema (each backend folder owns its
 * schema.ts), the single source of truth for workspace constructors, manager options, Pulumi inputs
 * and HTTP bodies. The pieces the schemas share live in shared/schema.ts.
 */
export {
  WORKSPACE_ID_PATTERN,
  WorkspaceIdSchema,
  parseWorkspaceId,
  DEFAULT_MAX_PROCESSES,
  DEFAULT_MEMORY_BYTES,
  DEFAULT_CPUS,
} from "./shared/schema.js";

export const BackendSpecSchema = z.discriminatedUnion("kind", [...BACKEND_SCHEMAS]);

export type BackendSpec = z.infer<typeof BackendSpecSchema>;
export type BackendKind = BackendSpec["kind"];
export type BackendSpecInput = z.input<typeof BackendSpecSchema>;
