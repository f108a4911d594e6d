// The Bubblewrap backend: a host folder mounted into a bwrap sandbox. Entry point `agent-workspaces/bubblewrap`.
import { execFileSync } from "node:child_process";
import type { BackendModule } from "../../contract/module.js";
import { BubblewrapDriver } from "./driver.js";
import { BubblewrapWorkspaceManager } from "./manager.js";
import { BubblewrapBackendSchema, type BubblewrapBackendSpec } from "./schema.js";
import { BubblewrapWorkspace } from "./workspace.js";

export { BubblewrapBackendSchema, type BubblewrapBackendSpec } from "./schema.js";
export { BubblewrapDriver } from "./driver.js";
export { BubblewrapWorkspace, type BubblewrapWorkspaceOptions } from "./workspace.js";
export { BubblewrapWorkspaceManager, BubblewrapWorkspaceManagerOptionsSchema, type BubblewrapWorkspaceManagerOptions } from "./manager.js";

export const backend: BackendModule<BubblewrapBackendSpec> = {
  kind: "bubblewrap",
  schema: BubblewrapBackendSchema,
  createDriver: (spec) => new BubblewrapDriver(spec),
  Workspace: BubblewrapWorkspace,
  Manager: BubblewrapWorkspaceManager,
  defaults: { eviction: "close", sweep: "background", destroyDeletesData: true },
  canRunHere: () => Promise.resolve(onPath("bwrap") ? undefined : "`bwrap` is not installed (apt-get install bubblewrap)"),
};

function onPath(bin: string): boolean {
  try {
    execFileSync("sh", ["-c", `command -v ${bin}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}
