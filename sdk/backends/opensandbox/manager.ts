import type { z } from "zod";
import { fromZodError } from "../../errors.js";
import { ManagerOptionsSchema, type ManagerOptions } from "../../manager/manager.js";
import { SandboxSeedOptionsShape, SandboxWorkspaceManager } from "../../manager/sandbox-manager.js";
import { TeardownSchema } from "../../kit/driver-workspace.js";
import { OpenSandboxBackendSchema, type OpenSandboxBackendSpec } from "./schema.js";
import { OpenSandboxWorkspace } from "./workspace.js";

export const OpenSandboxWorkspaceManagerOptionsSchema = ManagerOptionsSchema.extend({
  ...OpenSandboxBackendSchema.omit({ kind: true }).shape,
  ...SandboxSeedOptionsShape,
  /** What an eviction does to the sandbox; "pause" (default) keeps memory and files for a fast resume. */
  teardown: TeardownSchema.default("pause"),
});
export type OpenSandboxWorkspaceManagerOptions = z.input<typeof OpenSandboxWorkspaceManagerOptionsSchema> & Pick<ManagerOptions, "logger" | "onEvent">;

/**
 * OpenSandbox workspaces served at runtime: one sandbox per workspace id, found by its metadata.
 * Idle workspaces are paused by a background sweeper and resumed on the next request; a restarted
 * service or a second replica finds the same sandbox by listing on the workspace id.
 */
export class OpenSandboxWorkspaceManager extends SandboxWorkspaceManager<OpenSandboxBackendSpec, OpenSandboxWorkspace> {
  constructor(options: OpenSandboxWorkspaceManagerOptions = {}) {
    const { logger, onEvent, ...rest } = options;
    const parsed = OpenSandboxWorkspaceManagerOptionsSchema.safeParse(rest);
    if (!parsed.success) throw fromZodError("options", parsed.error);
    const { teardown, ...managerOptions } = parsed.data;
    super(
      { ...managerOptions, ...(logger ? { logger } : {}), ...(onEvent ? { onEvent } : {}) },
      { kind: "opensandbox", schema: OpenSandboxBackendSchema, eviction: "pause", teardown, Workspace: OpenSandboxWorkspace },
    );
  }
}
