// Size: one cohesive class, the manager's cache state machine (miss, provision, build, evict, sweep,
// pool); if it grows, sweep/TTL and fleet loading are the parts to move out.
import { z } from "zod";
import type { EnsureOutcome, ManagedBy } from "../contract/driver.js";
import { ConflictError, InvalidArgumentError, WorkspaceError, fromZodError, InternalError, ClosedError, ProvisionFailedError } from "../errors.js";
import type { FleetEntry, FleetOutputs } from "../contract/fleet.js";
import { silentLogger, type Logger } from "../logger.js";
import { ManagerEvents, errorCode, errorMessage, type EvictReason, type ManagerEventListener } from "./events.js";
import { parseFleetOutputs, readStackOutputs, type StackSelector } from "./fleet-source.js";
import { IsolationPolicy, ISOLATION_POLICIES, assignWorkspaceId, checkIdentityId, checkWorkspaceId, isNonBlank, newWorkspaceId } from "./ids.js";
import { sessionWorkspaceId } from "./ids.js";
import { PrewarmSchema, WarmPool, type PoolStats } from "./pool.js";
import { LeaseKeeper, type Leases } from "./lease.js";
import { SingleFlight } from "./single-flight.js";

/**
 * What the manager needs from a workspace. `Workspace` (sdk/workspace) satisfies it; the manager
 * depends on nothing else, so it can be tested and reused without the whole facade.
 */
export interface ManagedWorkspace {
  readonly workspaceId: string;
  /** Operations running now; a busy workspace is never evicted. */
  readonly inFlight: number;
  /** Epoch ms of the last operation start or end. */
  readonly lastActivityAt: number;
  touch(): void;
  /** Binds the backend (create, reattach or resume). Idempotent. */
  initialize(): Promise<void>;
  /** Releases the workspace; sandbox backends pause here. Idempotent. With `keepBackend` only client-side resources go. */
  close(options?: { keepBackend?: boolean }): Promise<void>;
  /** Replica leases on the backend object, when replicas can share it; then `releaseBackend` is there too. */
  readonly leases?: Leases | undefined;
  /** What close() does to the backend object (e.g. pause), unless another replica holds a lease on it: "kept" then. */
  releaseBackend?(guard: { replicaId: string }): Promise<"released" | "kept">;
  /** Resumes the backend object if someone paused or stopped it under this open workspace. */
  ensureRunning?(): Promise<void>;
  /** What initialize() did to the backend, when the workspace knows (ensureBackend's outcome). */
  readonly ensureOutcome?: EnsureOutcome | undefined;
  /**
   * Records `owner` durably on the backend object of an unowned workspace (a warm-pool member
   * being claimed), where neither the agent nor a restart can undo it; ConflictError when it
   * already belongs to someone else. Required for warm pools handing members to users.
   */
  claimOwner?(owner: WorkspaceClaim): Promise<void>;
}

/**
 * The replica lease held while a workspace is provisioned: long enough for a slow cold create; a
 * replica that dies meanwhile only keeps the object from being paused by others until it lapses.
 */
const PROVISION_LEASE_MS = 10 * 60_000;

/** Who claims a warm workspace. */
export interface WorkspaceClaim {
  userId: string;
  agentId?: string | undefined;
}

/** Who a workspace is built for; handed to the backend manager's factory. */
export interface ManagedIdentity {
  workspaceId: string;
  userId: string | undefined;
  agentId: string | undefined;
  /** "pulumi" for ids the stack declared, "runtime" for ids this manager created on demand. */
  managedBy: ManagedBy;
  /** The stack's entry when the id was declared: reattach to it, never create a second one. */
  declared?: FleetEntry | undefined;
}

export type WorkspaceFactory<W extends ManagedWorkspace> = (identity: ManagedIdentity) => W | Promise<W>;

/** How a backend behaves under the manager; fixed by each backend manager, not by its users. */
export interface BackendProfile {
  /** Backend kind this manager serves ("local", "docker", ...); fleet entries of other kinds are refused. */
  kind?: string | undefined;
  /** "pause": close() suspends the backend (sandboxes); "close": it just releases it (local folders). */
  eviction: "pause" | "close";
  /** "background": a sweeper runs every sweepInterval; "lazy": requests trigger the sweep, at most once per sweepInterval. */
  sweep: "background" | "lazy";
}

