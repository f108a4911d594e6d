import type Docker from "dockerode";
import { ConflictError } from "../../errors.js";
import { LABELS } from "../../contract/driver.js";
import { ownerConflict } from "../../kit/owner-store.js";
import { statusCode } from "./client.js";

/**
 * Warm-pool claims on Docker: a container's labels are fixed at create time, and a pool member is
 * created before anyone claims it, so the claim is an engine-side object instead, an empty named
 * volume `agentws-owner-<id>` whose labels name the owner. Nothing inside any container can write
 * it (the agent is root in its container, so nothing there is trusted), it survives a restart of
 * the service, and the engine decides races: creating a volume that exists returns the existing
 * one with its first labels, so the first claimer wins and every later one reads its owner.
 */
export const OWNER_CLAIM_LABEL = "agent-workspaces.owner-claim";

export function ownerVolumeName(workspaceId: string): string {
  return `agentws-owner-${workspaceId}`;
}

/** The claimed owner of an unlabelled container, or undefined when nobody claimed it. Engine errors propagate (fail closed). */
export async function readOwnerClaim(docker: Docker, workspaceId: string): Promise<{ userId: string; agentId?: string } | undefined> {
  let info: Docker.VolumeInspectInfo;
  try {
    info = await docker.getVolume(ownerVolumeName(workspaceId)).inspect();
  } catch (e) {
    if (statusCode(e) === 404) return undefined;
    throw e;
  }
  return ownerOf(info.Labels ?? {}, workspaceId);
}

/** Records `owner` once; the same owner again is a no-op, another user a ConflictError. */
export async function recordOwnerClaim(docker: Docker, workspaceId: string, owner: { userId: string; agentId?: string | undefined }): Promise<void> {
  const labels: Record<string, string> = { [OWNER_CLAIM_LABEL]: "true", [LABELS.workspaceId]: workspaceId, [LABELS.userId]: owner.userId };
  if (owner.agentId !== undefined) labels[LABELS.agentId] = owner.agentId;
  await docker.createVolume({ Name: ownerVolumeName(workspaceId), Labels: labels });
  // Read back what the engine kept: a racing claimer's labels win if it was first.
  const recorded = await readOwnerClaim(docker, workspaceId);
  if (recorded?.userId !== owner.userId) throw ownerConflict(workspaceId);
}

export async function removeOwnerClaim(docker: Docker, workspaceId: string): Promise<void> {
  try {
    await docker.getVolume(ownerVolumeName(workspaceId)).remove();
  } catch (e) {
    if (statusCode(e) !== 404) throw e;
  }
}

function ownerOf(labels: Record<string, string>, workspaceId: string): { userId: string; agentId?: string } {
  const userId = labels[LABELS.userId];
  // A volume under our name that does not name this workspace and a user is not a claim we can read: refuse, never "unowned".
  if (labels[OWNER_CLAIM_LABEL] !== "true" || labels[LABELS.workspaceId] !== workspaceId || !userId)
    throw new ConflictError(`volume ${ownerVolumeName(workspaceId)} exists but is not an owner claim of workspace '${workspaceId}'; remove it`, {
      field: "workspaceId",
    });
  const agentId = labels[LABELS.agentId];
  return agentId === undefined ? { userId } : { userId, agentId };
}
