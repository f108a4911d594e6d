import { DriverWorkspace, type DriverWorkspaceOptionsFor } from "../../kit/driver-workspace.js";
import { BubblewrapBackendSchema, type BubblewrapBackendSpec } from "./schema.js";
import { BubblewrapDriver } from "./driver.js";
import { BWRAP_WORKDIR } from "./sandbox.js";

// Kept importable from here, where they were first defined.
export { TeardownSchema, assertOwner, type Teardown } from "../../kit/driver-workspace.js";

/** teardown defaults to "pause" for a persistent workspace (basedir given), else "destroy" (its files too). */
export type BubblewrapWorkspaceOptions = DriverWorkspaceOptionsFor<typeof BubblewrapBackendSchema>;

/**
 * A workspace in a bubblewrap sandbox: the host folder `<basedir>/<h(user)>/<h(workspaceId)>` is
 * mounted at /workspace, the network is cut unless `network: "host"`, and stdio MCP servers run
 * inside the sandbox through `spawn`. Without `basedir` the folder is temporary and removed on close.
 */
export class BubblewrapWorkspace extends DriverWorkspace<BubblewrapBackendSpec, BubblewrapDriver> {
  protected readonly backendLabel = "bubblewrap-sandboxed";

  constructor(options: BubblewrapWorkspaceOptions = {}) {
    super(options, {
      kind: "bubblewrap",
      schema: BubblewrapBackendSchema,
      createDriver: (spec) => new BubblewrapDriver(spec),
      defaultTeardown: (driver) => (driver.persistent ? "pause" : "destroy"),
      destroyDeletesData: true,
    });
  }

  get workdir(): string {
    return BWRAP_WORKDIR;
  }
}
