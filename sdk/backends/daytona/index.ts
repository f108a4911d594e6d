// The Daytona backend: a Daytona sandbox per workspace. Entry point `agent-workspaces/daytona` (needs the optional peer `@daytonaio/sdk`).
import { defineBackend, type ManagerOptionsFor } from "../define.js";
import type { DriverWorkspaceOptionsFor } from "../../kit/driver-workspace.js";
import { DaytonaDriver } from "./driver.js";
import { DaytonaBackendSchema } from "./schema.js";

export { DaytonaBackendSchema, type DaytonaBackendSpec } from "./schema.js";
export { DaytonaDriver } from "./driver.js";

export const backend = defineBackend({
  schema: DaytonaBackendSchema,
  Driver: DaytonaDriver,
  label: "Daytona",
  // The root is `<work dir>/workspace` inside the sandbox: the sandbox tells it once initialized.
  // Files live in the sandbox: destroying it removes them.
  defaults: { destroyDeletesData: true },
  // No canRunHere: credentials may come from the spec, the environment or the Pulumi provider's stack
  // config; they are checked at the first API call, where a missing or wrong key is `unauthenticated`.
});

/** teardown: "pause" (default: stop the sandbox, files kept), "keep" it running, or "destroy" it (files go with it). */
export type DaytonaWorkspaceOptions = DriverWorkspaceOptionsFor<typeof DaytonaBackendSchema>;

/**
 * A workspace in a Daytona sandbox: created from the spec's snapshot or image with our labels,
 * found again by label after a restart (its own, or the Python reference's
 * `agentscope.workspace.id`), stopped on close() and started again by the next initialize().
 * The workspace root is `<work dir>/workspace` inside the sandbox ("" before initialize, as in the reference).
 */
export class DaytonaWorkspace extends backend.Workspace {
  /** Stops and archives the sandbox (files to object storage): for a workspace idle for long. */
  async archive(): Promise<void> {
    await this.close({ keepBackend: true });
    await this.driver.archive(this.workspaceId);
  }
}

export const DaytonaWorkspaceManagerOptionsSchema = backend.ManagerOptionsSchema;
export type DaytonaWorkspaceManagerOptions = ManagerOptionsFor<typeof DaytonaBackendSchema>;

/**
 * Daytona workspaces served at runtime: one sandbox per workspace id, found by label. Idle
 * workspaces are stopped by the background sweeper and started on the next request; a restarted
 * service or a second replica finds the same sandbox by its labels.
 */
export class DaytonaWorkspaceManager extends backend.managerFor(DaytonaWorkspace) {}
