// The OpenSandbox backend: a sandbox per workspace on an OpenSandbox server. Entry point
// `agent-workspaces/opensandbox` (needs the optional peer `@alibaba-group/opensandbox`).
import { defineBackend, type ManagerOptionsFor } from "../define.js";
import type { DriverWorkspaceOptionsFor } from "../../kit/driver-workspace.js";
import { OpenSandboxDriver } from "./driver.js";
import { OpenSandboxBackendSchema } from "./schema.js";
import { OPENSANDBOX_WORKDIR } from "./sandbox.js";

export { OpenSandboxBackendSchema, type OpenSandboxBackendSpec } from "./schema.js";
export { OpenSandboxDriver } from "./driver.js";
export { OpenSandboxSandbox } from "./sandbox.js";

export const backend = defineBackend({
  schema: OpenSandboxBackendSchema,
  Driver: OpenSandboxDriver,
  label: "OpenSandbox-based",
  workdir: OPENSANDBOX_WORKDIR,
  canRunHere: (spec) => serverAnswers(new OpenSandboxDriver(spec).connection.domain!, spec.protocol),
});

/** teardown: "pause" (default), "keep" running, or "destroy" the sandbox (files under basedir stay). */
export type OpenSandboxWorkspaceOptions = DriverWorkspaceOptionsFor<typeof OpenSandboxBackendSchema>;

/**
 * A workspace in an OpenSandbox sandbox on the server at `domain` (or OPEN_SANDBOX_DOMAIN): the
 * sandbox carries the workspace id, user and agent in its metadata and is found again by listing on
 * them after a restart (sandboxes the Python reference tagged `agentscope.workspace.id` too).
 * close() pauses it by default; the next initialize() resumes it. While in use, the handle renews
 * the sandbox's keep-alive timeout.
 */
export class OpenSandboxWorkspace extends backend.Workspace {}

export const OpenSandboxWorkspaceManagerOptionsSchema = backend.ManagerOptionsSchema;
export type OpenSandboxWorkspaceManagerOptions = ManagerOptionsFor<typeof OpenSandboxBackendSchema>;

/**
 * OpenSandbox workspaces served at runtime: one sandbox per workspace id, found by its metadata.
 * Idle workspaces are paused by a background sweeper and resumed on the next request; a restarted
 * service or a second replica finds the same sandbox by listing on the workspace id.
 */
export class OpenSandboxWorkspaceManager extends backend.managerFor(OpenSandboxWorkspace) {}

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
