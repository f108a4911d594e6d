import type { BackendDescription, DriverContext, EnsureOutcome, WorkspaceIdentity } from "../../contract/driver.js";
import { DriverWorkspace, type DriverWorkspaceOptionsFor } from "../../kit/driver-workspace.js";
import { DockerBackendSchema, type DockerBackendSpec } from "./schema.js";
import { DockerDriver } from "./driver.js";
import { DOCKER_WORKDIR } from "./sandbox.js";

/** teardown: "pause" (default), "keep" running, or "destroy" the container (files under basedir stay). */
export type DockerWorkspaceOptions = DriverWorkspaceOptionsFor<typeof DockerBackendSchema>;

/**
 * A workspace in a Docker container on the engine at DOCKER_HOST (or `socketPath`): the image is
 * built from the spec (and reused by its hash), `<basedir>/<workspaceId>` is bind-mounted at
 * /workspace (none: an ephemeral container), and the container is found again by its name after a
 * restart. close() pauses it by default; the next initialize() resumes it.
 */
export class DockerWorkspace extends DriverWorkspace<DockerBackendSpec, DockerDriver> {
  protected readonly backendLabel = "Docker-based";

  constructor(options: DockerWorkspaceOptions = {}) {
    super(options, {
      kind: "docker",
      schema: DockerBackendSchema,
      createDriver: (spec) => new DockerDriver(spec),
      defaultTeardown: () => "pause",
      destroyDeletesData: false,
    });
  }

  get workdir(): string {
    return DOCKER_WORKDIR;
  }

  /** A container built from an outdated image (packages, base image changed) is replaced when its files live in the bind mount. */
  protected override async reconcile(description: BackendDescription, identity: WorkspaceIdentity, ctx: DriverContext): Promise<EnsureOutcome | undefined> {
    const wanted = await this.driver.imageTag();
    if (description.location.image === wanted) return undefined;
    if (description.location.persistent === "true") {
      // The image inputs changed (packages, base image): files live in the bind mount, so a new container is safe.
      this.logger.info("workspace image changed; recreating the container (files kept)", { workspaceId: this.workspaceId, from: description.location.image, to: wanted });
      await this.driver.destroy(this.workspaceId);
      // A claimed warm-pool member's owner lived in its claim, removed with the container: label the new one.
      await this.driver.create({ ...identity, userId: identity.userId ?? description.userId, agentId: identity.agentId ?? description.agentId }, ctx);
      return "recreated";
    }
    this.logger.warn("workspace image changed but the container is ephemeral; keeping the old image to keep its files", { workspaceId: this.workspaceId });
    return undefined;
  }
}
