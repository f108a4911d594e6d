import { createHash } from "node:crypto";
import type Docker from "dockerode";
import { ConflictError } from "../../errors.js";
import { LABELS } from "../../contract/driver.js";
import { statusCode } from "./client.js";
import { BRIDGE_PREFIX, ensureHostFirewall } from "./firewall.js";

/**
 * One bridge network per `network: "internet"` workspace: no other container is ever on it, so no
 * other workspace can reach this one (nor it them: Docker isolates bridges from each other), and
 * inter-container traffic is off even so. Outbound traffic is masqueraded as on Docker's default
 * bridge; the host's own and metadata addresses are cut by the host firewall rules (firewall.ts).
 */
export function networkName(workspaceId: string): string {
  return `agentws-net-${workspaceId}`;
}

/**
 * The bridge interface: deterministic, so the engine itself refuses a second network for the same
 * workspace ("networks have same bridge name"): two replicas racing to create it end with one.
 * 15 characters, the kernel's limit for interface names.
 */
export function bridgeName(workspaceId: string): string {
  return (
    BRIDGE_PREFIX +
    createHash("sha256")
      .update(workspaceId)
      .digest("hex")
      .slice(0, 15 - BRIDGE_PREFIX.length)
  );
}

/** Creates or adopts the workspace's network and makes sure the host firewall guards it; returns its name. */
export async function ensureWorkspaceNetwork(docker: Docker, workspaceId: string, labels: Record<string, string>): Promise<string> {
  const name = networkName(workspaceId);
  if (!(await findNetwork(docker, workspaceId))) {
    try {
      await docker.createNetwork({
        Name: name,
        Driver: "bridge",
        CheckDuplicate: true,
        Labels: labels,
        Options: {
          "com.docker.network.bridge.name": bridgeName(workspaceId),
          "com.docker.network.bridge.enable_icc": "false",
          "com.docker.network.bridge.enable_ip_masquerade": "true",
        },
      });
    } catch (e) {
      // 409: same name; 403: same bridge name, i.e. a racing replica made it first: adopt theirs.
      const code = statusCode(e);
      if (code !== 409 && code !== 403) throw e;
      if (!(await waitForNetwork(docker, workspaceId))) throw e;
    }
  }
  await ensureHostFirewall(bridgeName(workspaceId));
  return name;
}

/** Removes the workspace's network if it is ours; a network still in use (a racing create) stays. */
export async function removeWorkspaceNetwork(docker: Docker, workspaceId: string): Promise<void> {
  const found = await findNetwork(docker, workspaceId);
  if (!found) return;
  try {
    await docker.getNetwork(found.Id).remove();
  } catch (e) {
    const code = statusCode(e);
    // 404: gone already; 403/409: still has endpoints (another replica's container joined it).
    if (code !== 404 && code !== 403 && code !== 409) throw e;
  }
}

/** Guards a running workspace on its own network (after a reboot the rules may be gone). */
export async function guardWorkspaceNetwork(workspaceId: string, networkMode: string | undefined): Promise<void> {
  if (networkMode === networkName(workspaceId)) await ensureHostFirewall(bridgeName(workspaceId));
}

async function findNetwork(docker: Docker, workspaceId: string): Promise<Docker.NetworkInspectInfo | null> {
  const name = networkName(workspaceId);
  let info: Docker.NetworkInspectInfo;
  try {
    info = (await docker.getNetwork(name).inspect()) as Docker.NetworkInspectInfo;
  } catch (e) {
    if (statusCode(e) === 404) return null;
    throw e;
  }
  if (info.Labels?.[LABELS.workspaceId] !== workspaceId || info.Options?.["com.docker.network.bridge.name"] !== bridgeName(workspaceId))
    throw new ConflictError(`a Docker network named ${name} exists but is not agent-workspaces' network for '${workspaceId}'; rename or remove it`, {
      field: "workspaceId",
    });
  return info;
}

/** The engine reserves a network before it can be inspected: wait for the racing replica's briefly. */
async function waitForNetwork(docker: Docker, workspaceId: string): Promise<Docker.NetworkInspectInfo | null> {
  for (let i = 0; i < 50; i++) {
    const found = await findNetwork(docker, workspaceId);
    if (found) return found;
    await new Promise((r) => setTimeout(r, 100));
  }
  return null;
}