export const ManagerOptionsSchema = z.strictObject({
  isolation: z.enum(ISOLATION_POLICIES as [IsolationPolicy, ...IsolationPolicy[]]).default(IsolationPolicy.PER_AGENT),
  /** Idle seconds before a workspace is paused (or closed) and dropped from the cache. */
  ttl: z.number().positive().default(3600),
  /** Seconds between idle sweeps. */
  sweepInterval: z.number().positive().default(300),
  prewarm: PrewarmSchema.optional(),
  /** Skip fleet entries of other backend kinds instead of refusing the fleet. */
  ignoreOtherBackends: z.boolean().default(false),
  /** This replica's id in the replica leases (16-64 lowercase hex); random by default, one per manager. */
  replicaId: z
    .string()
    .regex(/^[0-9a-f]{16,64}$/, "must be 16-64 lowercase hex characters")
    .optional(),
  /** Seconds between replica lease renewals of an active workspace; default a third of the TTL, at most 30. */
  leaseRenewInterval: z.number().positive().optional(),
});
export type ManagerOptions = z.input<typeof ManagerOptionsSchema> & {
  logger?: Logger;
  onEvent?: ManagerEventListener;
};

export interface WorkspaceManagerInit<W extends ManagedWorkspace> extends ManagerOptions {
  factory: WorkspaceFactory<W>;
  profile?: Partial<BackendProfile>;
  /** The stack's `workspaces` output (any shape parseFleetOutputs accepts). */
  fleet?: unknown;
}

export interface ManagerStats {
  cached: number;
  provisioning: number;
  closing: number;
  declared: number;
  pool: PoolStats | undefined;
}

export interface SweepResult {
  scanned: number;
  evicted: number;
  /** Expired by the clock but running an operation: kept. */
  busy: number;
}

interface Entry<W> {
  readonly id: string;
  readonly ws: W;
  readonly ttlMs: number;
  /** Owner recorded at creation; another user asking for this id is refused. */
  readonly userId: string | undefined;
  /** The workspace as an already-settled promise: a cache hit returns it instead of allocating one. */
  readonly settled: Promise<W>;
}

/**
 * Serves `getWorkspace(userId, agentId, sessionId, workspaceId?)`: maps the call to an id by the
 * isolation policy, returns the cached workspace (a map lookup), or provisions it once however
 * many callers ask at the same time, evicts idle ones and keeps a warm pool.
 *
 * Extension point (the whole of it): a backend manager is a subclass whose constructor validates
 * its own options and calls
 *   super({ ...managerOptions, factory: (identity) => new XWorkspace({ workspaceId: identity.workspaceId, ... }),
 *           profile: { kind: "x", eviction: "pause", sweep: "background" } })
 * The factory builds an uninitialized workspace for that exact id (the manager initializes it and
 * closes it on failure); it must stamp `identity.managedBy` / user / agent on the backend object
 * and, when `identity.declared` is set, reattach rather than create; if the backend object it finds
 * records another owner than `identity.userId`, throw ConflictError. Optionally override
 * `outcomeOf` (how a provisioning is reported) and `disposePooled` (what happens to warm members
 * nobody claimed). Everything else (cache, single flight, TTL, pool, fleet) lives here.
 */
export class WorkspaceManager<W extends ManagedWorkspace = ManagedWorkspace> implements AsyncDisposable {
  readonly #factory: WorkspaceFactory<W>;
  readonly #profile: BackendProfile;
  readonly #ttlMs: number;
  readonly #sweepMs: number;
  readonly #ignoreOtherBackends: boolean;
  readonly #events: ManagerEvents;
  readonly #leases: LeaseKeeper;
  #leaseTimer: NodeJS.Timeout | undefined;
  protected readonly logger: Logger;

