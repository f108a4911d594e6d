import type { z } from "zod";
import { fromZodError } from "../../errors.js";
import type { ProgressListener } from "../../logger.js";
import type { Sandbox } from "../../sandbox.js";
import { Workspace, type WorkspaceOptions } from "../../workspace/workspace.js";
import { TeardownSchema, assertOwner, type Teardown } from "../bubblewrap/workspace.js";
import { ensureBackend, type EnsureOutcome, type ManagedBy, type WorkspaceIdentity } from "../driver.js";
import { DockerBackendSchema, type DockerBackendSpec } from "../spec.js";
import { DockerDriver } from "./driver.js";
import { DOCKER_WORKDIR } from "./sandbox.js";

export type DockerWorkspaceOptions = WorkspaceOptions &
  Omit<z.input<typeof DockerBackendSchema>, "kind"> & {
    userId?: string | undefined;
    agentId?: string | undefined;
    managedBy?: ManagedBy;
    tags?: Record<string, string>;
    /** What close() does to the container: "pause" (default), "keep" running, or "destroy" it (files under basedir stay). */
    teardown?: Teardown;
    /** The workspace was declared (e.g. by a stack): a missing container is recreated with a warning. */
    expectExisting?: boolean;
    onProgress?: ProgressListener;
  };

/**
 * A workspace in a Docker container on the engine at DOCKER_HOST (or `socketPath`): the image is
 * built from the spec (and reused by its hash), `<basedir>/<workspaceId>` is bind-mounted at
 * /workspace (none: an ephemeral container), and the container is found again by its name after a
 * restart. close() pauses it by default; the next initialize() resumes it.
 */
export class DockerWorkspace extends Workspace {
  protected readonly backendLabel = "Docker-based";
  readonly spec: DockerBackendSpec;
  readonly driver: DockerDriver;
  readonly #identity: Omit<WorkspaceIdentity, "workspaceId">;
  readonly #teardown: Teardown;
  readonly #expectExisting: boolean;
  readonly #onProgress: ProgressListener | undefined;
  #outcome: EnsureOutcome | undefined;

  constructor(options: DockerWorkspaceOptions = {}) {
    const {
      basedir,
      baseImage,
      nodeVersion,
      pythonPackages,
      npmPackages,
      env,
      network,
      socketPath,
      readOnlyPaths,
      caCertificates,
      user,
      userId,
      agentId,
      managedBy,
      tags,
      teardown,
      expectExisting,
      onProgress,
      ...base
    } = options;
    super(base);
    const parsed = DockerBackendSchema.safeParse({
      kind: "docker",
      basedir,
      baseImage,
      nodeVersion,
      pythonPackages,
      npmPackages,
      env,
      network,
      socketPath,
      readOnlyPaths,
      caCertificates,
      user,
    });
    if (!parsed.success) throw fromZodError("options", parsed.error);
    const td = TeardownSchema.optional().safeParse(teardown);
    if (!td.success) throw fromZodError("options.teardown", td.error);
    this.spec = parsed.data;
    this.driver = new DockerDriver(this.spec);
    this.#identity = { userId, agentId, managedBy: managedBy ?? "runtime", tags };
    this.#teardown = td.data ?? "pause";
    this.#expectExisting = expectExisting ?? false;
    this.#onProgress = onProgress;
  }

  get workdir(): string {
    return DOCKER_WORKDIR;
  }

  get isPersistent(): boolean {
    return this.driver.persistent;
  }

  /** What the last initialize() did: created, reattached, resumed or recreated. */
  get ensureOutcome(): EnsureOutcome | undefined {
    return this.#outcome;
  }

  protected async provision(): Promise<Sandbox> {
    const identity = { workspaceId: this.workspaceId, ...this.#identity };
    const ctx = { logger: this.logger, ...(this.#onProgress ? { onProgress: this.#onProgress } : {}) };
    const { description, outcome } = await ensureBackend(this.driver, identity, { ...ctx, expectExisting: this.#expectExisting });
    assertOwner(description, this.#identity.userId);
    this.#outcome = outcome;
    const wanted = await this.driver.imageTag();
    if (description.location.image !== wanted) {
      if (description.location.persistent === "true") {
        // The image inputs changed (packages, base image): files live in the bind mount, so a new container is safe.
        this.logger.info("workspace image changed; recreating the container (files kept)", { workspaceId: this.workspaceId, from: description.location.image, to: wanted });
        await this.driver.destroy(this.workspaceId);
        await this.driver.create(identity, ctx);
        this.#outcome = "recreated";
      } else {
        this.logger.warn("workspace image changed but the container is ephemeral; keeping the old image to keep its files", { workspaceId: this.workspaceId });
      }
    }
    return this.driver.connect(this.workspaceId);
  }

  protected override async teardown(sandbox: Sandbox): Promise<void> {
    await sandbox.close?.();
    if (this.#teardown === "pause") await this.driver.pause(this.workspaceId);
    else if (this.#teardown === "destroy") await this.driver.destroy(this.workspaceId);
  }
}
