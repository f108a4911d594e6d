import { NotFoundError, WorkspaceError } from "../errors.js";
import type { Logger } from "../logger.js";
import { forwardingSandbox, SANDBOX_OPERATIONS, type Sandbox } from "../sandbox.js";
import type { Driver } from "../contract/driver.js";

/** Sandbox methods retried once after a resume: every operation. spawn is not: its failure surfaces on the stream, after it started. */
const RETRIED = new Set<PropertyKey>(SANDBOX_OPERATIONS);

/**
 * Brings a workspace's backend object back to running when an operation found it unavailable:
 * single-flight per workspace handle (concurrent failing operations share one find + resume), and
 * convergent across replicas because Driver.resume is idempotent and tolerates a racing resume.
 */
export class BackendResumer {
  #flight: Promise<void> | undefined;
  #closed = false;

  constructor(
    readonly driver: Driver,
    readonly workspaceId: string,
    readonly logger: Logger,
  ) {}

  /** Whether operations may still resume the backend: false once the handle's own workspace closed it. */
  get active(): boolean {
    return !this.#closed;
  }

  /** The workspace released this handle (and maybe paused the object itself): a stale handle must not wake it. */
  close(): void {
    this.#closed = true;
  }

  /** Resolves once the backend object runs again; NotFoundError when it is really gone. */
  resume(): Promise<void> {
    this.#flight ??= this.#resume().finally(() => {
      this.#flight = undefined;
    });
    return this.#flight;
  }

  async #resume(): Promise<void> {
    const found = await this.driver.find(this.workspaceId);
    if (!found)
      throw new NotFoundError(`${this.driver.kind} workspace '${this.workspaceId}' is gone from its backend; initialize it again to recreate it not found`, {
        field: "workspaceId",
      });
    if (found.state === "running") return; // another replica resumed it first
    await this.driver.resume(this.workspaceId);
    this.logger.info("workspace backend was paused or stopped by someone else; resumed it", {
      workspaceId: this.workspaceId,
      kind: this.driver.kind,
      was: found.state,
    });
  }
}

/**
 * The handle with transparent resume: an operation failing `unavailable` (the backend object was
 * paused or stopped by another replica, or by hand) resumes it and runs once more; a second
 * failure, or a backend object that is gone, reaches the caller, and so does any failure once the
 * workspace itself closed the handle (a stale handle never wakes what its owner paused). Only `unavailable` is retried:
 * those errors mean the operation was refused before it ran (a paused container refuses exec).
 * Everything else (properties, spawn, close) is the inner handle's, so `instanceof` and casts hold.
 */
export function resumingSandbox<S extends Sandbox>(inner: S, resumer: BackendResumer): S {
  return forwardingSandbox(inner, (prop, method) =>
    RETRIED.has(prop)
      ? async (...args: unknown[]) => {
          try {
            return await method(...args);
          } catch (e) {
            if (!(e instanceof WorkspaceError) || e.code !== "unavailable" || !resumer.active) throw e;
            await resumer.resume();
            return await method(...args);
          }
        }
      : undefined,
  );
}
