import { readFileSync } from "node:fs";
import * as pulumi from "@pulumi/pulumi";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { InvalidArgumentError, fromZodError } from "../sdk/errors.js";
import { WorkspaceSpecSchema, type FleetEntry, type FleetOutputs, type WorkspaceSpec, type WorkspaceSpecInput } from "../sdk/fleet.js";
import { defaultWorkspaceId, issueToFailure } from "./inputs.js";
import { WorkspaceResource } from "./resource.js";

/** A fleet file (YAML or JSON): shared defaults merged under each workspace's own fields. */
export const FleetFileSchema = z.strictObject({
  defaults: z.record(z.string(), z.unknown()).optional(),
  workspaces: z.array(z.record(z.string(), z.unknown())).min(1, "a fleet needs at least one workspace"),
});

export interface WorkspaceFleetArgs {
  /** Workspaces declared in code. */
  workspaces?: WorkspaceSpecInput[];
  /** A YAML/JSON fleet file (`defaults` + `workspaces`); its entries come after `workspaces`. */
  file?: string;
  /** Also delete persistent data when a workspace leaves the fleet or the stack is destroyed. */
  deleteData?: boolean;
  /** Backend credentials for every workspace; stored as a secret. */
  credentials?: pulumi.Input<Record<string, pulumi.Input<string>>>;
}

/**
 * A set of workspaces, one WorkspaceResource each, named by workspace id. `workspaces` is the
 * stack output the runtime manager reads (FleetOutputsSchema, keyed by workspace id).
 */
export class WorkspaceFleet extends pulumi.ComponentResource {
  readonly workspaces: pulumi.Output<FleetOutputs>;
  readonly resources: Record<string, WorkspaceResource>;

  constructor(name: string, args: WorkspaceFleetArgs, opts: pulumi.ComponentResourceOptions = {}) {
    super("agentws:index:WorkspaceFleet", name, {}, opts);
    const specs = [...(args.workspaces ?? []).map((s, i) => parseSpec(s, `workspaces[${i}]`)), ...(args.file ? loadFleetFile(args.file) : [])];
    this.resources = {};
    for (const [i, spec] of specs.entries()) {
      const id = spec.workspaceId ?? defaultWorkspaceId(spec.userId, spec.agentId);
      if (this.resources[id]) throw new Error(`fleet '${name}': workspaces[${i}] repeats workspace id '${id}'; ids must be unique`);
      this.resources[id] = new WorkspaceResource(
        `${name}-${id}`,
        { ...spec, workspaceId: id, deleteData: args.deleteData, credentials: args.credentials },
        { parent: this },
      );
    }
    const entries = Object.values(this.resources).map((r) => fleetEntryOf(r));
    this.workspaces = pulumi.all(entries).apply((list) => Object.fromEntries(list.map((e) => [e.workspaceId, e])));
    this.registerOutputs({ workspaces: this.workspaces });
  }
}

/** One fleet entry from a resource's outputs: the spec fields, never credentials. */
function fleetEntryOf(r: WorkspaceResource): pulumi.Output<FleetEntry> {
  return pulumi
    .output({ workspaceId: r.workspaceId, userId: r.userId, agentId: r.agentId, backend: r.backend, skillPaths: r.skillPaths, defaultMcps: r.defaultMcps, tags: r.tags, ttlSeconds: r.ttlSeconds, location: r.location })
    .apply((o) => {
      const entry: Record<string, unknown> = { ...o, managedBy: "pulumi", location: o.location ?? {} };
      for (const k of Object.keys(entry)) if (entry[k] === undefined || entry[k] === null) delete entry[k];
      return entry as FleetEntry;
    });
}

function parseSpec(value: unknown, field: string): WorkspaceSpec {
  const r = WorkspaceSpecSchema.safeParse(value);
  if (r.success) return r.data;
  const failures = r.error.issues.map((i) => issueToFailure(i));
  const first = failures[0]!;
  const more = failures.length > 1 ? ` (and ${failures.length - 1} more: ${failures.slice(1).map((f) => `${field}.${f.property}`).join(", ")})` : "";
  throw new InvalidArgumentError(`${field}.${first.property}`, `${first.reason.slice(first.property.length + 2)}${more}`);
}

/** Reads and validates a fleet file; errors name the file and the field. */
export function loadFleetFile(path: string): WorkspaceSpec[] {
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(path, "utf8"));
  } catch (e) {
    throw new Error(`fleet file ${path}: ${e instanceof Error ? e.message : String(e)}`);
  }
  const file = FleetFileSchema.safeParse(doc);
  if (!file.success) throw new Error(`fleet file ${path}: ${fromZodError("", file.error).message}`);
  const defaults = file.data.defaults ?? {};
  return file.data.workspaces.map((w, i) => {
    const merged = { ...defaults, ...w };
    try {
      return parseSpec(merged, `workspaces[${i}]`);
    } catch (e) {
      throw new Error(`fleet file ${path}: ${e instanceof Error ? e.message : String(e)}`);
    }
  });
}
