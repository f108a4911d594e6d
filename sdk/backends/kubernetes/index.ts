// The Kubernetes backend: a Pod and a PVC per workspace. Entry point `agent-workspaces/kubernetes` (needs the optional peer `@kubernetes/client-node`).
import type { BackendModule } from "../../contract/module.js";
import { kubeClients } from "./client.js";
import { K8sDriver } from "./driver.js";
import { K8sWorkspaceManager } from "./manager.js";
import { KubernetesBackendSchema, type KubernetesBackendSpec } from "./schema.js";
import { K8sWorkspace } from "./workspace.js";

export { KubernetesBackendSchema, type KubernetesBackendSpec } from "./schema.js";
export { K8sDriver } from "./driver.js";
export { objectName } from "./names.js";
export { K8sSandbox } from "./sandbox.js";
export { K8sWorkspace, type K8sWorkspaceOptions } from "./workspace.js";
export { K8sWorkspaceManager, K8sWorkspaceManagerOptionsSchema, type K8sWorkspaceManagerOptions } from "./manager.js";

export const backend: BackendModule<KubernetesBackendSpec> = {
  kind: "kubernetes",
  schema: KubernetesBackendSchema,
  createDriver: (spec) => new K8sDriver(spec),
  Workspace: K8sWorkspace,
  Manager: K8sWorkspaceManager,
  defaults: { eviction: "pause", sweep: "background", destroyDeletesData: false },
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
};
