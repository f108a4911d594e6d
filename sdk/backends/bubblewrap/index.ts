// The Bubblewrap backend: a host folder mounted into a bwrap sandbox. Entry point `agent-workspaces/bubblewrap`.
import { execFileSync } from "node:child_process";
import { defineBackend, type ManagerOptionsFor } from "../define.js";
import type { DriverWorkspaceOptionsFor } from "../../kit/driver-workspace.js";
import { BubblewrapDriver } from "./driver.js";
import { BubblewrapBackendSchema } from "./schema.js";
import { BWRAP_WORKDIR } from "./sandbox.js";

export { BubblewrapBackendSchema, type BubblewrapBackendSpec } from "./schema.js";
export { BubblewrapDriver } from "./driver.js";

export const backend = defineBackend({
  schema: BubblewrapBackendSchema,
  Driver: BubblewrapDriver,
  label: "bubblewrap-sandboxed",
  workdir: BWRAP_WORKDIR,
  // Nothing runs between commands: eviction closes (stopping stdio MCP servers). A persistent
  // workspace (basedir given) keeps its folder on close; a temporary one goes with its files.
  defaults: { eviction: "close", teardown: (spec) => (spec.basedir !== undefined ? "pause" : "destroy"), destroyDeletesData: true },
  canRunHere: () => Promise.resolve(onPath("bwrap") ? undefined : "`bwrap` is not installed (apt-get install bubblewrap)"),
  // A manager's workspaces outlive the process: its basedir is required.
  managerOptions: { require: ["basedir"] },
});

/** teardown defaults to "pause" for a persistent workspace (basedir given), else "destroy" (its files too). */
export type BubblewrapWorkspaceOptions = DriverWorkspaceOptionsFor<typeof BubblewrapBackendSchema>;

/**
 * A workspace in a bubblewrap sandbox: the host folder `<basedir>/<h(user)>/<h(workspaceId)>` is
 * mounted at /workspace, the network is cut unless `network: "host"`, and stdio MCP servers run
 * inside the sandbox through `spawn`. Without `basedir` the folder is temporary and removed on close.
 */
export class BubblewrapWorkspace extends backend.Workspace {}

export const BubblewrapWorkspaceManagerOptionsSchema = backend.ManagerOptionsSchema;
export type BubblewrapWorkspaceManagerOptions = ManagerOptionsFor<typeof BubblewrapBackendSchema, never, "basedir">;

/**
 * Bubblewrap workspaces served at runtime: the folder `<basedir>/<h(user)>/<h(workspaceId)>` (BLAKE2b-16,
 * 0700, checked not to escape basedir) per workspace id. Nothing runs between commands, so eviction
 * closes (stopping stdio MCP servers) and a background sweeper does it every sweepInterval.
 */
export class BubblewrapWorkspaceManager extends backend.managerFor(BubblewrapWorkspace) {}

function onPath(bin: string): boolean {
  try {
    execFileSync("sh", ["-c", `command -v ${bin}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}
