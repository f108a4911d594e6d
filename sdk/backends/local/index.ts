// The Local backend: a host folder per workspace, no isolation. Entry point `agent-workspaces/local`.
import type { BackendModule } from "../../contract/module.js";
import { LocalDriver } from "./driver.js";
import { LocalWorkspaceManager } from "./manager.js";
import { LocalBackendSchema, type LocalBackendSpec } from "./schema.js";
import { LocalWorkspace } from "./workspace.js";

export { LocalBackendSchema, type LocalBackendSpec } from "./schema.js";
export { LocalDriver } from "./driver.js";
export { LocalSandbox } from "../../kit/host-sandbox.js";
export { LocalWorkspace, LocalWorkspaceOptionsSchema, type LocalWorkspaceOptions } from "./workspace.js";
export { LocalWorkspaceManager, LocalWorkspaceManagerOptionsSchema, type LocalWorkspaceManagerOptions } from "./manager.js";

export const backend: BackendModule<LocalBackendSpec> = {
  kind: "local",
  schema: LocalBackendSchema,
  createDriver: (spec) => new LocalDriver(spec),
  Workspace: LocalWorkspace,
  Manager: LocalWorkspaceManager,
  defaults: { eviction: "close", sweep: "lazy", destroyDeletesData: false },
  // A host folder needs nothing but the file system.
  canRunHere: () => Promise.resolve(undefined),
};
