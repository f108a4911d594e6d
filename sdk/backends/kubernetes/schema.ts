import { z } from "zod";
import { EnvSchema } from "../../contract/schema.js";

/** A Kubernetes resource quantity ("500m", "2", "1Gi", "512Mi"). */
const Quantity = z.string().regex(/^\d+(\.\d+)?(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei)?$/, "must be a Kubernetes quantity such as 500m, 2, 512Mi or 5Gi");
/** A DNS-1123 label: namespaces, storage classes. */
const Dns1123 = z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, "must be a DNS-1123 label (lowercase letters, digits and '-', at most 63)");
const CpuMemory = z.strictObject({ cpu: Quantity.optional(), memory: Quantity.optional() });

export const TolerationSchema = z.strictObject({
  key: z.string().min(1).optional(),
  operator: z.enum(["Exists", "Equal"]).optional(),
  value: z.string().optional(),
  effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]).optional(),
  tolerationSeconds: z.number().int().min(0).optional(),
});

/**
 * Options of the Kubernetes backend: one Pod and one PersistentVolumeClaim per workspace in
 * `namespace`, the whole workspace tree on the PVC (mounted at /workspace).
 */
export const KubernetesBackendSchema = z.strictObject({
  kind: z.literal("kubernetes"),
  /** Path of a kubeconfig file. Default: KUBECONFIG, then ~/.kube/config, then the in-cluster ServiceAccount. */
  kubeconfig: z.string().min(1).optional(),
  /** Context of the kubeconfig to use; default its current-context. */
  context: z.string().min(1).optional(),
  /** Namespace holding the workspaces' Pods and PVCs; it must exist (the driver never creates namespaces). */
  namespace: Dns1123.default("default"),
  /** Workspace image; it needs python3 (the in-sandbox runner) and, for npx / node MCP servers, node. */
  image: z.string().min(1),
  imagePullPolicy: z.enum(["IfNotPresent", "Always", "Never"]).default("IfNotPresent"),
  /** Size requested for each workspace's PVC. */
  storageSize: Quantity.default("1Gi"),
  /** StorageClass of the PVCs; default the cluster's default class. */
  storageClassName: Dns1123.optional(),
  /** close() (and a destroy) also deletes the PVC, so the files go with the Pod. Default: the PVC is kept. */
  deletePvcOnClose: z.boolean().default(false),
  /** Container resources; limits cap the whole workspace (every process of its Pod together). */
  requests: CpuMemory.default({ cpu: "100m", memory: "128Mi" }),
  limits: CpuMemory.default({ cpu: "2", memory: "2Gi" }),
  env: EnvSchema.optional(),
  nodeSelector: z.record(z.string().min(1), z.string()).optional(),
  tolerations: z.array(TolerationSchema).optional(),
  /** How long a create or resume waits for the Pod to run before it removes what it made and fails. */
  readinessTimeoutMs: z.number().int().min(1000).max(3_600_000).default(180_000),
  /**
   * Hardening, each on by default. `runAsUser`: the uid every process runs as (default 1000; null
   * keeps the image's user). A fresh volume is made the user's by a short init container that holds
   * only CAP_CHOWN and CAP_FOWNER. All capabilities are dropped and privilege escalation is off in
   * the workspace container; no ServiceAccount token is mounted; the RuntimeDefault seccomp profile applies.
   */
  runAsUser: z.number().int().min(1).max(2_147_483_647).nullable().default(1000),
  /** Mount the namespace's ServiceAccount token into the Pod (default false: the agent gets no cluster credentials). */
  automountServiceAccountToken: z.boolean().default(false),
  /** Mount the image's root filesystem read-only (default false: tools may install into the image's dirs). */
  readOnlyRootFilesystem: z.boolean().default(false),
});

export type KubernetesBackendSpec = z.infer<typeof KubernetesBackendSchema>;
