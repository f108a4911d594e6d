import { DriverWorkspace, type DriverWorkspaceOptionsFor } from "../../kit/driver-workspace.js";
import { K8sDriver } from "./driver.js";
import { WORKDIR } from "./names.js";
import { KubernetesBackendSchema, type KubernetesBackendSpec } from "./schema.js";

/** teardown: "pause" (default: delete the Pod, keep the PVC), "keep" the Pod running, or "destroy" (the PVC too with deletePvcOnClose). */
export type K8sWorkspaceOptions = DriverWorkspaceOptionsFor<typeof KubernetesBackendSchema>;

/**
 * A workspace in a Kubernetes Pod with a PVC of its own: the whole tree (MCP registrations and
 * every other piece of workspace state included) lives on the PVC at /workspace, so a new Pod sees
 * everything the old one wrote. A restarted service finds the same Pod and PVC by name. close()
 * deletes the Pod and keeps the PVC by default; the next initialize() makes the Pod again.
 * With `deletePvcOnClose`, close() removes both.
 */
export class K8sWorkspace extends DriverWorkspace<KubernetesBackendSpec, K8sDriver> {
  protected readonly backendLabel = "Kubernetes-based";

  constructor(options: K8sWorkspaceOptions) {
    super(options, {
      kind: "kubernetes",
      schema: KubernetesBackendSchema,
      createDriver: (spec) => new K8sDriver(spec),
      defaultTeardown: (driver) => (driver.spec.deletePvcOnClose ? "destroy" : "pause"),
      destroyDeletesData: false,
    });
  }

  get workdir(): string {
    return WORKDIR;
  }
}
