import { describe, expect, it } from "vitest";
import { K8sDriver } from "../../sdk/backends/kubernetes/driver.js";
import { podManifest, pvcManifest } from "../../sdk/backends/kubernetes/manifests.js";
import { labelValue, objectName, readTags } from "../../sdk/backends/kubernetes/names.js";
import { KubernetesBackendSchema } from "../../sdk/backends/kubernetes/schema.js";

const DNS1123 = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const spec = KubernetesBackendSchema.parse({
  kind: "kubernetes",
  image: "img:1",
  namespace: "agents",
  env: { A: "1" },
  nodeSelector: { pool: "ws" },
  tolerations: [{ key: "k", operator: "Exists" }],
});

describe("Kubernetes names and manifests (no cluster)", () => {
  it("derives a stable DNS-1123 name from any valid workspace id", () => {
    for (const id of ["a", "A_b.C-d", "x".repeat(63), "9-9", "x__", "Z", "a.-_"]) {
      expect(objectName(id)).toMatch(DNS1123);
      expect(objectName(id)).toBe(objectName(id));
    }
    expect(objectName("Abc")).not.toBe(objectName("abc"));
    expect(() => objectName("../x")).toThrow(/workspaceId/);
  });

  it("keeps label values Kubernetes accepts and hashes the others", () => {
    expect(labelValue("u-1.a_b")).toBe("u-1.a_b");
    for (const v of ["someone@example.com", "-x", "x".repeat(64), "a b"]) {
      expect(labelValue(v)).toMatch(/^h-[0-9a-f]{40}$/);
      expect(labelValue(v)).toBe(labelValue(v));
    }
    expect(readTags({ "agent-workspaces/tags": "[1]" })).toEqual({});
    expect(readTags({ "agent-workspaces/tags": '{"a":"b","n":1}' })).toEqual({ a: "b" });
  });

  it("makes a hardened Pod: no token, all capabilities dropped, no escalation, non-root, RuntimeDefault seccomp", () => {
    const pod = podManifest(spec, { workspaceId: "w1", userId: "u", managedBy: "runtime" }, true);
    const p = pod.spec!;
    expect(p.automountServiceAccountToken).toBe(false);
    expect(p.enableServiceLinks).toBe(false);
    expect(p.securityContext).toMatchObject({ runAsUser: 1000, runAsGroup: 1000, seccompProfile: { type: "RuntimeDefault" } });
    expect(p.containers[0]!.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      privileged: false,
      capabilities: { drop: ["ALL"] },
      readOnlyRootFilesystem: false,
      runAsNonRoot: true,
    });
    expect(p.initContainers).toBeUndefined();
    expect(p.nodeSelector).toEqual({ pool: "ws" });
    expect(p.tolerations).toEqual([{ key: "k", operator: "Exists" }]);
    expect(p.containers[0]!.env).toContainEqual({ name: "A", value: "1" });
    expect(p.volumes![0]!.persistentVolumeClaim!.claimName).toBe(objectName("w1"));
    // A fresh volume: one init container, with only CHOWN and FOWNER, hands it to the uid.
    const fresh = podManifest(spec, { workspaceId: "w1", managedBy: "runtime" }, false).spec!.initContainers!;
    expect(fresh).toHaveLength(1);
    expect(fresh[0]!.securityContext!.capabilities).toEqual({ drop: ["ALL"], add: ["CHOWN", "FOWNER"] });
    // runAsUser null keeps the image's user, and needs no init container.
    const asImage = podManifest(
      KubernetesBackendSchema.parse({ kind: "kubernetes", image: "i:1", runAsUser: null }),
      { workspaceId: "w", managedBy: "runtime" },
      false,
    ).spec!;
    expect(asImage.initContainers).toBeUndefined();
    expect(asImage.securityContext!.runAsUser).toBeUndefined();
  });

  it("puts size, class and identity on the PVC", () => {
    const pvc = pvcManifest(
      { ...spec, storageSize: "5Gi", storageClassName: "fast" },
      { workspaceId: "w1", userId: "a@b", managedBy: "pulumi", tags: { t: "v" } },
    );
    expect(pvc.spec).toMatchObject({ accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "5Gi" } }, storageClassName: "fast" });
    expect(pvc.metadata!.annotations).toMatchObject({
      "agent-workspaces/workspace-id": "w1",
      "agent-workspaces/user-id": "a@b",
      "agent-workspaces/managed-by": "pulumi",
    });
    expect(pvc.metadata!.labels).toMatchObject({ "agent-workspaces.managed": "true", "tag.agent-workspaces/t": "v" });
  });

  it("names the field at fault in a bad spec", () => {
    expect(() => new K8sDriver({ image: "i:1", storageSize: "lots" })).toThrow(/storageSize/);
    expect(() => new K8sDriver({ image: "i:1", namespace: "Bad_NS" })).toThrow(/namespace/);
    expect(() => new K8sDriver({ image: "" })).toThrow(/image/);
  });
});
