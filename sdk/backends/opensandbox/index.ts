// The OpenSandbox backend: a sandbox per workspace on an OpenSandbox server. Entry point
// `agent-workspaces/opensandbox` (needs the optional peer `@alibaba-group/opensandbox`).
import type { BackendModule } from "../../contract/module.js";
import { OpenSandboxDriver } from "./driver.js";
import { OpenSandboxWorkspaceManager } from "./manager.js";
import { OpenSandboxBackendSchema, type OpenSandboxBackendSpec } from "./schema.js";
import { OpenSandboxWorkspace } from "./workspace.js";

export { OpenSandboxBackendSchema, type OpenSandboxBackendSpec } from "./schema.js";
export { OpenSandboxDriver } from "./driver.js";
export { OpenSandboxSandbox } from "./sandbox.js";
export { OpenSandboxWorkspace, type OpenSandboxWorkspaceOptions } from "./workspace.js";
export { OpenSandboxWorkspaceManager, OpenSandboxWorkspaceManagerOptionsSchema, type OpenSandboxWorkspaceManagerOptions } from "./manager.js";

export const backend: BackendModule<OpenSandboxBackendSpec> = {
  kind: "opensandbox",
  schema: OpenSandboxBackendSchema,
  createDriver: (spec) => new OpenSandboxDriver(spec),
  Workspace: OpenSandboxWorkspace,
  Manager: OpenSandboxWorkspaceManager,
  defaults: { eviction: "pause", sweep: "background", destroyDeletesData: false },
  canRunHere: (spec) => serverAnswers(new OpenSandboxDriver(spec).connection.domain!, spec.protocol),
};

/** Why the server cannot be used from here (it does not answer /health), or undefined when it answers. */
async function serverAnswers(domain: string, protocol: string): Promise<string | undefined> {
  const base = /^https?:\/\//.test(domain) ? domain : `${protocol}://${domain}`;
  try {
    const r = await fetch(`${base.replace(/\/$/, "")}/health`, { signal: AbortSignal.timeout(3000) });
    return r.ok ? undefined : `the OpenSandbox server at ${domain} answered ${r.status} on /health`;
  } catch {
    return `no OpenSandbox server answers at ${domain} (set OPEN_SANDBOX_DOMAIN, or run scripts/opensandbox-server.sh start)`;
  }
}