  #isolation: IsolationPolicy;
  readonly #live = new Map<string, Entry<W>>();
  readonly #flights = new SingleFlight<string, Entry<W>>();
  readonly #closing = new Map<string, Promise<void>>();
  /** Evicted while another replica held a lease, so their backend object still runs: each sweep retries the pause. */
  readonly #handedOver = new Map<string, Entry<W>>();
  #fleet = new Map<string, FleetEntry>();
  readonly #pool: WarmPool<W> | undefined;
  #sweeper: NodeJS.Timeout | undefined;
  /** Lazy sweeping: epoch ms of the next sweep a request may trigger; undefined for background sweeping. */
  #nextLazySweep: number | undefined;
  #started = false;
  #disposed: Promise<void> | undefined;
  /** Derived ids by (policy, user, agent, session): a hit should not pay for hashing. Cleared wholesale when large. */
  readonly #derived = new Map<string, string>();

  constructor(init: WorkspaceManagerInit<W>) {
    const { factory, profile, fleet, logger, onEvent, ...rest } = init;
    if (typeof factory !== "function") throw new InvalidArgumentError("must be a function building a workspace for an identity", { field: "factory" });
    const parsed = ManagerOptionsSchema.safeParse(rest);
    if (!parsed.success) throw fromZodError("options", parsed.error);
    const o = parsed.data;
    this.#factory = factory;
    this.#profile = { eviction: "close", sweep: "background", ...profile };
    this.#isolation = o.isolation;
    this.#ttlMs = o.ttl * 1000;
    this.#sweepMs = o.sweepInterval * 1000;
    this.#ignoreOtherBackends = o.ignoreOtherBackends;
    this.logger = logger ?? silentLogger;
    this.#events = new ManagerEvents(this.logger);
    this.#leases = new LeaseKeeper({ replicaId: o.replicaId, renewMs: (o.leaseRenewInterval ?? Math.min(o.ttl / 3, 30)) * 1000, logger: this.logger });
    if (onEvent) this.#events.on(onEvent);
    if (this.#profile.sweep === "lazy") this.#nextLazySweep = Date.now() + this.#sweepMs;
    if (o.prewarm && o.prewarm.size > 0) this.#pool = this.#createPool(o.prewarm);
    if (fleet !== undefined) this.loadFleet(fleet);
  }

  /** A manager knowing the workspaces a stack declared, from its outputs as plain JSON (no CLI needed). */
  static fromOutputs<M, O>(this: new (options: O) => M, outputs: unknown, options: O): M {
    const manager = new this(options);
    (manager as WorkspaceManager).loadFleet(outputs);
    return manager;
  }

  /** Same as fromOutputs, reading the outputs of a stack through the Pulumi Automation API. */
  static async fromStack<M, O>(this: new (options: O) => M, selector: StackSelector, options: O): Promise<M> {
    const outputs = await readStackOutputs(selector);
    const manager = new this(options);
    (manager as WorkspaceManager).loadFleet(outputs);
    return manager;
  }

  /** This replica's id in the replica leases. */
  get replicaId(): string {
    return this.#leases.replicaId;
  }

  /** Replica lease renewals written so far and leases held now. */
  leaseStats(): { renewals: number; held: number } {
    return this.#leases.stats();
  }

  get isolation(): IsolationPolicy {
    return this.#isolation;
  }
  /** Changes how new calls map to ids; workspaces already cached or on disk keep theirs. */
  set isolation(policy: IsolationPolicy) {
    if (!ISOLATION_POLICIES.includes(policy)) throw new InvalidArgumentError(`must be one of ${ISOLATION_POLICIES.join(", ")}`, { field: "isolation" });
    this.#isolation = policy;
  }

  /** Subscribes to create / reattach / resume / pause / evict / pool / error events; returns the unsubscribe. */
  onEvent(listener: ManagerEventListener): () => void {
    return this.#events.on(listener);
  }

  /** Replaces the declared fleet. Cached workspaces are left as they are. */
  loadFleet(outputs: unknown): FleetOutputs {
    const fleet = parseFleetOutputs(outputs);
    const next = new Map<string, FleetEntry>();
    for (const [id, entry] of Object.entries(fleet)) {
      if (this.#profile.kind !== undefined && entry.backend.kind !== this.#profile.kind) {
        if (this.#ignoreOtherBackends) continue;
        throw new InvalidArgumentError(
          `is '${entry.backend.kind}' but this manager serves '${this.#profile.kind}' workspaces; use the ${entry.backend.kind} manager or set ignoreOtherBackends`,
          { field: `workspaces.${id}.backend.kind` },
        );
      }
      next.set(id, entry);
    }
    this.#fleet = next;
    return fleet;
  }

  /** The fleet entry for a declared id. */
  declared(workspaceId: string): FleetEntry | undefined {
    return this.#fleet.get(workspaceId);
  }

  /**
   * The id a call maps to: the explicit id, else the policy's (PER_SESSION hashes the session; see
   * ids.ts). The session id is required and checked only under PER_SESSION, the one policy using it.
   */
  resolveWorkspaceId(userId: string, agentId: string, sessionId?: string, workspaceId?: string): string {
    checkIdentityId(userId, "userId");
    checkIdentityId(agentId, "agentId");
    if (sessionId !== undefined && this.#isolation === IsolationPolicy.PER_SESSION) checkIdentityId(sessionId, "sessionId");
    if (workspaceId !== undefined) return checkWorkspaceId(workspaceId);
    if (this.#isolation === IsolationPolicy.PER_SESSION) return sessionWorkspaceId({ userId, agentId, sessionId });
    return assignWorkspaceId({ userId, agentId }, this.#isolation);
  }

  /** The reference's assign_workspace_id under this manager's policy (PER_SESSION mints a fresh id). */
  assignWorkspaceId(owner: { userId: string; agentId: string; sessionId?: string }): string {
    return assignWorkspaceId(owner, this.#isolation);
  }

  /**
   * The initialized workspace for this call. A cached one costs a map lookup; a missing one is
   * provisioned once for all concurrent callers (different ids in parallel); a failure is not
   * cached and reaches every waiter. Ask again for each turn of work rather than holding the
   * object: once idle past the TTL it is closed, and a held reference then fails with `closed`.
   */
  getWorkspace(userId: string, agentId: string, sessionId?: string, workspaceId?: string): Promise<W> {
    // Not `async`: a hit hands back the entry's settled promise, the hottest path of the manager.
    let id: string;
    try {
      // The user and agent are checked (empty or blank ones are refused) before any lookup, the
      // session where the policy uses it; an explicit workspace id is checked on a miss (a cached
      // one passed that check already).
      if (workspaceId === undefined) id = this.#derive(userId, agentId, sessionId);
      else {
        checkIds(userId, agentId);
        id = workspaceId;
      }
    } catch (e) {
      return Promise.reject(e);
    }
    const entry = this.#live.get(id);
    // An unowned workspace (declared or claimed without a user) serves anyone who knows its id.
    if (entry !== undefined && (entry.userId === undefined || entry.userId === userId)) {
      entry.ws.touch();
      if (this.#nextLazySweep !== undefined && entry.ws.lastActivityAt >= this.#nextLazySweep) this.#lazySweep();
      return entry.settled;
    }
    return this.#miss(id, userId, agentId, workspaceId !== undefined);
  }

  /**
   * A new workspace with a fresh id, handed off from the warm pool when a member is ready (else
   * provisioned now). Keep `workspaceId` (e.g. with the session) and pass it to getWorkspace later.
   */
  async claimWorkspace(owner: { userId?: string; agentId?: string } = {}): Promise<W> {
    this.#checkOpen();
    if (owner.userId !== undefined) checkIdentityId(owner.userId, "userId");
    if (owner.agentId !== undefined) checkIdentityId(owner.agentId, "agentId");
    const started = performance.now();
    const member = this.#pool?.claim();
    if (member !== undefined) {
      // Ownership is recorded on the backend before the hand-off: an eviction or a restart must not free it.
      if (owner.userId !== undefined) {
        await this.#claimPooled(member, { userId: owner.userId, agentId: owner.agentId });
        // Disposed while the claim was being recorded: the member is in neither the pool nor the cache, so close it here.
        if (this.#disposed) {
          await member.close().catch(() => undefined);
          this.#checkOpen();
        }
      }
      // The idle clock starts at the hand-off, not when the member was built.
      member.touch();
      this.#live.set(member.workspaceId, { id: member.workspaceId, ws: member, ttlMs: this.#ttlMs, userId: owner.userId, settled: Promise.resolve(member) });
      await this.#renew(member, this.#ttlMs);
      this.#events.emit({ type: "pool-hit", workspaceId: member.workspaceId, durationMs: performance.now() - started });
      return member;
    }
    const identity: ManagedIdentity = { workspaceId: newWorkspaceId(), userId: owner.userId, agentId: owner.agentId, managedBy: "runtime" };
    if (this.#pool) this.#events.emit({ type: "pool-miss", workspaceId: identity.workspaceId, durationMs: performance.now() - started });
    this.start();
    return (await this.#flights.run(identity.workspaceId, () => this.#provision(identity))).ws;
  }

  /** The cached workspace for an id, without provisioning or touching it. */
  peek(workspaceId: string): W | undefined {
    return this.#live.get(workspaceId)?.ws;
  }

  /** Ids of the cached workspaces. */
  cachedIds(): string[] {
    return [...this.#live.keys()];
  }

  stats(): ManagerStats {
    return {
      cached: this.#live.size,
      provisioning: this.#flights.size,
      closing: this.#closing.size,
      declared: this.#fleet.size,
      pool: this.#pool?.stats(),
    };
  }

  /** Closes (pausing where the backend can) and drops one workspace; unknown ids are a no-op. */
  async close(workspaceId: string): Promise<void> {
    const flight = this.#flights.get(workspaceId);
    if (flight) await flight.catch(() => undefined);
    const entry = this.#live.get(workspaceId);
    if (entry) await this.#evict(workspaceId, entry, "close");
    else await this.#closing.get(workspaceId);
  }

  /** Closes every cached workspace in parallel. Background work keeps running (see asyncDispose). */
  async closeAll(): Promise<void> {
    await this.#closeAll("close");
  }

  /** Starts background work: the idle sweeper (sandbox backends) and the warm pool. Idempotent. */
  start(): void {
    if (this.#started || this.#disposed) return;
    this.#started = true;
    if (this.#profile.sweep === "background") {
      this.#sweeper = setInterval(() => void this.sweep().catch((e: unknown) => this.logger.warn("idle sweep failed", { error: String(e) })), this.#sweepMs);
      // The sweeper alone never keeps a process alive.
      this.#sweeper.unref();
    }
    // Leases are renewed off the request path, for workspaces active since their last renewal.
    this.#leaseTimer = setInterval(() => this.#leases.tick(this.#live.values()), this.#leases.renewMs);
    this.#leaseTimer.unref();
    this.#pool?.refill();
  }

  /** Evicts every idle workspace now (TTL passed, no operation in flight). */
  async sweep(now = Date.now()): Promise<SweepResult> {
    const result: SweepResult = { scanned: this.#live.size, evicted: 0, busy: 0 };
    const retries = this.#handedOver.size > 0 ? this.#retryHandedOver() : undefined;
    let evictions: Promise<void>[] | undefined;
    for (const entry of this.#live.values()) {
      const ws = entry.ws;
      if (now - ws.lastActivityAt <= entry.ttlMs) continue;
      if (ws.inFlight > 0) {
        result.busy++;
        continue;
      }
      (evictions ??= []).push(this.#evict(entry.id, entry, "idle"));
    }
    if (evictions) {
      result.evicted = evictions.length;
      await Promise.all(evictions);
    }
    if (retries) await Promise.all(retries);
    return result;
  }

  /** Stops the sweeper and the pool, then closes every cached workspace in parallel. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.#disposed ??= (async () => {
      if (this.#sweeper) clearInterval(this.#sweeper);
      if (this.#leaseTimer) clearInterval(this.#leaseTimer);
      this.#sweeper = undefined;
      this.#leaseTimer = undefined;
      await this.#pool?.stop();
      await this.#closeAll("dispose");
    })();
    return this.#disposed;
  }

  /** How a finished provisioning is reported. Default: the workspace's own ensure outcome, else declared → reattached, else created. */
  protected outcomeOf(ws: W, identity: ManagedIdentity): EnsureOutcome {
    return ws.ensureOutcome ?? (identity.declared ? "reattached" : "created");
  }

  /**
   * Records a claim on a warm member's backend object. Default: the workspace's own claimOwner;
   * a workspace without one cannot be handed to a user (its owner would live only in memory).
   */
  protected async claimPooled(ws: W, owner: WorkspaceClaim): Promise<void> {
    if (typeof ws.claimOwner !== "function")
      throw new InternalError(`workspace '${ws.workspaceId}' cannot record its owner durably; a warm pool cannot hand it to a user`);
    await ws.claimOwner(owner);
  }

  async #claimPooled(member: W, owner: WorkspaceClaim): Promise<void> {
    try {
      await this.claimPooled(member, owner);
    } catch (e) {
      // Never handed out: release it like any member nobody claimed.
      await this.disposePooled(member).catch((err: unknown) =>
        this.logger.warn("disposing an unclaimable warm workspace failed", { workspaceId: member.workspaceId, error: String(err) }),
      );
      this.#events.emit({ type: "error", workspaceId: member.workspaceId, phase: "pool", code: errorCode(e), message: errorMessage(e), durationMs: 0 });
      throw e;
    }
  }

  /** Disposes a warm member nobody claimed. Default: close it. */
  protected async disposePooled(ws: W): Promise<void> {
    await ws.close();
  }

  #derive(userId: string, agentId: string, sessionId: string | undefined): string {
    // Non-strings get resolveWorkspaceId's error naming the field.
    if (typeof userId !== "string" || typeof agentId !== "string") return this.resolveWorkspaceId(userId, agentId, sessionId);
    // Only PER_SESSION uses the session (and its memo key holds it); the other policies ignore it, as the reference does.
    const perSession = this.#isolation === IsolationPolicy.PER_SESSION;
    if (perSession && sessionId !== undefined && (typeof sessionId !== "string" || !isNonBlank(sessionId))) checkIdentityId(sessionId, "sessionId");
    // Length prefixes keep the key unambiguous whatever characters the ids contain.
    const session = perSession ? (sessionId ?? "") : "";
    const key = `${this.#isolation}|${userId.length}|${userId}|${agentId.length}|${agentId}|${session}`;
    let id = this.#derived.get(key);
    if (id === undefined) {
      id = this.resolveWorkspaceId(userId, agentId, sessionId);
      if (this.#derived.size >= 50_000) this.#derived.clear();
      this.#derived.set(key, id);
    }
    return id;
  }

  async #miss(id: string, userId: string, agentId: string, explicit: boolean): Promise<W> {
    this.#checkOpen();
    if (explicit) checkWorkspaceId(id);
    // getWorkspace checked every id: userId is a non-blank string, the owner of this request.
    const owner = userId;
    // Cached but not served by getWorkspace's fast path: it belongs to another user.
    if (this.#live.has(id)) throw this.#ownerConflict(id);
    const declared = this.#fleet.get(id);
    if (declared?.userId !== undefined && declared.userId !== owner) throw this.#ownerConflict(id);
    if (this.#nextLazySweep !== undefined && Date.now() >= this.#nextLazySweep) this.#lazySweep();
    this.start();
    const entry = await this.#flights.run(id, () =>
      this.#provision({
        workspaceId: id,
        userId: declared?.userId ?? owner,
        agentId: declared?.agentId ?? agentId,
        managedBy: declared?.managedBy ?? "runtime",
        declared,
      }),
    );
    // A concurrent caller may have started this flight for another user.
    if (entry.userId !== undefined && entry.userId !== owner) throw this.#ownerConflict(id);
    return entry.ws;
  }

  #ownerConflict(id: string): ConflictError {
    return new ConflictError(`workspace '${id}' belongs to another user; workspace ids are never shared between users`, {
      field: "userId",
      details: { workspaceId: id },
    });
  }

  #checkOpen(): void {
    if (this.#disposed) throw new ClosedError("the workspace manager was disposed; create a new one");
  }

  async #provision(identity: ManagedIdentity): Promise<Entry<W>> {
    const id = identity.workspaceId;
    // An eviction of this id still pausing: let it finish, then resume.
    const closing = this.#closing.get(id);
    if (closing) await closing;
    this.#handedOver.delete(id);
    const ttlMs = ttlOf(identity.declared, this.#ttlMs);
    // The lease is taken before initialize resumes the object, so another replica's idle sweep never
    // pauses it between that resume and our first operation; it lasts the whole provisioning.
    const ws = await this.#build(identity, "cold", Math.max(ttlMs, PROVISION_LEASE_MS));
    ws.touch();
    const entry: Entry<W> = { id, ws, ttlMs, userId: identity.userId, settled: Promise.resolve(ws) };
    this.#live.set(id, entry);
    await this.#renew(ws, entry.ttlMs);
    return entry;
  }

  /** Factory + initialize, reported; a half-built workspace is closed, never cached. */
  async #build(identity: ManagedIdentity, source: "cold" | "pool" = "cold", leaseMs?: number): Promise<W> {
    const started = performance.now();
    let ws: W | undefined;
    try {
      ws = await this.#factory(identity);
      if (ws.workspaceId !== identity.workspaceId)
        throw new InternalError(`the factory built workspace '${ws.workspaceId}' when asked for '${identity.workspaceId}'`);
      if (leaseMs !== undefined) await this.#renew(ws, leaseMs);
      await ws.initialize();
    } catch (e) {
      if (ws && leaseMs !== undefined) await this.#leases.release(ws);
      if (ws)
        await ws
          .close()
          .catch((err: unknown) =>
            this.logger.warn("closing a workspace after a failed initialize failed", { workspaceId: identity.workspaceId, error: String(err) }),
          );
      const error =
        e instanceof WorkspaceError
          ? e
          : new ProvisionFailedError(`workspace '${identity.workspaceId}' could not be provisioned: ${errorMessage(e)}`, { cause: e });
      this.#events.emit({
        type: "error",
        workspaceId: identity.workspaceId,
        phase: source === "pool" ? "pool" : "provision",
        code: errorCode(error),
        message: error.message,
        durationMs: performance.now() - started,
      });
      throw error;
    }
    const outcome = this.outcomeOf(ws, identity);
    this.#events.emit({
      type: outcome === "reattached" ? "reattach" : outcome === "resumed" ? "resume" : "create",
      workspaceId: identity.workspaceId,
      userId: identity.userId,
      agentId: identity.agentId,
      managedBy: identity.managedBy,
      source,
      ...(outcome === "recreated" ? { recreated: true } : {}),
      durationMs: performance.now() - started,
    });
    return ws;
  }

  #evict(id: string, entry: Entry<W>, reason: EvictReason): Promise<void> {
    // Dropped synchronously: a request arriving from now on provisions afresh, after this close.
    this.#live.delete(id);
    return this.#trackClosing(id, async () => {
      const started = performance.now();
      const idleMs = Date.now() - entry.ws.lastActivityAt;
      const pausing = this.#profile.eviction === "pause";
      const ws = entry.ws;
      // Backends shared between replicas: close this replica's handle, then pause only when no other replica holds a lease.
      const shared = ws.leases !== undefined && ws.releaseBackend !== undefined;
      let ok = true;
      let kept = false;
      try {
        await ws.close(shared ? { keepBackend: true } : undefined);
        // Ours goes first, so replicas checking meanwhile do not count this one.
        await this.#leases.release(ws);
        if (shared) kept = (await ws.releaseBackend!({ replicaId: this.#leases.replicaId })) === "kept";
      } catch (e) {
        ok = false;
        this.#events.emit({
          type: "error",
          workspaceId: id,
          phase: pausing ? "pause" : "close",
          code: errorCode(e),
          message: errorMessage(e),
          durationMs: performance.now() - started,
        });
      } finally {
        await this.#leases.release(ws);
      }
      // Whoever goes idle last pauses: the sweep retries until the other replicas' leases lapse.
      if (kept && reason === "idle") this.#handedOver.set(id, entry);
      const durationMs = performance.now() - started;
      if (ok && pausing && !kept) this.#events.emit({ type: "pause", workspaceId: id, durationMs });
      this.#events.emit({
        type: "evict",
        workspaceId: id,
        reason,
        paused: ok && pausing && !kept,
        ...(kept ? { keptForReplica: true } : {}),
        idleMs,
        durationMs,
      });
    });
  }

