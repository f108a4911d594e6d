// The Docker backend: a container per workspace. Entry point `agent-workspaces/docker` (needs the optional peer `dockerode`).
import type { BackendCommand } from "../../contract/module.js";
import { defineBackend, type ManagerOptionsFor } from "../define.js";
import type { DriverWorkspaceOptionsFor } from "../../kit/driver-workspace.js";
import { DockerDriver } from "./driver.js";
import { DockerBackendSchema } from "./schema.js";
import { DOCKER_WORKDIR } from "./sandbox.js";

export { DockerBackendSchema, type DockerBackendSpec } from "./schema.js";
export { DockerDriver } from "./driver.js";
export type { PruneImagesOptions, PruneImagesResult } from "./image.js";

/** Old workspace images pile up as image inputs change; this clears the unused ones (DOCKER_HOST applies). */
const pruneImages: BackendCommand = {
  name: "prune-images",
  description: "remove Docker workspace images no container uses (DOCKER_HOST applies)",
  options: {
    base: { type: "string", value: "IMAGE", help: "only images built from this base image" },
    all: { type: "boolean", help: "every unused workspace image on this engine, other stacks' included" },
    "dry-run": { type: "boolean", help: "list what would be removed, remove nothing" },
  },
  examples: ["agentws prune-images --base debian:bookworm-slim --dry-run", "agentws prune-images --all"],
  async run(values, io) {
    const dryRun = values["dry-run"] === true;
    const baseImage = typeof values.base === "string" ? values.base : undefined;
    // The engine may be shared: unused images of other users' stacks are theirs to prune.
    if (baseImage === undefined && values.all !== true) {
      io.stderr(
        "prune-images: name the images to prune with --base IMAGE, or pass --all for every unused workspace image on this engine (other stacks' included); `destroy` with deleteData removes a stack's own",
      );
      return 2;
    }
    const { removed, kept } = await new DockerDriver({}).pruneImages({ baseImage, dryRun });
    const verb = dryRun ? "would remove" : "removed";
    for (const r of removed) io.stderr(`${verb} ${r.tag} (${(r.bytes / 1e6).toFixed(1)} MB)`);
    for (const k of kept) io.stderr(`kept ${k.tag}: used by ${k.containers} container(s)`);
    const total = removed.reduce((n, r) => n + r.bytes, 0);
    io.stderr(`${verb} ${removed.length} image(s), ${(total / 1e6).toFixed(1)} MB; kept ${kept.length} in use`);
    io.stdout(`${JSON.stringify({ dryRun, removed, kept }, null, 2)}\n`);
    return 0;
  },
};

export const backend = defineBackend({
  schema: DockerBackendSchema,
  Driver: DockerDriver,
  label: "Docker-based",
  workdir: DOCKER_WORKDIR,
  // No canRunHere: the engine is reached at create time, where an unreachable one is an UnavailableError naming DOCKER_HOST.
  commands: [pruneImages],
  /** A container built from an outdated image (packages, base image changed) is replaced when its files live in the bind mount. */
  async reconcile({ driver, description, identity, ctx }) {
    const wanted = await driver.imageTag();
    if (description.location.image === wanted) return undefined;
    if (description.location.persistent === "true") {
      // The image inputs changed (packages, base image): files live in the bind mount, so a new container is safe.
      ctx.logger.info("workspace image changed; recreating the container (files kept)", {
        workspaceId: identity.workspaceId,
        from: description.location.image,
        to: wanted,
      });
      await driver.destroy(identity.workspaceId);
      // A claimed warm-pool member's owner lived in its claim, removed with the container: label the new one.
      await driver.create({ ...identity, userId: identity.userId ?? description.userId, agentId: identity.agentId ?? description.agentId }, ctx);
      return "recreated";
    }
    ctx.logger.warn("workspace image changed but the container is ephemeral; keeping the old image to keep its files", { workspaceId: identity.workspaceId });
    return undefined;
  },
});

/** teardown: "pause" (default), "keep" running, or "destroy" the container (files under basedir stay). */
export type DockerWorkspaceOptions = DriverWorkspaceOptionsFor<typeof DockerBackendSchema>;

/**
 * A workspace in a Docker container on the engine at DOCKER_HOST (or `socketPath`): the image is
 * built from the spec (and reused by its hash), `<basedir>/<workspaceId>` is bind-mounted at
 * /workspace (none: an ephemeral container), and the container is found again by its name after a
 * restart. close() pauses it by default; the next initialize() resumes it.
 */
export class DockerWorkspace extends backend.Workspace {}

export const DockerWorkspaceManagerOptionsSchema = backend.ManagerOptionsSchema;
export type DockerWorkspaceManagerOptions = ManagerOptionsFor<typeof DockerBackendSchema>;

/**
 * Docker workspaces served at runtime: one container per workspace id (`agentws-<id>`), its files in
 * `<basedir>/<workspaceId>` (per id, so sessions or agents never share a folder by accident).
 * Idle workspaces are paused by a background sweeper and unpaused on the next request; a restarted
 * service or a second replica finds the same container by name.
 */
export class DockerWorkspaceManager extends backend.managerFor(DockerWorkspace) {}
