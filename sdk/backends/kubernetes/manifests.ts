import type { V1PersistentVolumeClaim, V1Pod } from "@kubernetes/client-node";
import { ANNOTATIONS, CONTAINER, WORKDIR, identityAnnotations, identityLabels, objectName } from "./names.js";
import type { KubernetesBackendSpec } from "./schema.js";

export interface ManifestIdentity {
  workspaceId: string;
  userId?: string | undefined;
  agentId?: string | undefined;
  managedBy: string;
  tags?: Record<string, string> | undefined;
}

/**
 * PID 1 of the workspace container: idles, and exits at once on TERM so a pause (Pod deletion)
 * does not wait out the grace period (a shell as PID 1 ignores signals it does not trap).
 */
export const IDLE_COMMAND = ["/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 86400 & wait $!; done"];
/** Seconds a deleted Pod gets to stop (the idle command stops at once; the runner's commands get killed). */
export const GRACE_SECONDS = 2;

/** The workspace's PVC: its annotations are the workspace's durable record. */
export function pvcManifest(spec: KubernetesBackendSpec, identity: ManifestIdentity): V1PersistentVolumeClaim {
  const name = objectName(identity.workspaceId);
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name,
      namespace: spec.namespace,
      labels: identityLabels(identity, identity.tags),
      annotations: identityAnnotations(identity, identity.tags),
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: spec.storageSize } },
      ...(spec.storageClassName ? { storageClassName: spec.storageClassName } : {}),
    },
  };
}

/**
 * The workspace's Pod, hardened: no ServiceAccount token, no service links, every capability
 * dropped, no privilege escalation, RuntimeDefault seccomp, a non-root uid (see the schema). When
 * the volume is not yet the uid's (`volumeOwned` false), an init container holding only CHOWN and
 * FOWNER hands its root over once; later Pods skip it.
 */
export function podManifest(spec: KubernetesBackendSpec, identity: ManifestIdentity, volumeOwned: boolean): V1Pod {
  const name = objectName(identity.workspaceId);
  const uid = spec.runAsUser;
  const env = [{ name: "HOME", value: "/tmp" }, ...Object.entries(spec.env ?? {}).map(([k, v]) => ({ name: k, value: v }))];
  const dropAll = { allowPrivilegeEscalation: false, privileged: false, capabilities: { drop: ["ALL"] } };
  const mounts = [
    { name: "workspace", mountPath: WORKDIR },
    { name: "tmp", mountPath: "/tmp" },
  ];
  const initContainers =
    uid !== null && !volumeOwned
      ? [
          {
            name: "volume-owner",
            image: spec.image,
            imagePullPolicy: spec.imagePullPolicy,
            command: ["/bin/sh", "-c", `[ "$(stat -c %u ${WORKDIR})" = "${uid}" ] || { chown ${uid}:${uid} ${WORKDIR} && chmod 0750 ${WORKDIR}; }`],
            securityContext: { ...dropAll, runAsUser: 0, runAsNonRoot: false, capabilities: { drop: ["ALL"], add: ["CHOWN", "FOWNER"] } },
            resources: { limits: { cpu: "100m", memory: "64Mi" }, requests: { cpu: "10m", memory: "16Mi" } },
            volumeMounts: [mounts[0]!],
          },
        ]
      : undefined;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: spec.namespace,
      labels: identityLabels(identity, identity.tags),
      annotations: { [ANNOTATIONS.workspaceId]: identity.workspaceId },
    },
    spec: {
      automountServiceAccountToken: spec.automountServiceAccountToken,
      enableServiceLinks: false,
      restartPolicy: "Always",
      terminationGracePeriodSeconds: GRACE_SECONDS,
      securityContext: {
        seccompProfile: { type: "RuntimeDefault" },
        ...(uid !== null ? { runAsUser: uid, runAsGroup: uid, fsGroup: uid } : {}),
      },
      ...(spec.nodeSelector ? { nodeSelector: spec.nodeSelector } : {}),
      ...(spec.tolerations ? { tolerations: spec.tolerations } : {}),
      ...(initContainers ? { initContainers } : {}),
      containers: [
        {
          name: CONTAINER,
          image: spec.image,
          imagePullPolicy: spec.imagePullPolicy,
          command: IDLE_COMMAND,
          workingDir: WORKDIR,
          env,
          resources: { requests: { ...spec.requests }, limits: { ...spec.limits } },
          securityContext: { ...dropAll, readOnlyRootFilesystem: spec.readOnlyRootFilesystem, ...(uid !== null ? { runAsNonRoot: true } : {}) },
          volumeMounts: mounts,
        },
      ],
      volumes: [
        { name: "workspace", persistentVolumeClaim: { claimName: name } },
        { name: "tmp", emptyDir: { sizeLimit: "1Gi" } },
      ],
    },
  };
}
