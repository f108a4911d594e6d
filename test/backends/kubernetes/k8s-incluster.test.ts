import { promises as fs } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it, vi } from "vitest";
import { objectName } from "../../../sdk/backends/kubernetes/names.js";
import { uniqueId } from "../../contract/fixture.js";
import { k8sCluster, objectsFor } from "../../support/k8s-cluster.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const cluster = await k8sCluster();
vi.setConfig({ testTimeout: 300_000 });

/**
 * The manager run inside a Pod of the cluster, with a ServiceAccount whose Role allows only Pods,
 * PVCs and exec in its namespace, provisions a workspace. The Pod runs this checkout's code with the
 * host's Node (hostPath mounts, read-only) and reaches the API server on the node's loopback
 * (hostNetwork; KUBERNETES_SERVICE_HOST points there since this cluster has no kube-proxy).
 */
describe.skipIf(!cluster?.own)("Kubernetes in-cluster configuration (ServiceAccount + Role)", () => {
  const c = cluster!;
  const ns = c.namespace;
  const sa = "agentws-manager";
  const pod = `agentws-incluster-${process.pid}`;
  const workspaceId = uniqueId("kin");
  afterAll(async () => {
    await c.core.deleteNamespacedPod({ name: pod, namespace: ns, gracePeriodSeconds: 0 }).catch(() => undefined);
  });

  it("provisions, uses and removes a workspace with only Pods, PVCs and exec allowed", async () => {
    const { RbacAuthorizationV1Api } = await import("@kubernetes/client-node");
    const rbac = c.kc.makeApiClient(RbacAuthorizationV1Api);
    const ignore409 = (e: { code?: number }) => {
      if (e.code !== 409) throw e;
    };
    await c.core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: sa } } }).catch(ignore409);
    await rbac
      .createNamespacedRole({
        namespace: ns,
        body: {
          metadata: { name: sa },
          rules: [
            { apiGroups: [""], resources: ["pods", "persistentvolumeclaims"], verbs: ["get", "list", "watch", "create", "delete", "patch", "update"] },
            { apiGroups: [""], resources: ["pods/exec"], verbs: ["create", "get"] },
          ],
        },
      })
      .catch(ignore409);
    await rbac
      .createNamespacedRoleBinding({
        namespace: ns,
        body: {
          metadata: { name: sa },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: sa },
          subjects: [{ kind: "ServiceAccount", name: sa, namespace: ns }],
        },
      })
      .catch(ignore409);
    const modules = await fs.realpath(path.join(ROOT, "node_modules"));
    const cfg = JSON.stringify({ image: c.image, namespace: ns, workspaceId });
    await c.core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: pod },
        spec: {
          serviceAccountName: sa,
          hostNetwork: true,
          restartPolicy: "Never",
          containers: [
            {
              name: "manager",
              image: c.image,
              imagePullPolicy: "IfNotPresent",
              workingDir: ROOT,
              command: ["/opt/host-node", "--import", "tsx", "test/support/k8s-incluster.ts", cfg],
              env: [
                { name: "KUBERNETES_SERVICE_HOST", value: "127.0.0.1" },
                { name: "KUBERNETES_SERVICE_PORT", value: "6443" },
                { name: "HOME", value: "/tmp" },
              ],
              volumeMounts: [
                { name: "repo", mountPath: ROOT, readOnly: true },
                { name: "modules", mountPath: modules, readOnly: true },
                { name: "node", mountPath: "/opt/host-node", readOnly: true },
              ],
            },
          ],
          volumes: [
            { name: "repo", hostPath: { path: ROOT, type: "Directory" } },
            { name: "modules", hostPath: { path: modules, type: "Directory" } },
            { name: "node", hostPath: { path: process.execPath, type: "File" } },
          ],
        },
      },
    });
    // The fault suite may restart the API server beside this file: a lost connection is polled through.
    const patient = async <T>(call: () => Promise<T>): Promise<T> => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await call();
        } catch (e) {
          if (attempt >= 60 || !/ECONNRESET|ECONNREFUSED|socket hang up|EPIPE/.test(String((e as Error).message))) throw e;
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    };
    let phase = "";
    for (let i = 0; i < 1200 && phase !== "Succeeded" && phase !== "Failed"; i++) {
      await new Promise((r) => setTimeout(r, 250));
      phase = (await patient(() => c.core.readNamespacedPod({ name: pod, namespace: ns }))).status?.phase ?? "";
    }
    const log = await patient(() => c.core.readNamespacedPodLog({ name: pod, namespace: ns, container: "manager" }));
    expect(phase, log).toBe("Succeeded");
    const line = JSON.parse(String(log).trim().split("\n").pop()!) as Record<string, unknown>;
    expect(line).toMatchObject({ ok: true, config: "inCluster", secretsForbidden: true, read: "hello from a pod", exec: "42" });
    // deletePvcOnClose: the workspace left nothing behind.
    expect(await objectsFor(c, workspaceId)).toEqual({ pods: [], pvcs: [] });
    expect(objectName(workspaceId)).toMatch(/^ws-/);
  });
});
