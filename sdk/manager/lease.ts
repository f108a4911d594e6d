import type { Leases } from "../contract/leases.js";
import { checkReplicaId, newReplicaId } from "../contract/leases.js";
import type { Logger } from "../logger.js";

export type { Leases } from "../contract/leases.js";

/** What the lease keeper needs from a cached workspace (a subset of ManagedWorkspace). */
export interface LeasedWorkspace {
  readonly workspaceId: string;
  readonly inFlight: number;
  readonly lastActivityAt: number;
  /** The backend's replica leases; absent when the backend object is never shared. */
  readonly leases?: Leases | undefined;
  /** Resumes the backend object if someone paused it under this open handle. */
  ensureRunning?(): Promise<void>;
}

export interface LeaseKeeperStats {
  /** Renewals written since the keeper was made. */
  renewals: number;
  /** Leases held now (one per cached workspace with leases). */
  held: number;
}

/**
 * This replica's side of the replica leases, as the manager sees them: one random replica id per
 * manager, renewals from a timer (never on getWorkspace's cache-hit path) at most once per
 * `renewMs` per workspace and only while it has been active, and a release on eviction.
 *
 * A lease lasts the workspace's TTL from its renewal: another replica may pause the backend object
 * only once this replica has been idle for about its own TTL, whatever TTL the other one uses.
 */
export class LeaseKeeper {
  readonly replicaId: string;
  readonly renewMs: number;
  readonly #logger: Logger;
  /** workspace id → epoch ms when its lease was last renewed, and when it expires. */
  readonly #held = new Map<string, { renewedAt: number; expiresAt: number }>();
  /** Renewals being written, awaited by a release so a late renewal never outlives it. */
  readonly #writing = new Map<string, Promise<void>>();
  #renewals = 0;

  constructor(options: { replicaId?: string | undefined; renewMs: number; logger: Logger }) {
    this.replicaId = options.replicaId === undefined ? newReplicaId() : checkReplicaId(options.replicaId);
    this.renewMs = options.renewMs;
    this.#logger = options.logger;
  }

  stats(): LeaseKeeperStats {
    return { renewals: this.#renewals, held: this.#held.size };
  }

  /** Takes (or renews) the lease now: called when a workspace is provisioned. */
  async renew(ws: LeasedWorkspace, ttlMs: number): Promise<void> {
    const leases = ws.leases;
    if (!leases) return;
    const now = Date.now();
    const previous = this.#held.get(ws.workspaceId);
    this.#held.set(ws.workspaceId, { renewedAt: now, expiresAt: now + ttlMs });
    this.#renewals++;
    const write = leases.renew(ws.workspaceId, this.replicaId, ttlMs);
    const settled = write.catch(() => undefined);
    this.#writing.set(ws.workspaceId, settled);
    try {
      await write;
    } finally {
      if (this.#writing.get(ws.workspaceId) === settled) this.#writing.delete(ws.workspaceId);
    }
    // Our lease had lapsed while the handle stayed cached: another replica may have paused the
    // object in that gap, even under an operation that started then. Make sure it runs.
    if (previous && previous.expiresAt <= now) await ws.ensureRunning?.();
  }

  /** One timer tick: renews the lease of every workspace active (or busy) since its last renewal. */
  tick(entries: Iterable<{ ws: LeasedWorkspace; ttlMs: number }>): void {
    for (const { ws, ttlMs } of entries) {
      if (!ws.leases) continue;
      const held = this.#held.get(ws.workspaceId);
      if (held && ws.inFlight === 0 && ws.lastActivityAt < held.renewedAt) continue;
      this.renew(ws, ttlMs).catch((e: unknown) => this.#logger.warn("renewing a replica lease failed", { workspaceId: ws.workspaceId, error: String(e) }));
    }
  }

  /** Whether another replica holds an unexpired lease on the workspace. */
  async othersActive(ws: LeasedWorkspace): Promise<boolean> {
    return (await ws.leases?.othersActive(ws.workspaceId, this.replicaId)) ?? false;
  }

  /** Drops this replica's lease (eviction, close); failures are logged, the lease then just expires. */
  async release(ws: LeasedWorkspace): Promise<void> {
    if (!this.#held.delete(ws.workspaceId) || !ws.leases) return;
    await this.#writing.get(ws.workspaceId);
    await ws.leases
      .release(ws.workspaceId, this.replicaId)
      .catch((e: unknown) => this.#logger.warn("releasing a replica lease failed", { workspaceId: ws.workspaceId, error: String(e) }));
  }
}
