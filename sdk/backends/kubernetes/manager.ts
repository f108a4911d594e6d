import type { z } from "zod";
import { fromZodError } from "../../errors.js";
import { ManagerOptionsSchema, type ManagerOptions } from "../../manager/manager.js";
import { SandboxSeedOptionsShape, SandboxWorkspaceManager } from "../../manager/sandbox-manager.js";
import { KubernetesBackendSchema, type KubernetesBackendSpec } from "./schema.js";
import { K8sWorkspace } from "./workspace.js";

export const K8sWorkspaceManagerOptionsSchema = ManagerOptionsSchema.extend({
  ...KubernetesBackendSchema.omit({ kind: true }).shape,
  ...SandboxSeedOptionsShape,
});
export type K8sWorkspaceManagerOptions = z.input<typeof K8sWorkspaceManagerOptionsSchema> & Pick<ManagerOptions, "logger" | "onEvent">;

/**
 * Kubernetes workspaces served at runtime: one Pod and one PVC per workspace id in `namespace`.
 * An idle workspace is paused (its Pod deleted, its PVC kept; with deletePvcOnClose both go) and
 * its Pod made again on the next request; a restarted service or a second replica finds the same
 * objects by name, and two replicas racing one id end with one Pod and one PVC.
 */
export class K8sWorkspaceManager extends SandboxWorkspaceManager<KubernetesBackendSpec, K8sWorkspace> {
  constructor(options: K8sWorkspaceManagerOptions) {
    const { logger, onEvent, ...rest } = options;
    const parsed = K8sWorkspaceManagerOptionsSchema.safeParse(rest);
    if (!parsed.success) throw fromZodError("options", parsed.error);
    const teardown = parsed.data.deletePvcOnClose ? "destroy" : "pause";
    super(
      { ...parsed.data, ...(logger ? { logger } : {}), ...(onEvent ? { onEvent } : {}) },
      { kind: "kubernetes", schema: KubernetesBackendSchema, eviction: "pause", teardown, Workspace: K8sWorkspace },
    );
  }
}
