import { z } from "zod";
import { ensureBackend, type BackendDescription, type Driver, type DriverContext, type EnsureOutcome, type ManagedBy } from "../contract/driver.js";
import { type WorkspaceIdentity } from "../contract/driver.js";
import type { BackendModule, ReconcileArgs, Teardown } from "../contract/module.js";
import { ConflictError, InternalError, WorkspaceError, fromZodError } from "../errors.js";
import type { ProgressListener } from "../logger.js";
import type { Sandbox } from "../sandbox.js";
import { pauseUnlessLeased } from "./lease.js";
import { type Leases } from "../contract/leases.js";
import { BackendResumer, resumingSandbox } from "./resuming-sandbox.js";
import { checkIdentityId } from "../util/identity-id.js";
import { renderInstructions } from "../workspace/instructions.js";
import { Workspace, type WorkspaceCloseOptions, type WorkspaceOptions } from "../workspace/workspace.js";

/** What close() does to the backend: pause, keep as is, or destroy. The default is the backend's. */
export const TeardownSchema = z.enum(["pause", "keep", "destroy"]) satisfies z.ZodType<Teardown>;
export type { Teardown };

/** Options every driver-backed workspace takes besides its backend spec. */
export interface DriverWorkspaceOptions {
  userId?: string | undefined;
  agentId?: string | undefined;
  managedBy?: ManagedBy;
  tags?: Record<string, string>;
  /** What close() does to the backend object (pause, keep, destroy); the default depends on the backend. */
  teardown?: Teardown;
  /** The workspace was declared (e.g. by a stack): a missing backend object is recreated with a warning. */
  expectExisting?: boolean;
  onProgress?: ProgressListener;
}

/** The options of a workspace over one backend schema: facade options, the spec's fields (no kind), identity and teardown. */
export type DriverWorkspaceOptionsFor<Schema extends z.ZodType> = WorkspaceOptions & Omit<z.input<Schema>, "kind"> & DriverWorkspaceOptions;

/** A driver whose backend objects may outlive the process (a basedir was given). */
export type PersistentAwareDriver = Driver & { readonly persistent: boolean };

/**
 * A workspace whose backend object is handled by a Driver, as its backend's descriptor says:
 * initialize() runs ensureBackend (create, reattach or resume), refuses an id owned by another user,
 * runs the descriptor's reconcile hook and connects; close() pauses, keeps or destroys per
 * `teardown`. `defineBackend` makes one concrete class of it per kind.
 */
export abstract class DriverWorkspace<Spec extends { kind: string }, D extends PersistentAwareDriver> extends Workspace {
  readonly spec: Spec;
  readonly driver: D;
  protected readonly backendLabel: string;
  /** The workspace root for an id (see BackendModule.workdir); undefined: the sandbox's. */
  readonly #workdir: ((workspaceId: string) => string) | undefined;
  readonly #reconcile: ((args: Omit<ReconcileArgs, "driver">) => Promise<EnsureOutcome | undefined>) | undefined;
  readonly #identity: Omit<WorkspaceIdentity, "workspaceId">;
  readonly #teardown: Teardown;
  readonly #destroyDeletesData: boolean;
  readonly #expectExisting: boolean;
  readonly #onProgress: ProgressListener | undefined;
  #outcome: EnsureOutcome | undefined;
  #resumer: BackendResumer | undefined;
  #sandboxWorkdir = "";
  readonly #initFolders: readonly string[];

