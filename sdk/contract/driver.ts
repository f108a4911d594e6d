import type { Logger, ProgressListener } from "../logger.js";
import type { Sandbox } from "../sandbox.js";
import type { Leases } from "./leases.js";

/**
 * Lifecycle of the backend object behind one workspace. Shared by the Pulumi provider and
 * the runtime manager: neither knows a backend except through this interface.
 */
export type ManagedBy = "pulumi" | "runtime";

/** Label / metadata keys stamped on every backend object. */
export const LABELS = {
  workspaceId: "agent-workspaces.workspace-id",
  userId: "agent-workspaces.user-id",
  agentId: "agent-workspaces.agent-id",
  managedBy: "agent-workspaces.managed-by",
} as const;

export interface WorkspaceIdentity {
  workspaceId: string;
  userId?: string | undefined;
  agentId?: string | undefined;
  managedBy: ManagedBy;
  /** User tags, stamped as extra labels / metadata where the backend has them. */
  tags?: Record<string, string> | undefined;
}

export type BackendState = "running" | "paused" | "stopped";

export interface BackendDescription {
  workspaceId: string;
  kind: string;
  state: BackendState;
  userId?: string | undefined;
  agentId?: string | undefined;
  managedBy?: ManagedBy | undefined;
  tags: Record<string, string>;
  /** Where it lives, e.g. { hostPath } or { containerId, containerName }. Plain strings, no secrets. */
  location: Record<string, string>;
}

/** Which backend objects `Driver.list` returns; every given field must match. */
export interface ListSelector {
  managedBy?: ManagedBy | undefined;
  /** An owner's id; `null` selects objects with no owner (warm-pool members never handed out). */
  userId?: string | null | undefined;
}

/** True when a description matches a selector. */
export function matchesSelector(d: BackendDescription, selector: ListSelector = {}): boolean {
  if (selector.managedBy !== undefined && d.managedBy !== selector.managedBy) return false;
  if (selector.userId === null) return d.userId === undefined;
  return selector.userId === undefined || d.userId === selector.userId;
}

/** Options of `Driver.destroy`. */
export interface DestroyOptions {
  /** Also remove the workspace's persistent files (host folder, volume, PVC). */
  deleteData?: boolean;
  /**
   * The backend object went earlier, by a destroy that kept its files (deleteData off): with
   * deleteData, remove only those files, never a backend object. When a live object of this id
   * (or a record of one) still uses them, it is a ConflictError naming them and nothing is removed.
   * Files already gone are a no-op. Drivers whose policy declares `dataFields` support it.
   */
  leftover?: boolean;
}

export interface DriverContext {
  logger?: Logger;
  onProgress?: ProgressListener;
  signal?: AbortSignal;
  /** Backend credentials the Pulumi provider hands over (stack config `agentws:credentials`); never logged. */
  credentials?: Record<string, string>;
}

export interface Driver {
  readonly kind: string;
  /** Creates the backend object, or adopts the one that already exists for this id (never a second copy). */
  create(identity: WorkspaceIdentity, ctx?: DriverContext): Promise<BackendDescription>;
  /** Reattach lookup by label / metadata / deterministic name; null when gone. */
  find(workspaceId: string, ctx?: DriverContext): Promise<BackendDescription | null>;
  /**
   * The backend objects this driver manages (our labels / records, in this driver's own basedir or
   * engine scope: never another stack's folder, never an object without our labels), filtered by
   * the selector. Bounded: past MAX_LISTED objects it is a TooLargeError, not a partial answer.
   */
  list(selector?: ListSelector, ctx?: DriverContext): Promise<BackendDescription[]>;
  /** Suspends; a no-op for backends that cannot pause. */
  pause(workspaceId: string, ctx?: DriverContext): Promise<void>;
  resume(workspaceId: string, ctx?: DriverContext): Promise<void>;
  /** Removes the backend object; with deleteData also its persistent files. Missing is a no-op. */
  destroy(workspaceId: string, options?: DestroyOptions, ctx?: DriverContext): Promise<void>;
  /** Re-stamps tags in place where the backend allows it. */
  updateTags?(workspaceId: string, tags: Record<string, string>, ctx?: DriverContext): Promise<void>;
  /**
   * Records the owner of a backend object created without one (a warm-pool member handed to a
   * user), durably and out of the sandbox's reach; later `find`s report it as `userId`. The same
   * owner again is a no-op; another is a ConflictError.
   */
  claimOwner?(workspaceId: string, owner: { userId: string; agentId?: string | undefined }, ctx?: DriverContext): Promise<void>;
  /**
   * Checks, changing nothing, that this driver's spec can make a backend object (a base image on the
   * engine, host paths that exist); throws an error naming the field otherwise. Run before an old
   * object makes way for a new one, so a bad input fails while the old workspace still works.
   */
  validate?(ctx?: DriverContext): Promise<void>;
  /**
   * Re-creates the backend object of `identity` from this driver's spec under the same name, keeping
   * its files where they live outside it; what the spec needs (an image) is prepared before the old
   * object goes. Used for changes the object cannot take in place (a container's image or labels).
   */
  recreate?(identity: WorkspaceIdentity, ctx?: DriverContext): Promise<BackendDescription>;
  /** Applies the fields of this driver's spec its policy updates in place (resource caps) to the existing object. */
  reconfigure?(workspaceId: string, ctx?: DriverContext): Promise<void>;
  /** Opens a Sandbox handle on a running workspace. */
  connect(workspaceId: string, ctx?: DriverContext): Promise<Sandbox>;
  /** Replica leases on this backend's objects (see lease.ts), where replicas can share one object. */
  readonly leases?: Leases;
}

export type EnsureOutcome = "created" | "reattached" | "resumed" | "recreated";

/**
 * The one ensure state machine: not found → create (or "recreated" when it was expected to
 * exist); paused or stopped → resume; running → reattach. Errors propagate and create nothing.
 */
export async function ensureBackend(
  driver: Driver,
  identity: WorkspaceIdentity,
  options: { expectExisting?: boolean } & DriverContext = {},
): Promise<{ description: BackendDescription; outcome: EnsureOutcome }> {
  const found = await driver.find(identity.workspaceId, options);
  if (!found) {
    const description = await driver.create(identity, options);
    if (options.expectExisting)
      options.logger?.warn("workspace was gone from its backend; recreated it", { workspaceId: identity.workspaceId, kind: driver.kind });
    return { description, outcome: options.expectExisting ? "recreated" : "created" };
  }
  if (found.state !== "running") {
    await driver.resume(identity.workspaceId, options);
    return { description: { ...found, state: "running" }, outcome: "resumed" };
  }
  return { description: found, outcome: "reattached" };
}
