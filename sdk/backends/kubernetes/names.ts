import { createHash } from "node:crypto";
import { LABELS } from "../../contract/driver.js";
import { parseWorkspaceId } from "../../contract/schema.js";

/**
 * Names and metadata of a workspace's Kubernetes objects. The PVC carries the durable record (its
 * annotations hold the exact identity, owner claim and lifecycle marks); the Pod copies the labels.
 * Labels are for selection only: a value Kubernetes would refuse (an e-mail as user id) is stored
 * as a stable hash, and every match is confirmed against the exact annotation.
 */
export const MANAGED_LABEL = "agent-workspaces.managed";
export const ANNOTATIONS = {
  workspaceId: "agent-workspaces/workspace-id",
  userId: "agent-workspaces/user-id",
  agentId: "agent-workspaces/agent-id",
  managedBy: "agent-workspaces/managed-by",
  tags: "agent-workspaces/tags",
  /** Set by pause: the Pod is gone on purpose; the next resume recreates it. */
  paused: "agent-workspaces/paused",
  /** Set by a destroy that kept the data: the workspace is gone, its PVC waits to be adopted again. */
  released: "agent-workspaces/released",
  /** The uid the volume's root was handed to once, so later Pods skip the init container. */
  volumeOwner: "agent-workspaces/volume-owner",
  /** Touched while a Pod waits on its unbound PVC: the update makes the volume controller and the scheduler look again. */
  requeued: "agent-workspaces/requeued",
} as const;
export const TAG_LABEL_PREFIX = "tag.agent-workspaces/";
export const CONTAINER = "workspace";
export const WORKDIR = "/workspace";

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

function sha(text: string, n: number): string {
  return createHash("sha256").update(text).digest("hex").slice(0, n);
}

/** The deterministic Pod and PVC name of a workspace id: DNS-1123, at most 62 chars, distinct for ids differing only in case. */
export function objectName(workspaceId: string): string {
  const id = parseWorkspaceId(workspaceId);
  const slug = id
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .slice(0, 50)
    .replace(/^-+|-+$/g, "");
  return `ws-${slug ? `${slug}-` : ""}${sha(id, 8)}`;
}

/** A label value for any string: itself when Kubernetes accepts it, else a stable hash of it. */
export function labelValue(value: string): string {
  return value.length <= 63 && LABEL_VALUE.test(value) ? value : `h-${sha(value, 40)}`;
}

export function isLabelName(name: string): boolean {
  return LABEL_NAME.test(name);
}

/** Labels for the selector of `list`, on both objects. */
export function identityLabels(
  identity: { workspaceId: string; userId?: string | undefined; agentId?: string | undefined; managedBy: string },
  tags: Record<string, string> = {},
): Record<string, string> {
  const labels: Record<string, string> = {
    [MANAGED_LABEL]: "true",
    [LABELS.workspaceId]: labelValue(identity.workspaceId),
    [LABELS.managedBy]: identity.managedBy,
  };
  if (identity.userId !== undefined) labels[LABELS.userId] = labelValue(identity.userId);
  if (identity.agentId !== undefined) labels[LABELS.agentId] = labelValue(identity.agentId);
  // Tags become labels where Kubernetes takes them as they are; the exact map is in an annotation.
  for (const [k, v] of Object.entries(tags)) if (isLabelName(k) && labelValue(v) === v) labels[TAG_LABEL_PREFIX + k] = v;
  return labels;
}

export function identityAnnotations(
  identity: { workspaceId: string; userId?: string | undefined; agentId?: string | undefined; managedBy: string },
  tags: Record<string, string> = {},
): Record<string, string> {
  const a: Record<string, string> = {
    [ANNOTATIONS.workspaceId]: identity.workspaceId,
    [ANNOTATIONS.managedBy]: identity.managedBy,
    [ANNOTATIONS.tags]: JSON.stringify(tags),
  };
  if (identity.userId !== undefined) a[ANNOTATIONS.userId] = identity.userId;
  if (identity.agentId !== undefined) a[ANNOTATIONS.agentId] = identity.agentId;
  return a;
}

/** The tag map recorded on an object (bounded: a hand-edited annotation cannot be huge or of the wrong shape). */
export function readTags(annotations: Record<string, string> | undefined): Record<string, string> {
  const raw = annotations?.[ANNOTATIONS.tags];
  if (!raw || raw.length > 64 * 1024) return {};
  try {
    const v: unknown = JSON.parse(raw);
    if (!v || typeof v !== "object" || Array.isArray(v)) return {};
    return Object.fromEntries(Object.entries(v as Record<string, unknown>).filter((e): e is [string, string] => typeof e[1] === "string"));
  } catch {
    return {};
  }
}
