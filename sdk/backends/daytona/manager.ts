import type { z } from "zod";
import { fromZodError } from "../../errors.js";
import { ManagerOptionsSchema, type ManagerOptions } from "../../manager/manager.js";
import { SandboxSeedOptionsShape, SandboxWorkspaceManager } from "../../manager/sandbox-manager.js";
import { TeardownSchema } from "../../kit/driver-workspace.js";
import { DaytonaBackendSchema, type DaytonaBackendSpec } from "./schema.js";
import { DaytonaWorkspace } from "./workspace.js";

export const DaytonaWorkspaceManagerOptionsSchema = ManagerOptionsSchema.extend({
  ...DaytonaBackendSchema.omit({ kind: true }).shape,
  ...SandboxSeedOptionsShape,
  /** What an eviction does to the sandbox; "pause" (default) stops it: files kept, billing stopped. */
  teardown: TeardownSchema.default("pause"),
});
export type DaytonaWorkspaceManagerOptions = z.input<typeof DaytonaWorkspaceManagerOptionsSchema> & Pick<ManagerOptions, "logger" | "onEvent">;

/**
 * Daytona workspaces served at runtime: one sandbox per workspace id, found by label. Idle
 * workspaces are stopped by the background sweeper and started on the next request; a restarted
 * service or a second replica finds the same sandbox by its labels.
 */
export class DaytonaWorkspaceManager extends SandboxWorkspaceManager<DaytonaBackendSpec, DaytonaWorkspace> {
  constructor(options: DaytonaWorkspaceManagerOptions = {}) {
    const { logger, onEvent, ...rest } = options;
    const parsed = DaytonaWorkspaceManagerOptionsSchema.safeParse(rest);
    if (!parsed.success) throw fromZodError("options", parsed.error);
    const { teardown, ...managerOptions } = parsed.data;
    super(
      { ...managerOptions, ...(logger ? { logger } : {}), ...(onEvent ? { onEvent } : {}) },
      { kind: "daytona", schema: DaytonaBackendSchema, eviction: "pause", teardown, Workspace: DaytonaWorkspace },
    );
  }
}
