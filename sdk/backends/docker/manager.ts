import type { z } from "zod";
import { fromZodError } from "../../errors.js";
import { ManagerOptionsSchema, type ManagerOptions } from "../../manager/manager.js";
import { SandboxSeedOptionsShape, SandboxWorkspaceManager } from "../../manager/sandbox-manager.js";
import { TeardownSchema } from "../../kit/driver-workspace.js";
import { DockerBackendSchema, type DockerBackendSpec } from "./schema.js";
import { DockerWorkspace } from "./workspace.js";

export const DockerWorkspaceManagerOptionsSchema = ManagerOptionsSchema.extend({
  ...DockerBackendSchema.omit({ kind: true }).shape,
  ...SandboxSeedOptionsShape,
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
export class DockerWorkspaceManager extends SandboxWorkspaceManager<DockerBackendSpec, DockerWorkspace> {
  constructor(options: DockerWorkspaceManagerOptions = {}) {
    const { logger, onEvent, ...rest } = options;
    const parsed = DockerWorkspaceManagerOptionsSchema.safeParse(rest);
    if (!parsed.success) throw fromZodError("options", parsed.error);
    const { teardown, ...managerOptions } = parsed.data;
    super(
      { ...managerOptions, ...(logger ? { logger } : {}), ...(onEvent ? { onEvent } : {}) },
      { kind: "docker", schema: DockerBackendSchema, eviction: "pause", teardown, Workspace: DockerWorkspace },
    );
  }
}
