import type { Logger } from "../logger.js";

/**
 * What the manager did, for logs and metrics. Every event carries the workspace id and how long
 * the step took; none carries secrets, paths or file contents.
 */
export type ManagerEvent = ProvisionEvent | PauseEvent | EvictEvent | PoolEvent | ErrorEvent;

export interface ProvisionEvent {
  /** create: new backend object; reattach: found it as it was; resume: woke a paused one. */
  type: "create" | "reattach" | "resume";
  workspaceId: string;
  userId: string | undefined;
  agentId: string | undefined;
  managedBy: "pulumi" | "runtime";
  /** cold: built on request; pool: handed off from the warm pool. */
  source: "cold" | "pool";
  /** The backend had lost a workspace that should have existed and a new one was made. */
  recreated?: boolean;
  durationMs: number;
}

export interface PauseEvent {
  type: "pause";
  workspaceId: string;
  durationMs: number;
}

export interface EvictEvent {
  type: "evict";
  workspaceId: string;
  /** idle: TTL sweep; close: close(id); dispose: manager shutdown. */
  reason: EvictReason;
  /** Whether the backend was paused (else closed). */
  paused: boolean;
  /** Another replica holds a lease on the backend object: only this replica's handle was closed, the object runs on. */
  keptForReplica?: boolean;
  idleMs: number;
  durationMs: number;
}
export type EvictReason = "idle" | "close" | "dispose";

export interface PoolEvent {
  /** pool-ready: a warm member finished provisioning; pool-hit / pool-miss: a claim. */
  type: "pool-ready" | "pool-hit" | "pool-miss";
  workspaceId: string;
  durationMs: number;
}

export interface ErrorEvent {
  type: "error";
  workspaceId: string;
  phase: "provision" | "pause" | "close" | "pool" | "listener";
  /** Bounded category for metrics: the WorkspaceError code, or "internal". */
  code: string;
  message: string;
  durationMs: number;
}

export type ManagerEventListener = (event: ManagerEvent) => void;

/** Synchronous fan-out; a throwing listener is logged and never breaks the manager. */
export class ManagerEvents {
  #listeners = new Set<ManagerEventListener>();
  readonly #logger: Logger;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  on(listener: ManagerEventListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  emit(event: ManagerEvent): void {
    if (event.type === "error") this.#logger.warn(`workspace ${event.phase} failed`, { ...event });
    else this.#logger.debug(`workspace ${event.type}`, { ...event });
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch (e) {
        this.#logger.warn("workspace manager event listener threw", { event: event.type, error: String(e) });
      }
    }
  }
}

export function errorCode(e: unknown): string {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[a-z_]+$/.test(code) ? code : "internal";
}

export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
