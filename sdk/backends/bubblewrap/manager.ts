import { z } from "zod";
import { fromZodError } from "../../errors.js";
import { ManagerOptionsSchema, type ManagerOptions } from "../../manager/manager.js";
import { SandboxSeedOptionsShape, SandboxWorkspaceManager } from "../../manager/sandbox-manager.js";
import { BubblewrapBackendSchema, type BubblewrapBackendSpec } from "./schema.js";
import { BubblewrapWorkspace } from "./workspace.js";

export const BubblewrapWorkspaceManagerOptionsSchema = ManagerOptionsSchema.extend({
  ...BubblewrapBackendSchema.omit({ kind: true }).shape,
  /** Host folder holding `<h(user)>/<h(workspaceId)>` folders; required, so workspaces outlive the process. */
  basedir: z.string().min(1, "basedir must be a host folder path"),
  ...SandboxSeedOptionsShape,
});
export type BubblewrapWorkspaceManagerOptions = z.input<typeof BubblewrapWorkspaceManagerOptionsSchema> & Pick<ManagerOptions, "logger" | "onEvent">;

/**
 * Bubblewrap workspaces served at runtime: the folder `<basedir>/<h(user)>/<h(workspaceId)>` (BLAKE2b-16,
 * 0700, checked not to escape basedir) per workspace id. Nothing runs between commands, so eviction
 * closes (stopping stdio MCP servers) and a background sweeper does it every sweepInterval.
 */
export class BubblewrapWorkspaceManager extends SandboxWorkspaceManager<BubblewrapBackendSpec, BubblewrapWorkspace> {
  constructor(options: BubblewrapWorkspaceManagerOptions) {
    const { logger, onEvent, ...rest } = options ?? ({} as BubblewrapWorkspaceManagerOptions);
    const parsed = BubblewrapWorkspaceManagerOptionsSchema.safeParse(rest);
    if (!parsed.success) throw fromZodError("options", parsed.error);
    super(
      { ...parsed.data, ...(logger ? { logger } : {}), ...(onEvent ? { onEvent } : {}) },
      // A closed workspace keeps its folder: the next request reattaches to it.
      { kind: "bubblewrap", schema: BubblewrapBackendSchema, eviction: "close", teardown: "keep", Workspace: BubblewrapWorkspace },
    );
  }
}
