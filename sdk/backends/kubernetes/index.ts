// The Kubernetes backend: a Pod and a PVC per workspace. Entry point `agent-workspaces/kubernetes` (needs the optional peer `@kubernetes/client-node`).
import { defineBackend, type ManagerOptionsFor } from "../define.js";
import type { DriverWorkspaceOptionsFor } from "../../kit/driver-workspace.js";
import { kubeClients } from "./client.js";
import { K8sDriver } from "./driver.js";
import { WORKDIR } from "./names.js";
import { KubernetesBackendSchema } from "./schema.js";

export { KubernetesBackendSchema, type KubernetesBackendSpec } from "./schema.js";
export { K8sDriver } from "./driver.js";
export { objectName } from "./names.js";
export { K8sSandbox } from "./sandbox.js";

export const backend = defineBackend({
  schema: KubernetesBackendSchema,
  Driver: K8sDriver,
  label: "Kubernetes-based",
  workdir: WORKDIR,
  // close() deletes the Pod and keeps the PVC; with deletePvcOnClose both go.
  defaults: { teardown: (spec) => (spec.deletePvcOnClose ? "destroy" : "pause") },
  // A configuration that cannot even be loaded is the reason; an unreachable API server is an
  // UnavailableError at create time, naming the config it came from.
  canRunHere: (spec) => {
    try {
      kubeClients(spec);
      return Promise.resolve(undefined);
    } catch (e) {
      return Promise.resolve(`no Kubernetes configuration: ${(e as Error).message}`);
    }
  },
});

/** teardown: "pause" (default: delete the Pod, keep the PVC), "keep" the Pod running, or "destroy" (the PVC too with deletePvcOnClose). */
export type K8sWorkspaceOptions = DriverWorkspaceOptionsFor<typeof KubernetesBackendSchema>;

/**
 * A workspace in a Kubernetes Pod with a PVC of its own: the whole tree (MCP registrations and
 * every other piece of workspace state included) lives on the PVC at /workspace, so a new Pod sees
 * everything the old one wrote. A restarted service finds the same Pod and PVC by name. close()
 * deletes the Pod and keeps the PVC by default; the next initialize() makes the Pod again.
 * With `deletePvcOnClose`, close() removes both.
 */
export class K8sWorkspace extends backend.Workspace {}

export const K8sWorkspaceManagerOptionsSchema = backend.ManagerOptionsSchema;
export type K8sWorkspaceManagerOptions = ManagerOptionsFor<typeof KubernetesBackendSchema>;

/**
 * Kubernetes workspaces served at runtime: one Pod and one PVC per workspace id in `namespace`.
 * An idle workspace is paused (its Pod deleted, its PVC kept; with deletePvcOnClose both go) and
 * its Pod made again on the next request; a restarted service or a second replica finds the same
 * objects by name, and two replicas racing one id end with one Pod and one PVC.
 */
export class K8sWorkspaceManager extends backend.managerFor(K8sWorkspace) {}
