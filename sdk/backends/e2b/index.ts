// The E2B backend: an E2B sandbox per workspace. Entry point `agent-workspaces/e2b` (needs the optional peer `e2b`).
import type { BackendModule } from "../../contract/module.js";
import { E2BDriver } from "./driver.js";
import { E2BWorkspaceManager } from "./manager.js";
import { E2BBackendSchema, type E2BBackendSpec } from "./schema.js";
import { E2BWorkspace } from "./workspace.js";

export { E2BBackendSchema, type E2BBackendSpec } from "./schema.js";
export { E2BDriver, MANAGED_KEY, REFERENCE_KEY, snapshotName } from "./driver.js";
export { E2BSandbox } from "./sandbox.js";
export { E2BWorkspace, type E2BWorkspaceOptions } from "./workspace.js";
export { E2BWorkspaceManager, E2BWorkspaceManagerOptionsSchema, type E2BWorkspaceManagerOptions } from "./manager.js";

export const backend: BackendModule<E2BBackendSpec> = {
  kind: "e2b",
  schema: E2BBackendSchema,
  createDriver: (spec) => new E2BDriver(spec),
  Workspace: E2BWorkspace,
  Manager: E2BWorkspaceManager,
  defaults: { eviction: "pause", sweep: "background", destroyDeletesData: false },
  // Without a key nothing can reach E2B; a wrong key or endpoint is an error at create time.
  canRunHere: (spec) => Promise.resolve(spec.apiKey || process.env.E2B_API_KEY ? undefined : "no E2B API key (backend.apiKey or E2B_API_KEY)"),
};
