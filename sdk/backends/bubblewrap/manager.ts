import { z } from "zod";
import { ConflictError, fromZodError } from "../../errors.js";
import { ManagerOptionsSchema, WorkspaceManager, type ManagedIdentity, type ManagerOptions } from "../../manager/manager.js";
import { WorkspaceOptionsSchema } from "../../workspace/workspace.js";
import { BubblewrapBackendSchema, type BubblewrapBackendSpec } from "../spec.js";
import { BubblewrapWorkspace } from "./workspace.js";

export const BubblewrapWorkspaceManagerOptionsSchema = ManagerOptionsSchema.extend({
  ...BubblewrapBackendSchema.omit({ kind: true }).shape,
  /** Host folder holding `<h(user)>/<h(workspaceId)>` folders; required, so workspaces outlive the process. */
  basedir: z.string().min(1, "basedir must be a host folder path"),
  ...WorkspaceOptionsSchema.pick({ defaultMcps: true, skillPaths: true, maxLiveStatefulMcps: true, instructions: true }).shape,
});
export type BubblewrapWorkspaceManagerOptions = z.input<typeof BubblewrapWorkspaceManagerOptionsSchema> & Pick<ManagerOptions, "logger" | "onEvent">;

/**
 * Bubblewrap workspaces served at runtime: the folder `<basedir>/<h(user)>/<h(workspaceId)>` (BLAKE2b-16,
 * 0700, checked not to escape basedir) per workspace id. Nothing runs between commands, so eviction
 * closes (stopping stdio MCP servers) and a background sweeper does it every sweepInterval.
 */
export class BubblewrapWorkspaceManager extends WorkspaceManager<BubblewrapWorkspace> {
  readonly spec: BubblewrapBackendSpec;

  constructor(options: BubblewrapWorkspaceManagerOptions) {
    const { logger, onEvent, ...rest } = options ?? ({} as BubblewrapWorkspaceManagerOptions);
    const parsed = BubblewrapWorkspaceManagerOptionsSchema.safeParse(rest);
    if (!parsed.success) throw fromZodError("options", parsed.error);
    const { isolation, ttl, sweepInterval, prewarm, ignoreOtherBackends, defaultMcps, skillPaths, maxLiveStatefulMcps, instructions, ...backend } = parsed.data;
    const spec = BubblewrapBackendSchema.parse({ kind: "bubblewrap", ...backend });
    super({
      isolation,
      ttl,
      sweepInterval,
      ignoreOtherBackends,
      ...(prewarm ? { prewarm } : {}),
      ...(logger ? { logger } : {}),
      ...(onEvent ? { onEvent } : {}),
      profile: { kind: "bubblewrap", eviction: "close", sweep: "background" },
      factory: (identity) => {
        const declared = identity.declared;
        const { kind: _kind, ...useSpec } = declaredSpec(identity) ?? spec;
        return new BubblewrapWorkspace({
          ...useSpec,
          workspaceId: identity.workspaceId,
          userId: identity.userId,
          agentId: identity.agentId,
          managedBy: identity.managedBy,
          ...(declared?.tags ? { tags: declared.tags } : {}),
          expectExisting: Boolean(declared),
          teardown: "keep",
          defaultMcps: declared?.defaultMcps ?? defaultMcps,
          skillPaths: declared?.skillPaths ?? skillPaths,
          maxLiveStatefulMcps,
          instructions,
          logger: this.logger,
        });
      },
    });
    this.spec = spec;
  }

  /** A warm folder nobody claimed was never handed out: remove it. */
  protected override async disposePooled(ws: BubblewrapWorkspace): Promise<void> {
    await ws.close();
    await ws.driver.destroy(ws.workspaceId, { deleteData: true });
  }
}

function declaredSpec(identity: ManagedIdentity): BubblewrapBackendSpec | undefined {
  const entry = identity.declared;
  if (!entry) return undefined;
  if (entry.backend.kind !== "bubblewrap") throw new ConflictError(`workspace '${identity.workspaceId}' is declared on backend '${entry.backend.kind}', not bubblewrap`);
  return entry.backend;
}
