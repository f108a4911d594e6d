import { createHash } from "node:crypto";
import os from "node:os";
import path from "node:path";
import { FileLeases } from "../../kit/lease.js";
import type { DockerBackendSpec } from "./schema.js";

/**
 * Where Docker workspaces' replica leases live: host-side files, never inside the container.
 *   - with a basedir: `<basedir>/.agentws/leases` (beside the per-id folders; only `<basedir>/<id>`
 *     is mounted, so the agent cannot reach it). Replicas on other hosts share leases when they
 *     share the basedir (the bind mounts need the same folder anyway for a remote engine to be useful);
 *   - ephemeral containers: a per-user folder in the host's tmpdir, keyed by the engine address, so
 *     replicas on one host using one engine share it.
 * Why not in the container (a file written by exec, or a label): labels are immutable after create,
 * and a paused container runs no exec, so a replica could neither renew nor read a lease exactly when
 * it matters (after another replica paused it). Trade-off: replicas on different hosts with
 * ephemeral containers do not see each other's leases; their operations still succeed, through the
 * transparent resume, at the cost of a resume after a pause the leases would have prevented.
 */
export function dockerLeases(spec: Pick<DockerBackendSpec, "basedir" | "socketPath">): FileLeases {
  if (spec.basedir) return new FileLeases(path.join(path.resolve(spec.basedir), ".agentws", "leases"));
  const engine = spec.socketPath ?? process.env.DOCKER_HOST ?? "default";
  const key = createHash("sha256").update(engine).digest("hex").slice(0, 16);
  const user = process.getuid?.() ?? os.userInfo().username;
  const owned = path.join(os.tmpdir(), `agentws-docker-leases-${user}`);
  return new FileLeases(path.join(owned, key), { ownedFolder: owned });
}
