import { DriverWorkspace, type DriverWorkspaceOptionsFor } from "../../kit/driver-workspace.js";
import { E2BBackendSchema, type E2BBackendSpec } from "./schema.js";
import { E2BDriver } from "./driver.js";
import { E2B_WORKDIR } from "./sandbox.js";

/** teardown: "pause" (default: files, memory and processes kept), "keep" running, or "destroy" (files kept in a snapshot). */
export type E2BWorkspaceOptions = DriverWorkspaceOptionsFor<typeof E2BBackendSchema>;

/**
 * A workspace in an E2B sandbox: created from `template` with the identity in its metadata, found
 * again after a restart by listing on that metadata (also a sandbox the Python reference made),
 * resumed by `connect`. close() pauses it by default; the next initialize() resumes it.
 */
export class E2BWorkspace extends DriverWorkspace<E2BBackendSpec, E2BDriver> {
  protected readonly backendLabel = "E2B-sandbox-based";

  constructor(options: E2BWorkspaceOptions = {}) {
    super(options, {
      kind: "e2b",
      schema: E2BBackendSchema,
      createDriver: (spec) => new E2BDriver(spec),
      defaultTeardown: () => "pause",
      destroyDeletesData: false,
    });
  }

  get workdir(): string {
    return E2B_WORKDIR;
  }

  /** The E2B sandbox id behind this workspace, once initialized. */
  get sandboxId(): string | undefined {
    const b = this.isAlive ? (this.getBackend() as { sandboxId?: string }) : undefined;
    return b?.sandboxId;
  }
}