  /** A sweep's retry for a workspace evicted while another replica held a lease on its backend object. */
  #retryHandedOver(): Promise<void>[] {
    const retries: Promise<void>[] = [];
    for (const [id, entry] of this.#handedOver) {
      // Provisioned again meanwhile: this replica holds it (and its lease) once more.
      if (this.#live.has(id) || this.#flights.get(id) || entry.ws.releaseBackend === undefined) {
        this.#handedOver.delete(id);
        continue;
      }
      // The previous try (or an eviction) of this id is still running: the next sweep tries again.
      if (this.#closing.has(id)) continue;
      retries.push(
        this.#trackClosing(id, async () => {
          const started = performance.now();
          try {
            if ((await entry.ws.releaseBackend!({ replicaId: this.#leases.replicaId })) === "kept") return;
            this.#handedOver.delete(id);
            if (this.#profile.eviction === "pause") this.#events.emit({ type: "pause", workspaceId: id, durationMs: performance.now() - started });
          } catch (e) {
            this.#handedOver.delete(id);
            this.#events.emit({
              type: "error",
              workspaceId: id,
              phase: "pause",
              code: errorCode(e),
              message: errorMessage(e),
              durationMs: performance.now() - started,
            });
          }
        }),
      );
    }
    return retries;
  }

  /** Runs a close-like step for an id; a provisioning of the id waits for it (see #provision). */
  #trackClosing(id: string, step: () => Promise<void>): Promise<void> {
    const closing = step();
    const previous = this.#closing.get(id);
    const tracked = previous ? Promise.all([previous, closing]).then(() => undefined) : closing;
    this.#closing.set(id, tracked);
    void tracked.finally(() => {
      if (this.#closing.get(id) === tracked) this.#closing.delete(id);
    });
    return tracked;
  }

  async #renew(ws: W, ttlMs: number): Promise<void> {
    await this.#leases
      .renew(ws, ttlMs)
      .catch((e: unknown) => this.logger.warn("taking a replica lease failed", { workspaceId: ws.workspaceId, error: String(e) }));
  }

