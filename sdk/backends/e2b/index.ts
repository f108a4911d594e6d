// The E2B backend: an E2B sandbox per workspace. Entry point `agent-workspaces/e2b` (needs the optional peer `e2b`).
import { defineBackend, type ManagerOptionsFor } from "../define.js";
import type { DriverWorkspaceOptionsFor } from "../../kit/driver-workspace.js";
import { E2BDriver } from "./driver.js";
import { E2BBackendSchema } from "./schema.js";
import { E2B_WORKDIR } from "./sandbox.js";

export { E2BBackendSchema, type E2BBackendSpec } from "./schema.js";
export { E2BDriver, MANAGED_KEY, REFERENCE_KEY, snapshotName } from "./driver.js";
export { E2BSandbox } from "./sandbox.js";

export const backend = defineBackend({
  schema: E2BBackendSchema,
  Driver: E2BDriver,
  label: "E2B-sandbox-based",
  workdir: E2B_WORKDIR,
  // Without a key nothing can reach E2B; a wrong key or endpoint is an error at create time.
  canRunHere: (spec) => Promise.resolve(spec.apiKey || process.env.E2B_API_KEY ? undefined : "no E2B API key (backend.apiKey or E2B_API_KEY)"),
});

/** teardown: "pause" (default: files, memory and processes kept), "keep" running, or "destroy" (files kept in a snapshot). */
export type E2BWorkspaceOptions = DriverWorkspaceOptionsFor<typeof E2BBackendSchema>;

/**
 * A workspace in an E2B sandbox: created from `template` with the identity in its metadata, found
 * again after a restart by listing on that metadata (also a sandbox the Python reference made),
 * resumed by `connect`. close() pauses it by default; the next initialize() resumes it.
 */
export class E2BWorkspace extends backend.Workspace {
  /** The E2B sandbox id behind this workspace, once initialized. */
  get sandboxId(): string | undefined {
    const b = this.isAlive ? (this.getBackend() as { sandboxId?: string }) : undefined;
    return b?.sandboxId;
  }
}

export const E2BWorkspaceManagerOptionsSchema = backend.ManagerOptionsSchema;
export type E2BWorkspaceManagerOptions = ManagerOptionsFor<typeof E2BBackendSchema>;

/**
 * E2B workspaces served at runtime: one E2B sandbox per workspace id, tagged with the identity in
 * its metadata. Idle workspaces are paused by a background sweeper (E2B keeps files, memory and
 * processes) and resumed by `connect` on the next request; a restarted service or a second replica
 * finds the same sandbox by listing on its metadata.
 */
export class E2BWorkspaceManager extends backend.managerFor(E2BWorkspace) {}
