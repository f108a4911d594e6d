import type { z } from "zod";
import type { BackendSpec } from "../contract/registry.js";
import { ConflictError } from "../errors.js";
import type { DriverWorkspace, DriverWorkspaceOptions, PersistentAwareDriver, Teardown } from "../kit/driver-workspace.js";
import { WorkspaceOptionsSchema, type WorkspaceOptions } from "../workspace/workspace.js";
import { WorkspaceManager, type ManagedIdentity, type ManagerOptions, type ManagerOptionsSchema } from "./manager.js";

/** Workspace options a sandbox manager takes once and hands to every workspace it builds (a declared entry's seeds win). */
export const SandboxSeedOptionsShape = WorkspaceOptionsSchema.pick({ defaultMcps: true, skillPaths: true, maxLiveStatefulMcps: true, instructions: true, egress: true }).shape;

type SeedOptions = Pick<z.output<typeof WorkspaceOptionsSchema>, "defaultMcps" | "skillPaths" | "maxLiveStatefulMcps" | "instructions" | "egress">;

/** A sandbox manager's parsed options: manager options, seeds, and the backend spec's fields (no kind). */
export type SandboxManagerParsedOptions = z.output<typeof ManagerOptionsSchema> & SeedOptions & Record<string, unknown> & Pick<ManagerOptions, "logger" | "onEvent">;

/** What a sandbox backend fixes for its manager. */
export interface SandboxBackend<Spec extends BackendSpec, W> {
  kind: Spec["kind"];
  schema: z.ZodType<Spec>;
  /** What an idle eviction does (see BackendProfile). */
  eviction: "pause" | "close";
  /** The teardown of every workspace built, i.e. what an eviction does to its backend object. */
  teardown: Teardown;
  Workspace: new (options: WorkspaceOptions & DriverWorkspaceOptions & Omit<Spec, "kind">) => W;
}

/**
 * A manager of driver-backed sandbox workspaces (bubblewrap, Docker): one backend spec for
 * runtime ids, the stack's own spec for declared ids, a background sweeper, and warm members
 * nobody claimed destroyed with their files.
 */
export abstract class SandboxWorkspaceManager<Spec extends BackendSpec, W extends DriverWorkspace<Spec, PersistentAwareDriver>> extends WorkspaceManager<W> {
  readonly spec: Spec;

  protected constructor(options: SandboxManagerParsedOptions, backend: SandboxBackend<Spec, W>) {
    const { logger, onEvent, isolation, ttl, sweepInterval, prewarm, ignoreOtherBackends, replicaId, leaseRenewInterval, defaultMcps, skillPaths, maxLiveStatefulMcps, instructions, egress, ...backendOptions } = options;
    const spec = backend.schema.parse({ kind: backend.kind, ...backendOptions });
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
      profile: { kind: backend.kind, eviction: backend.eviction, sweep: "background" },
      factory: (identity) => {
        const declared = identity.declared;
        const { kind: _kind, ...useSpec } = declaredSpec<Spec>(identity, backend.kind) ?? spec;
        return new backend.Workspace({
          ...useSpec,
          workspaceId: identity.workspaceId,
          userId: identity.userId,
          agentId: identity.agentId,
          managedBy: identity.managedBy,
          ...(declared?.tags ? { tags: declared.tags } : {}),
          expectExisting: Boolean(declared),
          teardown: backend.teardown,
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

/** The stack's spec for a declared id, refused when the stack put it on another backend. */
function declaredSpec<Spec extends BackendSpec>(identity: ManagedIdentity, kind: Spec["kind"]): Spec | undefined {
  const entry = identity.declared;
  if (!entry) return undefined;
  if (entry.backend.kind !== kind) throw new ConflictError(`workspace '${identity.workspaceId}' is declared on backend '${entry.backend.kind}', not ${kind}`);
  return entry.backend as Spec;
}