  protected constructor(options: WorkspaceOptions & DriverWorkspaceOptions, module: BackendModule<Spec, D>) {
    const { userId, agentId, managedBy, tags, teardown, expectExisting, onProgress, ...rest } = options;
    // An empty owner would read as "no owner" somewhere down the line: refused here as at the manager.
    if (userId !== undefined) checkIdentityId(userId, "userId");
    if (agentId !== undefined) checkIdentityId(agentId, "agentId");
    // Every spec key goes to the schema (undefined when absent, as a destructuring would); the rest is the facade's.
    const base: Record<string, unknown> = { ...rest };
    const backendOptions: Record<string, unknown> = {};
    for (const key of Object.keys((module.schema as unknown as { shape: Record<string, unknown> }).shape)) {
      if (key === "kind") continue;
      backendOptions[key] = base[key];
      delete base[key];
    }
    super(base as WorkspaceOptions);
    const parsed = module.schema.safeParse({ kind: module.kind, ...backendOptions });
    if (!parsed.success) throw fromZodError("options", parsed.error);
    const td = TeardownSchema.optional().safeParse(teardown);
    if (!td.success) throw fromZodError("options.teardown", td.error);
    this.backendLabel = module.label;
    this.#initFolders = module.initFolders ?? ["data", "sessions"];
    this.spec = parsed.data;
    const driver = (this.driver = module.createDriver(this.spec));
    const { workdir, reconcile } = module;
    this.#workdir = workdir !== undefined ? () => workdir : module.workdirFor && ((id) => module.workdirFor!(driver, id));
    this.#reconcile = reconcile && ((args) => reconcile.call(module, { ...args, driver }));
    this.#identity = { userId, agentId, managedBy: managedBy ?? "runtime", tags };
    const fallback = module.defaults.teardown;
    this.#teardown = td.data ?? (typeof fallback === "function" ? fallback(this.spec) : fallback);
    this.#destroyDeletesData = module.defaults.destroyDeletesData;
    this.#expectExisting = expectExisting ?? false;
    this.#onProgress = onProgress;
    // A bad template should fail here, not in the middle of building a prompt.
    if (this.#workdir) renderInstructions(this.options.instructions, { backend: this.backendLabel, workdir: this.workdir });
  }

  /** The root as processes in the sandbox see it (for a backend whose sandbox tells it: "" until initialized, as in the reference). */
  get workdir(): string {
    return this.#workdir ? this.#workdir(this.workspaceId) : this.#sandboxWorkdir;
  }

  get isPersistent(): boolean {
    return this.driver.persistent;
  }

  /** Replica leases on this workspace's backend object, when the backend has them. */
  get leases(): Leases | undefined {
    return this.driver.leases;
  }

  /** What the last initialize() did: created, reattached, resumed or recreated. */
  get ensureOutcome(): EnsureOutcome | undefined {
    return this.#outcome;
  }

  protected async provision(): Promise<Sandbox> {
    const identity = { workspaceId: this.workspaceId, ...this.#identity };
    const ctx: DriverContext = { logger: this.logger, ...(this.#onProgress ? { onProgress: this.#onProgress } : {}) };
    const { description, outcome } = await ensureBackend(this.driver, identity, { ...ctx, expectExisting: this.#expectExisting });
    try {
      assertOwner(description, this.#identity.userId);
      this.#outcome = (await this.reconcile(description, identity, ctx)) ?? outcome;
      // Another replica (or an operator) may pause or stop the object at any time, even between the
      // ensure and the connect: connecting and every later operation resume it.
      const resumer = (this.#resumer = new BackendResumer(this.driver, this.workspaceId, this.logger));
      const sandbox = await this.driver.connect(this.workspaceId, { logger: this.logger }).catch(async (e: unknown) => {
        if (!(e instanceof WorkspaceError) || e.code !== "unavailable") throw e;
        await resumer.resume();
        return this.driver.connect(this.workspaceId, { logger: this.logger });
      });
      // As the reference's sandboxed workspaces: data/ and sessions/ exist right after initialize (initFolders).
      // Through the resuming handle: a pause can land right after the connect, too.
      const resuming = resumingSandbox(sandbox, resumer);
      this.#sandboxWorkdir = sandbox.workdir;
      await Promise.all(this.#initFolders.map((dir) => resuming.mkdir(dir))).catch(async (e: unknown) => {
        await sandbox.close?.();
        throw e;
      });
      return resuming;
    } catch (e) {
      // A backend object this call created for a workspace that does not outlive it: leave nothing behind.
      if (this.#teardown === "destroy" && (outcome === "created" || outcome === "recreated"))
        await this.driver
          .destroy(this.workspaceId, { deleteData: this.#destroyDeletesData })
          .catch((err: unknown) =>
            this.logger.warn("removing a workspace after a failed initialize failed", { workspaceId: this.workspaceId, error: String(err) }),
          );
      throw e;
    }
  }

  /** Records `owner` on the backend object of this (unowned, warm-pool) workspace; see Driver.claimOwner. */
  async claimOwner(owner: { userId: string; agentId?: string | undefined }): Promise<void> {
    if (!this.driver.claimOwner) throw new InternalError(`the ${this.driver.kind} driver cannot record an owner after create`);
    await this.driver.claimOwner(this.workspaceId, owner, { logger: this.logger });
  }

  /**
   * Backend-specific repair of an ensured (and owner-checked) backend object before connecting,
   * e.g. a container built from an outdated image. Returns the new outcome when it rebuilt it.
   */
  protected async reconcile(description: BackendDescription, identity: WorkspaceIdentity, ctx: DriverContext): Promise<EnsureOutcome | undefined> {
    return this.#reconcile?.({ description, identity, ctx: { ...ctx, logger: this.logger } });
  }

  protected override async teardown(sandbox: Sandbox, options: WorkspaceCloseOptions = {}): Promise<void> {
    this.#resumer?.close();
    this.#resumer = undefined;
    await sandbox.close?.();
    if (!options.keepBackend) await this.#releaseBackend();
  }

  /**
   * What close() does to the backend object (pause, keep or destroy per `teardown`), done only
   * while no replica but `guard.replicaId` holds a lease on it: "kept" when one does. Works on a
   * closed workspace, so a manager can close its handle first and retry this later.
   */
  async releaseBackend(guard: { replicaId: string }): Promise<"released" | "kept"> {
    if (this.#teardown === "pause") return (await pauseUnlessLeased(this.driver, this.workspaceId, guard)) === "paused" ? "released" : "kept";
    // Never remove an object another replica is using.
    if (this.#teardown === "destroy" && (await this.driver.leases?.othersActive(this.workspaceId, guard.replicaId))) return "kept";
    await this.#releaseBackend();
    return "released";
  }

  async #releaseBackend(): Promise<void> {
    if (this.#teardown === "pause") await this.driver.pause(this.workspaceId);
    else if (this.#teardown === "destroy") await this.driver.destroy(this.workspaceId, { deleteData: this.#destroyDeletesData });
  }

  /** Resumes the backend object when someone paused or stopped it under this open handle; NotFoundError when it is gone. */
  async ensureRunning(): Promise<void> {
    await this.#resumer?.resume();
  }
}

/** A workspace id is never shared between users: refuse one whose backend object names another owner. */
export function assertOwner(description: BackendDescription, userId: string | undefined): void {
  if (description.userId !== undefined && userId !== undefined && description.userId !== userId)
    throw new ConflictError(`workspace '${description.workspaceId}' belongs to another user; workspace ids are never shared between users`, {
      field: "userId",
      details: { workspaceId: description.workspaceId },
    });
}
