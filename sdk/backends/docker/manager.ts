import { z } from "zod";
import { ConflictError, fromZodError } from "../../errors.js";
import { ManagerOptionsSchema, WorkspaceManager, type ManagedIdentity, type ManagerOptions } from "../../manager/manager.js";
import { WorkspaceOptionsSchema } from "../../workspace/workspace.js";
import { TeardownSchema } from "../bubblewrap/workspace.js";
import { DockerBackendSchema, type DockerBackendSpec } from "../spec.js";
import { DockerWorkspace } from "./workspace.js";

export const DockerWorkspaceManagerOptionsSchema = ManagerOptionsSchema.extend({
  ...DockerBackendSchema.omit({ kind: true }).shape,
  ...WorkspaceOptionsSchema.pick({ defaultMcps: true, skillPaths: true, maxLiveStatefulMcps: true, instructions: true }).shape,
  /** What an eviction does to the container; "pause" (default) keeps memory and files for a fast resume. */
  teardown: TeardownSchema.default("pause"),
});
export type DockerWorkspaceManagerOptions = z.input<typeof DockerWorkspaceManagerOptionsSchema> & Pick<ManagerOptions, "logger" | "onEvent">;

/**
 * Docker workspaces served at runtime: one container per workspace id (`agentws-<id>`), its files in
 * `<basedir>/<workspaceId>` (per id, so sessions or agents never share a folder by accident).
 * Idle workspaces are paused by a background sweeper and unpaused on the next request; a restarted
 * service or a second replica finds the same container by name.
 */
export class DockerWorkspaceManager extends WorkspaceManager<DockerWorkspace> {
  readonly spec: DockerBackendSpec;

  constructor(options: DockerWorkspaceManagerOptions = {}) {
    const { logger, onEvent, ...rest } = options;
    const parsed = DockerWorkspaceManagerOptionsSchema.safeParse(rest);
    if (!parsed.success) throw fromZodError("options", parsed.error);
    const { isolation, ttl, sweepInterval, prewarm, ignoreOtherBackends, defaultMcps, skillPaths, maxLiveStatefulMcps, instructions, teardown, ...backend } = parsed.data;
    const spec = DockerBackendSchema.parse({ kind: "docker", ...backend });
    super({
      isolation,
      ttl,
      sweepInterval,
      ignoreOtherBackends,
      ...(prewarm ? { prewarm } : {}),
      ...(logger ? { logger } : {}),
      ...(onEvent ? { onEvent } : {}),
      profile: { kind: "docker", eviction: "pause", sweep: "background" },
      factory: (identity) => {
        const declared = identity.declared;
        const { kind: _kind, ...useSpec } = declaredSpec(identity) ?? spec;
        return new DockerWorkspace({
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
          logger: this.logger,
        });
      },
    });
    this.spec = spec;
  }

  /** A warm container nobody claimed was never handed out: remove it and its folder. */
  protected override async disposePooled(ws: DockerWorkspace): Promise<void> {
    await ws.close();
    await ws.driver.destroy(ws.workspaceId, { deleteData: true });
  }
}

function declaredSpec(identity: ManagedIdentity): DockerBackendSpec | undefined {
  const entry = identity.declared;
  if (!entry) return undefined;
  if (entry.backend.kind !== "docker") throw new ConflictError(`workspace '${identity.workspaceId}' is declared on backend '${entry.backend.kind}', not docker`);
  return entry.backend;
}
