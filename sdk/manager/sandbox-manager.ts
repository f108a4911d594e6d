import type { z } from "zod";
import { ConflictError } from "../errors.js";
import type { BackendModule, Teardown } from "../contract/module.js";
import type { DriverWorkspace, DriverWorkspaceOptions, PersistentAwareDriver } from "../kit/driver-workspace.js";
import { WorkspaceOptionsSchema, type WorkspaceOptions } from "../workspace/workspace.js";
import { WorkspaceManager, type ManagedIdentity, type ManagerOptions, type ManagerOptionsSchema } from "./manager.js";

/** Workspace options a sandbox manager takes once and hands to every workspace it builds (a declared entry's seeds win). */
export const SandboxSeedOptionsShape = WorkspaceOptionsSchema.pick({
  defaultMcps: true,
  skillPaths: true,
  maxLiveStatefulMcps: true,
  instructions: true,
  egress: true,
}).shape;

type SeedOptions = Pick<z.output<typeof WorkspaceOptionsSchema>, "defaultMcps" | "skillPaths" | "maxLiveStatefulMcps" | "instructions" | "egress">;

/** A sandbox manager's parsed options: manager options, seeds, and the backend spec's fields (no kind). */
export type SandboxManagerParsedOptions = z.output<typeof ManagerOptionsSchema> &
  SeedOptions &
  Record<string, unknown> &
  Pick<ManagerOptions, "logger" | "onEvent">;

/** What a sandbox manager is built from: its backend's descriptor, the Workspace class it makes, and what an eviction does. */
export interface SandboxBackend<Spec extends { kind: string }, W> {
  module: BackendModule<Spec, PersistentAwareDriver>;
  /** The teardown of every workspace built, i.e. what an eviction does to its backend object; default the backend's. */
  teardown?: Teardown;
  Workspace: new (options: WorkspaceOptions & DriverWorkspaceOptions & Omit<Spec, "kind">) => W;
}

/**
 * A manager of driver-backed workspaces (the Manager class `defineBackend` builds): one backend spec for
 * runtime ids, the stack's own spec for declared ids, a background sweeper, and warm members
 * nobody claimed destroyed with their files.
 */
export abstract class SandboxWorkspaceManager<
  Spec extends { kind: string },
  W extends DriverWorkspace<Spec, PersistentAwareDriver>,
> extends WorkspaceManager<W> {
  readonly spec: Spec;

  protected constructor(options: SandboxManagerParsedOptions, backend: SandboxBackend<Spec, W>) {
    const {
      logger,
      onEvent,
      isolation,
      ttl,
      sweepInterval,
      prewarm,
      ignoreOtherBackends,
      replicaId,
      leaseRenewInterval,
      defaultMcps,
      skillPaths,
      maxLiveStatefulMcps,
      instructions,
      egress,
      ...backendOptions
    } = options;
    const { module } = backend;
    const spec = module.schema.parse({ kind: module.kind, ...backendOptions });
    const fallback = module.defaults.teardown;
    const teardown = backend.teardown ?? (typeof fallback === "function" ? fallback(spec) : fallback);
    super({
      isolation,
      ttl,
      sweepInterval,
      ignoreOtherBackends,
      ...(replicaId !== undefined ? { replicaId } : {}),
      ...(leaseRenewInterval !== undefined ? { leaseRenewInterval } : {}),
      ...(prewarm ? { prewarm } : {}),
      ...(logger ? { logger } : {}),
      ...(onEvent ? { onEvent } : {}),
      profile: { kind: module.kind, eviction: module.defaults.eviction, sweep: module.defaults.sweep },
      factory: (identity) => {
        const declared = identity.declared;
        const { kind: _kind, ...useSpec } = declaredSpec(identity, module) ?? spec;
        return new backend.Workspace({
          ...useSpec,
          workspaceId: identity.workspaceId,
          userId: identity.userId,
          agentId: identity.agentId,
          managedBy: identity.managedBy,
          ...(declared?.tags ? { tags: declared.tags } : {}),
          expectExisting: Boolean(declared),
          teardown,
          defaultMcps: declared?.defaultMcps ?? defaultMcps,
          skillPaths: declared?.skillPaths ?? skillPaths,
          maxLiveStatefulMcps,
          instructions,
          ...(egress ? { egress } : {}),
          logger: this.logger,
        });
      },
    });
    this.spec = spec;
  }

  /** A warm workspace nobody claimed was never handed out: remove its backend object and its files. */
  protected override async disposePooled(ws: W): Promise<void> {
    await ws.close();
    await ws.driver.destroy(ws.workspaceId, { deleteData: true });
  }
}

/** The stack's spec for a declared id (as the backend reads a declared entry), refused when the stack put it on another backend. */
function declaredSpec<Spec extends { kind: string }>(identity: ManagedIdentity, module: BackendModule<Spec, PersistentAwareDriver>): Spec | undefined {
  const entry = identity.declared;
  if (!entry) return undefined;
  const own = module.declaredSpec?.(entry);
  if (own) return own;
  const kind = module.kind;
  if (entry.backend.kind !== kind) throw new ConflictError(`workspace '${identity.workspaceId}' is declared on backend '${entry.backend.kind}', not ${kind}`);
  return entry.backend as Spec;
}
