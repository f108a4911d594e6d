// The Docker backend: a container per workspace. Entry point `agent-workspaces/docker` (needs the optional peer `dockerode`).
import type { BackendCommand, BackendModule } from "../../contract/module.js";
import { DockerDriver } from "./driver.js";
import { DockerWorkspaceManager } from "./manager.js";
import { DockerBackendSchema, type DockerBackendSpec } from "./schema.js";
import { DockerWorkspace } from "./workspace.js";

export { DockerBackendSchema, type DockerBackendSpec } from "./schema.js";
export { DockerDriver } from "./driver.js";
export type { PruneImagesOptions, PruneImagesResult } from "./image.js";
export { DockerWorkspace, type DockerWorkspaceOptions } from "./workspace.js";
export { DockerWorkspaceManager, DockerWorkspaceManagerOptionsSchema, type DockerWorkspaceManagerOptions } from "./manager.js";

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
      io.stderr("prune-images: name the images to prune with --base IMAGE, or pass --all for every unused workspace image on this engine (other stacks' included); `destroy` with deleteData removes a stack's own");
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

export const backend: BackendModule<DockerBackendSpec> = {
  kind: "docker",
  schema: DockerBackendSchema,
  createDriver: (spec) => new DockerDriver(spec),
  Workspace: DockerWorkspace,
  Manager: DockerWorkspaceManager,
  defaults: { eviction: "pause", sweep: "background", destroyDeletesData: false },
  // The engine is reached at create time, where an unreachable one is an UnavailableError naming DOCKER_HOST.
  canRunHere: () => Promise.resolve(undefined),
  commands: [pruneImages],
};
