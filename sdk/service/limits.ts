import type { MiddlewareHandler } from "hono";
import { RateLimitedError } from "../errors.js";
import type { WorkspaceManager } from "../manager/manager.js";
import type { Workspace } from "../workspace/workspace.js";
import type { ServiceEnv } from "./auth.js";
import { QUOTA_RETRY_AFTER_MS, sessionQuotaError, type SessionStore } from "./stores/store.js";

export interface ServiceLimits {
  /** JSON request bodies. Default 1 MiB. */
  maxJsonBytes: number;
  /** A skill upload request, all parts together. Default 500 MiB (the reference's total). */
  maxUploadBytes: number;
  /** One file of a folder upload. Default 50 MiB. */
  maxUploadFileBytes: number;
  /** Files in a folder upload. Default 100. */
  maxUploadFiles: number;
  /** Skill installs running at once; more wait. Default 5. */
  maxConcurrentInstalls: number;
  /** Skill uploads whose bodies are read (streamed to disk) at once; more wait unread. Default 4. */
  maxConcurrentUploads: number;
  /** A whole file read through GET .../files, and each Range of a bigger one. Default 64 MiB. */
  maxReadBytes: number;
  /** Entries a directory listing returns. Default 10 000. */
  maxListEntries: number;
  /** How long the MCP endpoint's tools/list waits for one MCP server before listing it as unavailable. Default 20 s. */
  mcpListTimeoutMs: number;
  // Quotas and rate limits (sdk/service/limits.ts): each refusal is a 429 with Retry-After; 0 turns one off.
  /** Requests per second of one user, sustained (token bucket refill, per replica). Default 100. */
  userRequestsPerSecond: number;
  /** Requests one user may send at once above the rate (bucket size). Default 200. */
  userRequestBurst: number;
  /** Requests per second of all users together, per replica. Default 2000. */
  globalRequestsPerSecond: number;
  /** Bucket size of the global rate. Default 4000. */
  globalRequestBurst: number;
  /** Sessions one user may have stored (counted in the store: shared by replicas). Default 1000. */
  maxSessionsPerUser: number;
  /** Workspaces one user may have open in this replica's manager. Default 20. */
  maxLiveWorkspacesPerUser: number;
  /** Workspaces open in this replica's manager, all users together. Default 200. */
  maxLiveWorkspaces: number;
}

export const DEFAULT_LIMITS: ServiceLimits = {
  maxJsonBytes: 1024 * 1024,
  maxUploadBytes: 500 * 1024 * 1024,
  maxUploadFileBytes: 50 * 1024 * 1024,
  maxUploadFiles: 100,
  maxConcurrentInstalls: 5,
  maxConcurrentUploads: 4,
  maxReadBytes: 64 * 1024 * 1024,
  maxListEntries: 10_000,
  mcpListTimeoutMs: 20_000,
  userRequestsPerSecond: 100,
  userRequestBurst: 200,
  globalRequestsPerSecond: 2000,
  globalRequestBurst: 4000,
  maxSessionsPerUser: 1000,
  maxLiveWorkspacesPerUser: 20,
  maxLiveWorkspaces: 200,
};

/** Which limit refused a request: the `limit` label of agentws_limit_refusals_total. */
export type LimitName = "user_rate" | "global_rate" | "sessions_per_user" | "live_workspaces_per_user" | "live_workspaces";

/** Buckets kept before idle (full) ones are dropped; only authenticated users get one. */
const MAX_BUCKETS = 100_000;

/**
 * Token buckets by key, in memory: refilled from the clock when used (no timer), so a request
 * costs a map lookup and some arithmetic.
 */
export class TokenBuckets {
  readonly #perMs: number;
  readonly #burst: number;
  readonly #buckets = new Map<string, { tokens: number; at: number }>();

  constructor(perSecond: number, burst: number) {
    this.#perMs = perSecond / 1000;
    this.#burst = Math.max(1, burst);
  }

