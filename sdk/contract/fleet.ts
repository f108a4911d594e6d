import { z } from "zod";
import { BackendSpecSchema, WorkspaceIdSchema } from "./registry.js";
import { McpServerSpecSchema } from "../workspace/mcp-spec.js";
import { isObject } from "../util/records.js";

/**
 * What one declared workspace is: the Pulumi resource's inputs and a manager's fleet entry.
 * Secret-bearing values (MCP header and env values, `backend.env` values, `backend.apiKey`: see secretFieldPaths)
 * are Pulumi secrets in state and outputs; backend credentials come from stack config / secret inputs.
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
    if (entry.workspaceId !== key) ctx.addIssue({ code: "custom", path: [key, "workspaceId"], message: `must equal its key '${key}'` });
});
export type FleetOutputs = z.infer<typeof FleetOutputsSchema>;

/** The name of the stack output holding FleetOutputs. */
export const FLEET_OUTPUT_NAME = "workspaces";

/** What secret values read as wherever they are shown: `agentws outputs`, previews, events. */
export const SECRET_MASK = "[secret]";

/**
 * A fleet file's reference to a stack config secret, written in place of a secret-bearing value:
 * `{ secret: "mcpToken" }` reads `<project>:mcpToken` (as `pulumi config set --secret mcpToken`
 * writes it), `{ secret: "ns:key" }` reads another namespace.
 */
export const SecretRefSchema = z.strictObject({
  secret: z.string().regex(/^[A-Za-z0-9_.-]+(:[A-Za-z0-9_./-]+)?$/, "must be a stack config key, `name` or `namespace:name` (letters, digits, _ . -)"),
});
export type SecretRef = z.infer<typeof SecretRefSchema>;

export type SecretPath = (string | number)[];

/**
 * Where a workspace spec holds secrets: every value of `backend.env`, a cloud backend's
 * `backend.apiKey`, and every value of each default MCP server's `transport.headers` and `transport.env`. Works on raw input as well as parsed specs;
 * shapes that do not match are skipped (schema validation reports them).
 */
export function secretFieldPaths(spec: unknown): SecretPath[] {
  const paths: SecretPath[] = [];
  const leaves = (base: SecretPath, map: unknown) => {
    if (isObject(map)) for (const k of Object.keys(map)) paths.push([...base, k]);
  };
  if (!isObject(spec)) return paths;
  if (isObject(spec.backend)) {
    leaves(["backend", "env"], spec.backend.env);
    // A backend's own credential (a cloud backend's apiKey): a secret wherever the spec goes.
    if (spec.backend.apiKey !== undefined) paths.push(["backend", "apiKey"]);
  }
  if (Array.isArray(spec.defaultMcps))
    spec.defaultMcps.forEach((mcp: unknown, i) => {
      if (!isObject(mcp) || !isObject(mcp.transport)) return;
      leaves(["defaultMcps", i, "transport", "headers"], mcp.transport.headers);
      leaves(["defaultMcps", i, "transport", "env"], mcp.transport.env);
    });
  return paths;
}

export function getAtPath(root: unknown, path: SecretPath): unknown {
  let v: unknown = root;
  for (const k of path) v = Array.isArray(v) || isObject(v) ? (v as Record<string | number, unknown>)[k] : undefined;
  return v;
}

/**
 * A copy of `spec` with the value at each path replaced by `value(path, old)`. Only the objects
 * and arrays on those paths are copied; everything else is shared.
 */
export function replaceAtPaths<T>(spec: T, paths: SecretPath[], value: (path: SecretPath, old: unknown) => unknown): T {
  let out: unknown = spec;
  for (const path of paths) out = setIn(out, path, value(path, getAtPath(out, path)));
  return out as T;
}

function setIn(node: unknown, path: SecretPath, value: unknown): unknown {
  if (!path.length) return value;
  const [head, ...rest] = path as [string | number, ...SecretPath];
  if (Array.isArray(node)) {
    const copy = [...node];
    copy[head as number] = setIn(copy[head as number], rest, value);
    return copy;
  }
  if (isObject(node)) return { ...node, [head]: setIn(node[head], rest, value) };
  return node;
}

/** The spec with every secret-bearing value shown as SECRET_MASK: safe to print or log. */
export function maskSecretFields<T>(spec: T): T {
  return replaceAtPaths(spec, secretFieldPaths(spec), () => SECRET_MASK);
}
