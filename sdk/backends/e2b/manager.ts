import type { z } from "zod";
import { fromZodError } from "../../errors.js";
import { ManagerOptionsSchema, type ManagerOptions } from "../../manager/manager.js";
import { SandboxSeedOptionsShape, SandboxWorkspaceManager } from "../../manager/sandbox-manager.js";
import { TeardownSchema } from "../../kit/driver-workspace.js";
import { E2BBackendSchema, type E2BBackendSpec } from "./schema.js";
import { E2BWorkspace } from "./workspace.js";

export const E2BWorkspaceManagerOptionsSchema = ManagerOptionsSchema.extend({
  ...E2BBackendSchema.omit({ kind: true }).shape,
  ...SandboxSeedOptionsShape,
  /** What an eviction does to the sandbox; "pause" (default) keeps memory and files for a fast resume. */
  teardown: TeardownSchema.default("pause"),
});
export type E2BWorkspaceManagerOptions = z.input<typeof E2BWorkspaceManagerOptionsSchema> & Pick<ManagerOptions, "logger" | "onEvent">;

/**
 * E2B workspaces served at runtime: one E2B sandbox per workspace id, tagged with the identity in
 * its metadata. Idle workspaces are paused by a background sweeper (E2B keeps files, memory and
 * processes) and resumed by `connect` on the next request; a restarted service or a second replica
 * finds the same sandbox by listing on its metadata.
 */
export class E2BWorkspaceManager extends SandboxWorkspaceManager<E2BBackendSpec, E2BWorkspace> {
  constructor(options: E2BWorkspaceManagerOptions = {}) {
    const { logger, onEvent, ...rest } = options;
    const parsed = E2BWorkspaceManagerOptionsSchema.safeParse(rest);
    if (!parsed.success) throw fromZodError("options", parsed.error);
    const { teardown, ...managerOptions } = parsed.data;
    super(
      { ...managerOptions, ...(logger ? { logger } : {}), ...(onEvent ? { onEvent } : {}) },
      { kind: "e2b", schema: E2BBackendSchema, eviction: "pause", teardown, Workspace: E2BWorkspace },
    );
  }
}
