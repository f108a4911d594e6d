import type { Sandbox } from "../../sandbox.js";
import { DriverWorkspace, type DriverWorkspaceOptionsFor } from "../../kit/driver-workspace.js";
import { DaytonaDriver } from "./driver.js";
import { DaytonaBackendSchema, type DaytonaBackendSpec } from "./schema.js";

/** teardown: "pause" (default: stop the sandbox, files kept), "keep" it running, or "destroy" it (files go with it). */
export type DaytonaWorkspaceOptions = DriverWorkspaceOptionsFor<typeof DaytonaBackendSchema>;

/**
 * A workspace in a Daytona sandbox: created from the spec's snapshot or image with our labels,
 * found again by label after a restart (its own, or the Python reference's
 * `agentscope.workspace.id`), stopped on close() and started again by the next initialize().
 * The workspace root is `<work dir>/workspace` inside the sandbox.
 */
export class DaytonaWorkspace extends DriverWorkspace<DaytonaBackendSpec, DaytonaDriver> {
  protected readonly backendLabel = "Daytona";
  #workdir = "";

  constructor(options: DaytonaWorkspaceOptions = {}) {
    super(options, {
      kind: "daytona",
      schema: DaytonaBackendSchema,
      createDriver: (spec) => new DaytonaDriver(spec),
      defaultTeardown: () => "pause",
      destroyDeletesData: true,
    });
  }

  /** The root as processes in the sandbox see it; known once initialized ("" before, as in the reference). */
  get workdir(): string {
    return this.#workdir;
  }

  protected override async provision(): Promise<Sandbox> {
    const sandbox = await super.provision();
    this.#workdir = sandbox.workdir;
    return sandbox;
  }

  /** Stops and archives the sandbox (files to object storage): for a workspace idle for long. */
  async archive(): Promise<void> {
    await this.close({ keepBackend: true });
    await this.driver.archive(this.workspaceId);
  }
}
