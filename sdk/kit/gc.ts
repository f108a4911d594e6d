import type { BackendDescription, Driver, DriverContext } from "../contract/driver.js";
import { newReplicaId } from "../contract/leases.js";

export interface GcResult {
  kind: string;
  /** Runtime-managed objects nobody owns: warm-pool members and ephemeral workspaces a crashed process left behind. */
  orphans: BackendDescription[];
  removed: string[];
  /** Orphans kept, with why (a replica's fresh lease: a live pool is using it). */
  kept: Array<{ workspaceId: string; reason: string }>;
}

/**
 * Finds (and with `remove`, destroys with their files) the objects a driver manages that no one
 * can reach any more: managed by the runtime (so no stack declares them) and with no owner (never
 * handed to a user: an owned workspace is someone's data and is never collected, unless the
 * caller passes `referenced` and no session names it). Objects without
 * our labels, or outside the driver's own basedir / engine scope, are never listed, so never touched.
 */
export async function collectGarbage(driver: Driver, options: { remove?: boolean; referenced?: ReadonlySet<string> } & DriverContext = {}): Promise<GcResult> {
  const { remove = false, referenced, ...ctx } = options;
  // With `referenced` (the workspace ids a session store still names), an owned runtime workspace
  // no session refers to any more is an orphan too: its sessions are gone.
  const orphans = referenced
    ? (await driver.list({ managedBy: "runtime" }, ctx)).filter((d) => d.userId === undefined || !referenced.has(d.workspaceId))
    : await driver.list({ managedBy: "runtime", userId: null }, ctx);
  const result: GcResult = { kind: driver.kind, orphans, removed: [], kept: [] };
  // Our own replica id: any lease at all is another process's.
  const self = newReplicaId();
  for (const o of orphans) {
    if (await driver.leases?.othersActive(o.workspaceId, self)) {
      result.kept.push({ workspaceId: o.workspaceId, reason: "a replica holds a fresh lease on it" });
      continue;
    }
    if (!remove) continue;
    await driver.destroy(o.workspaceId, { deleteData: true }, ctx);
    result.removed.push(o.workspaceId);
  }
  return result;
}
