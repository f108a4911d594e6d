import { z } from "zod";
import { ConflictError, fromZodError } from "../../errors.js";
import type { ProgressListener } from "../../logger.js";
import type { Sandbox } from "../../sandbox.js";
import { Workspace, type WorkspaceOptions } from "../../workspace/workspace.js";
import { ensureBackend, type BackendDescription, type EnsureOutcome, type ManagedBy } from "../driver.js";
import { BubblewrapBackendSchema, type BubblewrapBackendSpec } from "../spec.js";
import { BubblewrapDriver } from "./driver.js";
import { BWRAP_WORKDIR } from "./sandbox.js";

/** What close() does to the backend: pause (default for persistent), keep as is, or destroy (default for ephemeral). */
export const TeardownSchema = z.enum(["pause", "keep", "destroy"]);
export type Teardown = z.infer<typeof TeardownSchema>;

export type BubblewrapWorkspaceOptions = WorkspaceOptions &
  Omit<z.input<typeof BubblewrapBackendSchema>, "kind"> & {
    userId?: string | undefined;
    agentId?: string | undefined;
    managedBy?: ManagedBy;
    tags?: Record<string, string>;
    teardown?: Teardown;
    /** The workspace was declared (e.g. by a stack): a missing folder is recreated with a warning. */
    expectExisting?: boolean;
    onProgress?: ProgressListener;
  };

/**
 * A workspace in a bubblewrap sandbox: the host folder `<basedir>/<h(user)>/<h(workspaceId)>` is
 * mounted at /workspace, the network is cut unless `network: "host"`, and stdio MCP servers run
 * inside the sandbox through `spawn`. Without `basedir` the folder is temporary and removed on close.
 */
export class BubblewrapWorkspace extends Workspace {
  protected readonly backendLabel = "bubblewrap-sandboxed";
  readonly spec: BubblewrapBackendSpec;
  readonly driver: BubblewrapDriver;
  readonly #identity: { userId?: string | undefined; agentId?: string | undefined; managedBy: ManagedBy; tags?: Record<string, string> | undefined };
  readonly #teardown: Teardown;
  readonly #expectExisting: boolean;
  readonly #onProgress: ProgressListener | undefined;
  #outcome: EnsureOutcome | undefined;

  constructor(options: BubblewrapWorkspaceOptions = {}) {
    const { basedir, network, env, readOnlyPaths, pythonPackages, npmPackages, userId, agentId, managedBy, tags, teardown, expectExisting, onProgress, ...base } = options;
    super(base);
    const parsed = BubblewrapBackendSchema.safeParse({ kind: "bubblewrap", basedir, network, env, readOnlyPaths, pythonPackages, npmPackages });
    if (!parsed.success) throw fromZodError("options", parsed.error);
    const td = TeardownSchema.optional().safeParse(teardown);
    if (!td.success) throw fromZodError("options.teardown", td.error);
    this.spec = parsed.data;
    this.driver = new BubblewrapDriver(this.spec);
    this.#identity = { userId, agentId, managedBy: managedBy ?? "runtime", tags };
    this.#teardown = td.data ?? (this.driver.persistent ? "pause" : "destroy");
    this.#expectExisting = expectExisting ?? false;
    this.#onProgress = onProgress;
  }

  get workdir(): string {
    return BWRAP_WORKDIR;
  }

  get isPersistent(): boolean {
    return this.driver.persistent;
  }

  /** What the last initialize() did: created, reattached, resumed or recreated. */
  get ensureOutcome(): EnsureOutcome | undefined {
    return this.#outcome;
  }

  protected async provision(): Promise<Sandbox> {
    const { description, outcome } = await ensureBackend(
      this.driver,
      { workspaceId: this.workspaceId, ...this.#identity },
      { expectExisting: this.#expectExisting, logger: this.logger, ...(this.#onProgress ? { onProgress: this.#onProgress } : {}) },
    );
    assertOwner(description, this.#identity.userId);
    this.#outcome = outcome;
    return this.driver.connect(this.workspaceId, { logger: this.logger });
  }

  protected override async teardown(sandbox: Sandbox): Promise<void> {
    await sandbox.close?.();
    if (this.#teardown === "pause") await this.driver.pause();
    else if (this.#teardown === "destroy") await this.driver.destroy(this.workspaceId, { deleteData: true });
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
