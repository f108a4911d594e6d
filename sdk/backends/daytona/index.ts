// The Daytona backend: a Daytona sandbox per workspace. Entry point `agent-workspaces/daytona` (needs the optional peer `@daytonaio/sdk`).
import type { BackendModule } from "../../contract/module.js";
import { DaytonaDriver } from "./driver.js";
import { DaytonaWorkspaceManager } from "./manager.js";
import { DaytonaBackendSchema, type DaytonaBackendSpec } from "./schema.js";
import { DaytonaWorkspace } from "./workspace.js";

export { DaytonaBackendSchema, type DaytonaBackendSpec } from "./schema.js";
export { DaytonaDriver } from "./driver.js";
export { DaytonaWorkspace, type DaytonaWorkspaceOptions } from "./workspace.js";
export { DaytonaWorkspaceManager, DaytonaWorkspaceManagerOptionsSchema, type DaytonaWorkspaceManagerOptions } from "./manager.js";

export const backend: BackendModule<DaytonaBackendSpec> = {
  kind: "daytona",
  schema: DaytonaBackendSchema,
  createDriver: (spec) => new DaytonaDriver(spec),
  Workspace: DaytonaWorkspace,
  Manager: DaytonaWorkspaceManager,
  // Files live in the sandbox: destroying it removes them.
  defaults: { eviction: "pause", sweep: "background", destroyDeletesData: true },
  // Credentials may come from the spec, the environment or the Pulumi provider's stack config:
  // they are checked at the first API call, where a missing or wrong key is `unauthenticated`.
  canRunHere: () => Promise.resolve(undefined),
};
