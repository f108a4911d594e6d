import * as pulumi from "@pulumi/pulumi";
import type { BackendSpec, BackendSpecInput } from "../sdk/contract/registry.js";
import type { McpServerSpec } from "../sdk/workspace/mcp-spec.js";
import { workspaceProvider } from "./provider.js";
import { hasSecretFields, markSecretLeaves } from "./secret-fields.js";
import { rememberSecret } from "../sdk/util/secret-values.js";

/** Inputs of one workspace: the shared WorkspaceSpec plus provider options. */
export interface WorkspaceResourceArgs {
  /** Explicit id; default derived from userId/agentId (PER_AGENT, or PER_USER without an agent). */
  workspaceId?: pulumi.Input<string>;
  userId?: pulumi.Input<string>;
  agentId?: pulumi.Input<string>;
  backend: pulumi.Input<BackendSpecInput>;
  skillPaths?: pulumi.Input<pulumi.Input<string>[]>;
  defaultMcps?: pulumi.Input<pulumi.Input<McpServerSpec>[]>;
  tags?: pulumi.Input<Record<string, pulumi.Input<string>>>;
  ttlSeconds?: pulumi.Input<number>;
  /** Also delete persistent data (host folder, volume, PVC) when the resource is deleted. Default false. */
  deleteData?: pulumi.Input<boolean>;
  /** Backend credentials; always stored as a Pulumi secret. Prefer stack config `agentws:credentials`. */
  credentials?: pulumi.Input<Record<string, pulumi.Input<string>>>;
}

/** The Pulumi type token: `pulumi-nodejs:dynamic/agentws:Workspace`. */
export const WORKSPACE_MODULE = "agentws";
export const WORKSPACE_TYPE = "Workspace";

/**
 * One agent workspace on any backend, as a Pulumi dynamic resource. The backend object
 * carries the workspace id as a label or metadata, so `refresh` reattaches by it.
 */
export class WorkspaceResource extends pulumi.dynamic.Resource {
  declare readonly workspaceId: pulumi.Output<string>;
  declare readonly userId: pulumi.Output<string | undefined>;
  declare readonly agentId: pulumi.Output<string | undefined>;
  declare readonly backend: pulumi.Output<BackendSpec>;
  declare readonly skillPaths: pulumi.Output<string[] | undefined>;
  declare readonly defaultMcps: pulumi.Output<McpServerSpec[] | undefined>;
  declare readonly tags: pulumi.Output<Record<string, string> | undefined>;
  declare readonly ttlSeconds: pulumi.Output<number | undefined>;
  declare readonly deleteData: pulumi.Output<boolean | undefined>;
  /** Backend kind as the driver reported it. */
  declare readonly kind: pulumi.Output<string>;
  declare readonly managedBy: pulumi.Output<"pulumi">;
  declare readonly state: pulumi.Output<string>;
  /** Where the workspace lives (host path, container name, ...). Plain strings, no secrets. */
  declare readonly location: pulumi.Output<Record<string, string>>;

  constructor(name: string, args: WorkspaceResourceArgs, opts: pulumi.CustomResourceOptions = {}) {
    // Every key is listed, even when undefined, so it is registered as an output. Unknown keys
    // (typos from untyped callers) pass through so check can name them.
    const props: Record<string, unknown> = {
      ...args,
      workspaceId: args.workspaceId,
      userId: args.userId,
      agentId: args.agentId,
      // Env, header and MCP env values become secrets leaf by leaf: previews still name the rest.
      backend: markSecretLeaves("backend", args.backend),
      skillPaths: args.skillPaths,
      defaultMcps: markSecretLeaves("defaultMcps", args.defaultMcps),
      tags: args.tags,
      ttlSeconds: args.ttlSeconds,
      deleteData: args.deleteData,
      credentials: args.credentials === undefined ? undefined : pulumi.secret(rememberCredentials(args.credentials)),
      kind: undefined,
      managedBy: undefined,
      state: undefined,
      location: undefined,
      schemaVersion: undefined,
    };
    // The engine copies each input leaf's secrecy to the output of the same path (an array as a
    // whole); naming defaultMcps here says the same for a provider that echoes it differently.
    const secretOutputs = ["credentials", ...(hasSecretFields({ defaultMcps: args.defaultMcps }) ? ["defaultMcps"] : [])];
    const additionalSecretOutputs = [...(opts.additionalSecretOutputs ?? []), ...secretOutputs];
    super(workspaceProvider, name, props, { ...opts, additionalSecretOutputs }, WORKSPACE_MODULE, WORKSPACE_TYPE);
  }
}

/** Plain credential strings are remembered so engine events can be masked; Outputs pass through. */
function rememberCredentials<T>(credentials: T): T {
  if (credentials && typeof credentials === "object" && !pulumi.Output.isInstance(credentials))
    for (const v of Object.values(credentials)) if (typeof v === "string") rememberSecret(v);
  return credentials;
}