  async #closeAll(reason: EvictReason): Promise<void> {
    await this.#flights.settled();
    const evictions = [...this.#live].map(([id, entry]) => this.#evict(id, entry, reason));
    // One last try for workspaces handed over to another replica; after that, theirs to pause.
    const retries = this.#retryHandedOver();
    this.#handedOver.clear();
    await Promise.all([...evictions, ...retries, ...this.#closing.values()]);
  }

  #lazySweep(): void {
    const now = Date.now();
    this.#nextLazySweep = now + this.#sweepMs;
    this.sweep(now).catch((e: unknown) => this.logger.warn("idle sweep failed", { error: String(e) }));
  }

  #createPool(options: z.output<typeof PrewarmSchema>): WarmPool<W> {
    return new WarmPool<W>(options, {
      build: () => this.#build({ workspaceId: newWorkspaceId(), userId: undefined, agentId: undefined, managedBy: "runtime" }, "pool"),
      dispose: (ws) => this.disposePooled(ws),
      onReady: (ws, durationMs) => this.#events.emit({ type: "pool-ready", workspaceId: ws.workspaceId, durationMs }),
      onError: () => undefined, // #build already reported it
      logger: this.logger,
    });
  }
}

/** getWorkspace's checks of the owner's ids for an explicit workspace id (which no session id takes part in), cheap when they pass (the hot path). */
function checkIds(userId: string, agentId: string): void {
  if (typeof userId !== "string" || !isNonBlank(userId)) checkIdentityId(userId, "userId");
  if (typeof agentId !== "string" || !isNonBlank(agentId)) checkIdentityId(agentId, "agentId");
}

function ttlOf(declared: FleetEntry | undefined, fallbackMs: number): number {
  return declared?.ttlSeconds !== undefined ? declared.ttlSeconds * 1000 : fallbackMs;
}