  /** Takes one token: 0 when granted, else the milliseconds until one is there. */
  take(key: string, now = performance.now()): number {
    let b = this.#buckets.get(key);
    if (b === undefined) {
      if (this.#buckets.size >= MAX_BUCKETS) this.#dropFull(now);
      b = { tokens: this.#burst, at: now };
      this.#buckets.set(key, b);
    } else {
      b.tokens = Math.min(this.#burst, b.tokens + (now - b.at) * this.#perMs);
      b.at = now;
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return (1 - b.tokens) / this.#perMs;
  }

  /** Gives back a token taken for a request another limit refused. */
  refund(key: string): void {
    const b = this.#buckets.get(key);
    if (b) b.tokens = Math.min(this.#burst, b.tokens + 1);
  }

  #dropFull(now: number): void {
    for (const [key, b] of this.#buckets) if (b.tokens + (now - b.at) * this.#perMs >= this.#burst) this.#buckets.delete(key);
  }
}

/** A workspace this replica opened for a user: counted while being opened or while the manager holds it. */
interface Opened {
  pending: number;
  opened: boolean;
}

/**
 * The service's per-user and global limits (all 429 with Retry-After):
 * - request rate: token buckets per user and for everyone, in this process's memory (no store
 *   round trip), so with N replicas the effective rate is N times the configured one;
 * - stored sessions per user: counted in the store, which every replica shares. Creates of one
 *   user on this replica reserve a slot under a per-user lock before provisioning, and the store's
 *   insert re-checks the count atomically, so no interleaving passes the quota on any number of
 *   replicas; across replicas the loser of a race may have provisioned a workspace for nothing
 *   (closed later by the idle sweep);
 * - workspaces open in this replica's manager, per user and for everyone: only opening a workspace
 *   that is not open is refused (after an idle sweep), never a call on one already open.
 */
export class ServiceQuotas {
  readonly #limits: ServiceLimits;
  readonly #manager: WorkspaceManager<Workspace>;
  readonly #store: SessionStore;
  readonly #refused: (limit: LimitName) => void;
  readonly #users: TokenBuckets | undefined;
  readonly #global: TokenBuckets | undefined;
  /** Session creates in flight on this replica, by user. */
  readonly #creating = new Map<string, number>();
  readonly #locks = new Map<string, Promise<unknown>>();
  /** Workspaces opened on this replica, by user, then workspace id. */
  readonly #open = new Map<string, Map<string, Opened>>();
  /** Opens in flight (not yet in the manager's cache). */
  #opening = 0;

  constructor(limits: ServiceLimits, manager: WorkspaceManager<Workspace>, store: SessionStore, refused: (limit: LimitName) => void) {
    this.#limits = limits;
    this.#manager = manager;
    this.#store = store;
    this.#refused = refused;
    if (limits.userRequestsPerSecond > 0) this.#users = new TokenBuckets(limits.userRequestsPerSecond, limits.userRequestBurst);
    if (limits.globalRequestsPerSecond > 0) this.#global = new TokenBuckets(limits.globalRequestsPerSecond, limits.globalRequestBurst);
  }

  /** Middleware after authentication: the user's bucket, then everyone's. */
  rateLimit(): MiddlewareHandler<ServiceEnv> {
    return async (c, next) => {
      const userId = c.get("userId");
      const wait = this.#users?.take(userId) ?? 0;
      if (wait > 0) throw this.#refuse("user_rate", `too many requests: over ${this.#limits.userRequestsPerSecond} per second for this user`, wait);
      const globalWait = this.#global?.take("") ?? 0;
      if (globalWait > 0) {
        this.#users?.refund(userId);
        throw this.#refuse("global_rate", "the service is receiving too many requests", globalWait);
      }
      await next();
    };
  }

  /**
   * Runs a session create within the per-user quota: `provision` outside any lock (it may take
   * seconds), `insert` with the quota for the store to enforce atomically.
   */
  async createSession(userId: string, provision: () => Promise<unknown>, insert: (maxPerUser: number | undefined) => Promise<void>): Promise<void> {
    const max = this.#limits.maxSessionsPerUser;
    if (!(max > 0)) {
      await provision();
      return insert(undefined);
    }
    await this.#locked(userId, async () => {
      const { total } = await this.#store.listSessions(userId, { limit: 0, offset: 0 });
      if (total + (this.#creating.get(userId) ?? 0) >= max) {
        this.#refused("sessions_per_user");
        throw sessionQuotaError(max);
      }
      this.#creating.set(userId, (this.#creating.get(userId) ?? 0) + 1);
    });
    let reserved = true;
    const release = () => {
      if (!reserved) return;
      reserved = false;
      const n = this.#creating.get(userId)! - 1;
      if (n > 0) this.#creating.set(userId, n);
      else this.#creating.delete(userId);
    };
    try {
      await provision();
      // Under the lock with the release: a count never sees this session both stored and reserved.
      await this.#locked(userId, async () => {
        try {
          await insert(max);
        } finally {
          release();
        }
      });
    } catch (e) {
      // Another replica's create took the last slot meanwhile: the store refused the insert.
      if (e instanceof RateLimitedError && e.details?.limit === "sessions_per_user") this.#refused("sessions_per_user");
      throw e;
    } finally {
      release();
    }
  }

  /**
   * Opens a workspace that is not open in the manager (the caller checked), within the live
   * limits: a workspace being opened counts from the start, so concurrent opens cannot pass them.
   */
  async openWorkspace<W>(userId: string, workspaceId: string, open: () => Promise<W>): Promise<W> {
    const perUser = this.#limits.maxLiveWorkspacesPerUser;
    const global = this.#limits.maxLiveWorkspaces;
    if (!(perUser > 0) && !(global > 0)) return open();
    // Joining an open of the same workspace in flight takes no new room.
    if ((this.#open.get(userId)?.get(workspaceId)?.pending ?? 0) === 0) {
      let over = this.#over(userId);
      if (over) {
        // Idle workspaces past their TTL make room first.
        await this.#manager.sweep().catch(() => undefined);
        over = this.#over(userId);
      }
      if (over === "live_workspaces_per_user")
        throw this.#refuse(
          over,
          `the limit of ${perUser} open workspaces per user is reached: retry when one has been idle long enough to close`,
          QUOTA_RETRY_AFTER_MS,
        );
      if (over) throw this.#refuse(over, "the service has as many workspaces open as it may: retry later", QUOTA_RETRY_AFTER_MS);
    }
    const mine = this.#open.get(userId) ?? new Map<string, Opened>();
    this.#open.set(userId, mine);
    const entry = mine.get(workspaceId) ?? { pending: 0, opened: false };
    mine.set(workspaceId, entry);
    entry.pending++;
    this.#opening++;
    try {
      const ws = await open();
      entry.opened = true;
      return ws;
    } finally {
      this.#opening--;
      entry.pending--;
      if (entry.pending === 0 && !entry.opened) mine.delete(workspaceId);
    }
  }

  /** The live limit a new open would pass, if any; forgets workspaces the manager has closed. */
  #over(userId: string): LimitName | undefined {
    const perUser = this.#limits.maxLiveWorkspacesPerUser;
    const mine = this.#open.get(userId);
    if (perUser > 0 && mine) {
      for (const [id, o] of mine) if (o.pending === 0 && this.#manager.peek(id) === undefined) mine.delete(id);
      if (mine.size === 0) this.#open.delete(userId);
      if (mine.size >= perUser) return "live_workspaces_per_user";
    }
    const global = this.#limits.maxLiveWorkspaces;
    if (global > 0 && this.#manager.stats().cached + this.#opening >= global) return "live_workspaces";
    return undefined;
  }

  #refuse(limit: LimitName, message: string, retryAfterMs: number): RateLimitedError {
    this.#refused(limit);
    return new RateLimitedError(message, { retryAfterMs, details: { limit } });
  }

  /** Runs `fn` after the user's previous locked call settled. */
  async #locked<T>(userId: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.#locks.get(userId) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => undefined);
    this.#locks.set(userId, tail);
    try {
      return await run;
    } finally {
      if (this.#locks.get(userId) === tail) this.#locks.delete(userId);
    }
  }
}
