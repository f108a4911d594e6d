import { DriverWorkspace, type DriverWorkspaceOptionsFor } from "../../kit/driver-workspace.js";
import { OpenSandboxBackendSchema, type OpenSandboxBackendSpec } from "./schema.js";
import { OpenSandboxDriver } from "./driver.js";
import { OPENSANDBOX_WORKDIR } from "./sandbox.js";

/** teardown: "pause" (default), "keep" running, or "destroy" the sandbox (files under basedir stay). */
export type OpenSandboxWorkspaceOptions = DriverWorkspaceOptionsFor<typeof OpenSandboxBackendSchema>;

/**
 * A workspace in an OpenSandbox sandbox on the server at `domain` (or OPEN_SANDBOX_DOMAIN): the
 * sandbox carries the workspace id, user and agent in its metadata and is found again by listing on
 * them after a restart (sandboxes the Python reference tagged `agentscope.workspace.id` too).
 * close() pauses it by default; the next initialize() resumes it. While in use, the handle renews
 * the sandbox's keep-alive timeout.
 */
export class OpenSandboxWorkspace extends DriverWorkspace<OpenSandboxBackendSpec, OpenSandboxDriver> {
  protected readonly backendLabel = "OpenSandbox-based";

  constructor(options: OpenSandboxWorkspaceOptions = {}) {
    super(options, {
      kind: "opensandbox",
      schema: OpenSandboxBackendSchema,
      createDriver: (spec) => new OpenSandboxDriver(spec),
      defaultTeardown: () => "pause",
      destroyDeletesData: false,
    });
  }

  get workdir(): string {
    return OPENSANDBOX_WORKDIR;
  }
}
