import type { Driver, BackendDescription } from "../sdk/contract/driver.js";
import type { Logger } from "../sdk/logger.js";
import type { McpServerSpec } from "../sdk/workspace/mcp-spec.js";

/**
 * Initializes a provisioned workspace's layout and seeds (skills, default MCP servers) through
 * the shared Workspace facade, over whatever Sandbox the backend's driver connects to. No
 * backend is named here: the driver is the only part that knows one.
 */
export async function initializeWorkspace(
  driver: Driver,
  description: BackendDescription,
  seeds: { skillPaths?: string[] | undefined; defaultMcps?: McpServerSpec[] | undefined },
  logger: Logger,
): Promise<void> {
  // Loaded lazily: the facade pulls in MCP, skills and offload code that check/diff never need.
  const { Workspace } = await import("../sdk/workspace/workspace.js");
  class ProvisionedWorkspace extends Workspace {
    protected readonly backendLabel = description.kind;
    get workdir(): string {
      return description.location.workdir ?? description.location.hostPath ?? "/";
    }
    protected provision() {
      return driver.connect(description.workspaceId, { logger });
    }
  }
  const workspace = new ProvisionedWorkspace({
    workspaceId: description.workspaceId,
    ...(seeds.skillPaths ? { skillPaths: seeds.skillPaths } : {}),
    ...(seeds.defaultMcps ? { defaultMcps: seeds.defaultMcps } : {}),
    logger,
  });
  try {
    await workspace.initialize();
  } finally {
    await workspace.close();
  }
}
