import { realpathSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { fromZodError } from "../errors.js";

/**
 * The pieces every backend's option schema shares: the workspace id, environment maps and the
 * resource caps. Each backend folder's schema.ts builds on them; contract/registry.ts joins the schemas.
 */
export const WORKSPACE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
export const WorkspaceIdSchema = z.string().regex(WORKSPACE_ID_PATTERN, "workspace id must be 1-63 chars of [A-Za-z0-9_.-], starting with a letter or digit");

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
export const MemoryBytesSchema = z
  .number()
  .int()
  .min(64 * 1024 ** 2)
  .max(2 ** 50)
  .default(DEFAULT_MEMORY_BYTES);
/** CPU time as a number of cores (a CFS quota: 1.5 = one and a half cores' worth per period). */
export const CpusSchema = z.number().min(0.01).max(1024).default(DEFAULT_CPUS);

/**
 * What changing a spec field does to the backend object, as the backend's driver can really do it:
 * "update" applies it to the same object (same folder, same container id); "recreate" makes a new
 * object under the same name in place of the old (a container re-created over the same bind
 * mount), prepared before the old one goes; "replace" makes a new workspace object (Pulumi replace).
 */
export type ChangeEffect = "update" | "recreate" | "replace";

/** The workspace a policy is asked about. */
export interface PolicyWorkspace {
  workspaceId: string;
  userId?: string | undefined;
}

/**
 * A backend's declaration of how its spec changes apply, next to its schema (withChangePolicy), so
 * the Pulumi diff, the preview and the CLI classify every backend the same way without naming one.
 */
export interface ChangePolicy<Spec = Record<string, unknown>> {
  /** What a reviewer calls the backend object: "container", "folder". Default "backend object". */
  noun?: string;
  /** Effect of a change per backend field; a field left out replaces the workspace (the safe guess). */
  fields: Partial<Record<Exclude<keyof Spec, "kind">, ChangeEffect>>;
  /** Effect of a change of the workspace's tags; default "update". */
  tags?: ChangeEffect;
  /** Host-path fields, normalised (`~`, trailing slashes, `.`/`..`, symlinked parents) before state and diff. */
  hostPaths?: readonly Exclude<keyof Spec, "kind">[];
  /**
   * Where the workspace's files live (a key compared for equality), or undefined when they live in
   * the backend object itself and go with it (an ephemeral container). Default: undefined.
   */
  dataHome?(spec: Spec, ws: PolicyWorkspace): string | undefined;
  /**
   * The spec fields saying where the files live (what dataHome reads, and where a live object using
   * them would be). A driver made from only
   * these (and the kind) finds the files a destroy left behind and removes them
   * (`destroy(id, { deleteData: true, leftover: true })`); the Pulumi fleet's data ledger keeps them.
   * Backends without it are not tracked there.
   */
  dataFields?: readonly Exclude<keyof Spec, "kind">[];
  /**
   * What names the backend object (a key compared for equality): a replacement with another key is
   * created before the old object is deleted; one with the same key must delete it first.
   * Default: the kind and workspace id (delete first).
   */
  objectHome?(spec: Spec, ws: PolicyWorkspace): string;
}

const changePolicies = new WeakMap<object, ChangePolicy<never>>();

/** Attaches a backend's ChangePolicy to its schema (read back through the registry's changePolicyOf). */
export function withChangePolicy<S extends z.ZodType>(schema: S, policy: ChangePolicy<z.infer<S>>): S {
  changePolicies.set(schema, policy as ChangePolicy<never>);
  return schema;
}

/** The policy attached to a schema; undefined when its backend declared none. */
export function attachedChangePolicy(schema: object): ChangePolicy | undefined {
  return changePolicies.get(schema) as ChangePolicy | undefined;
}

/**
 * A host path as the backend will use it: `~` expanded, made absolute (against the current folder,
 * the project's for Pulumi), `.`/`..` and trailing slashes folded, and the longest existing prefix
 * resolved through symlinks, so two spellings of one folder compare equal. With `resolveLinks`
 * false only the lexical steps run (no file system access).
 */
export function normalizeHostPath(p: string, { resolveLinks = true }: { resolveLinks?: boolean } = {}): string {
  const expanded = p === "~" ? os.homedir() : p.startsWith("~/") ? path.join(os.homedir(), p.slice(2)) : p;
  const absolute = path.resolve(expanded);
  if (!resolveLinks) return absolute;
  const rest: string[] = [];
  let cur = absolute;
  for (let i = 0; i < 256; i++) {
    try {
      return path.join(realpathSync(cur), ...rest.reverse());
    } catch {
      const parent = path.dirname(cur);
      if (parent === cur) break;
      rest.push(path.basename(cur));
      cur = parent;
    }
  }
  return absolute;
}
