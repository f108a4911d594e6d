import { randomBytes } from "node:crypto";
import { InvalidArgumentError } from "../errors.js";

/**
 * Replica leases on backend objects: every service replica using a workspace renews its own
 * lease on it, and an idle replica pauses the backend object only when no other replica's lease
 * is fresh. Each backend folder picks where its leases live (see its lease.ts) and hands them to
 * the manager through `Driver.leases`; the manager never names a backend.
 */
export interface Leases {
  /**
   * Records that `replicaId` uses the workspace and will count as active for `ttlMs` from now
   * (the renewing replica's own idle TTL: replicas with different TTLs then agree on what fresh means).
   */
  renew(workspaceId: string, replicaId: string, ttlMs: number): Promise<void>;
  /** Whether a replica other than `replicaId` holds a lease on the workspace that has not expired. */
  othersActive(workspaceId: string, replicaId: string): Promise<boolean>;
  /** Drops `replicaId`'s lease; missing is a no-op. */
  release(workspaceId: string, replicaId: string): Promise<void>;
  /** The replicas holding a fresh lease and when each expires (for `agentws status`: why a workspace is awake). */
  holders?(workspaceId: string): Promise<{ replicaId: string; expiresAt: number }[]>;
}

export const REPLICA_ID = /^[0-9a-f]{16,64}$/;

/** A random replica id: 128 bits of hex, so two processes never share one. */
export function newReplicaId(): string {
  return randomBytes(16).toString("hex");
}

export function checkReplicaId(replicaId: string): string {
  if (typeof replicaId !== "string" || !REPLICA_ID.test(replicaId))
    throw new InvalidArgumentError("must be 16-64 lowercase hex characters", { field: "replicaId" });
  return replicaId;
}
