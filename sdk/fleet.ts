import { z } from "zod";
import { BackendSpecSchema, WorkspaceIdSchema } from "./backends/spec.js";
import { McpServerSpecSchema } from "./workspace/mcp-spec.js";

/**
 * What one declared workspace is: the Pulumi resource's inputs and a manager's fleet entry.
 * Secrets never belong here (credentials come from stack config / secret inputs).
 */
export const WorkspaceSpecSchema = z.strictObject({
  /** Explicit id; default derived from userId/agentId with the PER_AGENT policy. */
  workspaceId: WorkspaceIdSchema.optional(),
  userId: z.string().min(1).optional(),
  agentId: z.string().min(1).optional(),
  backend: BackendSpecSchema,
  /** Host folders holding SKILL.md skills, seeded into skills/.seed. */
  skillPaths: z.array(z.string().min(1)).optional(),
  defaultMcps: z.array(McpServerSpecSchema).optional(),
  tags: z.record(z.string().min(1), z.string()).optional(),
  /** Idle seconds before the runtime manager pauses it. */
  ttlSeconds: z.number().positive().optional(),
});
export type WorkspaceSpec = z.infer<typeof WorkspaceSpecSchema>;
export type WorkspaceSpecInput = z.input<typeof WorkspaceSpecSchema>;

/**
 * The `workspaces` stack output: keyed by workspace id. Written by WorkspaceFleet,
 * read by WorkspaceManager.fromOutputs / fromStack. This schema is the contract.
 */
export const FleetEntrySchema = WorkspaceSpecSchema.extend({
  workspaceId: WorkspaceIdSchema,
  managedBy: z.enum(["pulumi", "runtime"]).default("pulumi"),
  /** Backend location as the driver described it (host path, container name, ...). */
  location: z.record(z.string(), z.string()).default({}),
});
export type FleetEntry = z.infer<typeof FleetEntrySchema>;

export const FleetOutputsSchema = z.record(WorkspaceIdSchema, FleetEntrySchema).superRefine((fleet, ctx) => {
  for (const [key, entry] of Object.entries(fleet))
    if (entry.workspaceId !== key)
      ctx.addIssue({ code: "custom", path: [key, "workspaceId"], message: `must equal its key '${key}'` });
});
export type FleetOutputs = z.infer<typeof FleetOutputsSchema>;

/** The name of the stack output holding FleetOutputs. */
export const FLEET_OUTPUT_NAME = "workspaces";
