// The Daytona backend: a Daytona sandbox per workspace. Entry point `agent-workspaces/daytona` (needs the optional peer `@daytonaio/sdk`).
import type { BackendModule } from "../module.js";
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
  async canRunHere(spec) {
    if (!spec.apiKey && !process.env.DAYTONA_API_KEY && !process.env.DAYTONA_JWT_TOKEN) return "no Daytona credentials: set apiKey or DAYTONA_API_KEY";
    return undefined;
  },
};
