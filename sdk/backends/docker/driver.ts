// Size: one driver over the Docker API (create with image, network, bind mount and caps; find, list, pause,
// resume, destroy, owner claims); each concern already delegates to image.ts, network.ts, owner-claim.ts.
import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import type Docker from "dockerode";
import { ConflictError, NotFoundError, PathEscapeError, TooLargeError, UnavailableError, WorkspaceError, fromZodError } from "../../errors.js";
import { InvalidArgumentError, ProvisionFailedError } from "../../errors.js";
import type { FileLeases } from "../../kit/lease.js";
import { LABELS, matchesSelector, type BackendDescription, type BackendState, type DestroyOptions, type Driver } from "../../contract/driver.js";
import { type DriverContext, type ListSelector, type ManagedBy, type WorkspaceIdentity } from "../../contract/driver.js";
import { MAX_LISTED } from "../../kit/list.js";
import { WORKSPACE_ID_PATTERN, parseWorkspaceId } from "../../contract/schema.js";
import { DockerBackendSchema, type DockerBackendSpec } from "./schema.js";
import { sharedDockerClient, statusCode } from "./client.js";
import { dockerLeases } from "./lease.js";
import { IMAGE_REPO, dockerUnavailable, ensureImage, imageExists, pruneImages, renderBuildContext, type ImageInputs } from "./image.js";
import { type PruneImagesOptions, type PruneImagesResult } from "./image.js";
import { guardWorkspaceNetwork, ensureWorkspaceNetwork, removeWorkspaceNetwork } from "./network.js";
import { dockerError } from "./errors.js";
import { expandHome } from "../../paths.js";
import { DOCKER_WORKDIR, DockerSandbox } from "./sandbox.js";
import { readOwnerClaim, recordOwnerClaim, removeOwnerClaim } from "./owner-claim.js";

/** Per engine client (shared per socket): whether it shares each basedir with this process. */
const sharesBasedir = new WeakMap<Docker, Map<string, boolean>>();

/** Label marking containers this SDK made; with the identity LABELS. */
export const MANAGED_LABEL = "agent-workspaces.managed";
export const IMAGE_TAG_LABEL = "agent-workspaces.image";
export const PERSISTENT_LABEL = "agent-workspaces.persistent";
const TAG_PREFIX = "agent-workspaces.tag.";
/** CFS period for the cpus cap (a quota, not NanoCpus: the engine refuses NanoCpus above its host's core count). */
const CPU_PERIOD_US = 100_000;

/** The deterministic container name for a workspace id: a restart or a second replica finds it. */
export function containerName(workspaceId: string): string {
  return `agentws-${workspaceId}`;
}

/**
 * Docker lifecycle through dockerode: one long-lived container per workspace (`sleep infinity`
 * under docker-init), named `agentws-<id>` and labelled with the identity, the host folder
 * `<basedir>/<id>` bind-mounted at /workspace (or none: an ephemeral container). Pause and unpause
 * implement the idle TTL. Creating an existing name adopts it (two racing replicas end with one).
 */
/** Size cap of each tmpfs of a read-only-rootfs container (/tmp, /var/tmp, /root): 1 GiB, counted in memoryBytes. */
export const DOCKER_TMP_BYTES = 1 << 30;

export class DockerDriver implements Driver {
  readonly kind = "docker";
  readonly spec: DockerBackendSpec;
  readonly persistent: boolean;
  readonly docker: Docker;
  readonly leases: FileLeases;

  constructor(spec: Partial<DockerBackendSpec> = {}) {
    const parsed = DockerBackendSchema.safeParse({ kind: "docker", ...spec });
    if (!parsed.success) throw fromZodError("backend", parsed.error);
    // `~/ws` means the caller's home, as everywhere else (never a folder named "~").
    this.spec = parsed.data.basedir === undefined ? parsed.data : { ...parsed.data, basedir: expandHome(parsed.data.basedir) };
    this.persistent = this.spec.basedir !== undefined;
    this.docker = sharedDockerClient(this.spec.socketPath);
    this.leases = dockerLeases(this.spec);
  }

  get imageInputs(): ImageInputs {
    const s = this.spec;
    return {
      baseImage: s.baseImage,
      nodeVersion: s.nodeVersion,
      pythonPackages: s.pythonPackages,
      npmPackages: s.npmPackages,
      caCertificates: s.caCertificates,
    };
  }

  /** The tag the current spec's image has (no build). */
  async imageTag(): Promise<string> {
    return (await renderBuildContext(this.imageInputs)).tag;
  }

  /** Host folder bind-mounted for a workspace; null for ephemeral containers. */
  hostPath(workspaceId: string): string | null {
    if (!this.spec.basedir) return null;
    return path.join(path.resolve(this.spec.basedir), parseWorkspaceId(workspaceId));
  }

  async create(identity: WorkspaceIdentity, ctx: DriverContext = {}): Promise<BackendDescription> {
    const id = parseWorkspaceId(identity.workspaceId);
    const found = await this.find(id);
    if (found) return this.#startIfNeeded(found);
    let image = await ensureImage(this.docker, this.imageInputs, ctx);
    const binds: string[] = [];
    const host = await this.#prepareHostFolder(id);
    if (host) binds.push(`${host}:${DOCKER_WORKDIR}:rw`);
    for (const p of this.spec.readOnlyPaths ?? []) {
      if (!(await fs.stat(p).catch(() => null))) throw new InvalidArgumentError(`'${p}' does not exist on the host`, { field: "readOnlyPaths" });
      binds.push(`${p}:${p}:ro`);
    }
    const labels: Record<string, string> = {
      [MANAGED_LABEL]: "true",
      [LABELS.workspaceId]: id,
      [LABELS.managedBy]: identity.managedBy,
      [IMAGE_TAG_LABEL]: image,
      [PERSISTENT_LABEL]: String(this.persistent),
    };
    if (identity.userId !== undefined) labels[LABELS.userId] = identity.userId;
    if (identity.agentId !== undefined) labels[LABELS.agentId] = identity.agentId;
    for (const [k, v] of Object.entries(identity.tags ?? {})) labels[TAG_PREFIX + k] = v;
    ctx.onProgress?.({ phase: "container", message: `creating container ${containerName(id)}` });
    const networkMode = await this.#networkMode(id, labels).catch((e: unknown) => {
      throw this.#mapLifecycleError(e, `create the network of ${containerName(id)}`);
    });
    try {
      const spec = (): Docker.ContainerCreateOptions => ({
        name: containerName(id),
        Image: image,
        Cmd: ["sleep", "infinity"],
        WorkingDir: DOCKER_WORKDIR,
        Labels: labels,
        Env: Object.entries(this.spec.env ?? {}).map(([k, v]) => `${k}=${v}`),
        Tty: false,
        ...(this.#user() ? { User: this.#user() } : {}),
        HostConfig: { Binds: binds, NetworkMode: networkMode, Init: true, ...this.#limits(), ...this.#rootfs(host !== null) },
      });
      let c: Docker.Container | undefined;
      for (let attempt = 0; !c; attempt++) {
        try {
          c = await this.docker.createContainer(spec());
        } catch (e) {
          // Another workspace's update or destroy removed the image between our check and the create
          // (it was unused for that moment): build it again rather than fail this one.
          if (statusCode(e) !== 404 || attempt >= 2) throw e;
          ctx.logger?.info("workspace image went away during create; ensuring it again", { workspaceId: id, image });
          image = await ensureImage(this.docker, this.imageInputs, ctx);
        }
      }
      await c.start().catch((e: unknown) => {
        // 304: a racing replica that adopted it started it first.
        if (statusCode(e) !== 304) throw e;
      });
    } catch (e) {
      // Another replica created it between our find and create: adopt theirs.
      if (statusCode(e) === 409) {
        // The engine reserves the name before the container can be inspected: wait for it briefly.
        for (let i = 0; i < 50; i++) {
          const theirs = await this.find(id);
          if (theirs) return this.#startIfNeeded(theirs);
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      throw this.#mapLifecycleError(e, `create container ${containerName(id)}`);
    }
    ctx.logger?.info("docker workspace container created", { workspaceId: id, container: containerName(id), image });
    const created = await this.find(id);
    if (!created) throw new ProvisionFailedError(`container ${containerName(id)} vanished right after it was created`);
    return created;
  }

  /** The base image is on the engine, the read-only paths and the CA file exist: what create needs, checked changing nothing. */
  async validate(): Promise<void> {
    const base = this.spec.baseImage;
    if (
      !(await imageExists(this.docker, base).catch((e: unknown) => {
        throw this.#mapLifecycleError(e, `inspect image ${base}`);
      }))
    )
      throw new InvalidArgumentError(`'${base}' is not on the Docker engine; build it (scripts/base-image.sh) or pull it first`, {
        field: "backend.baseImage",
      });
    for (const p of this.spec.readOnlyPaths ?? [])
      if (!(await fs.stat(p).catch(() => null))) throw new InvalidArgumentError(`'${p}' does not exist on the host`, { field: "backend.readOnlyPaths" });
    if (this.spec.caCertificates && !(await fs.stat(this.spec.caCertificates).catch(() => null))?.isFile())
      throw new InvalidArgumentError(`'${this.spec.caCertificates}' is not a readable file`, { field: "backend.caCertificates" });
  }

  /**
   * A new container from this spec in place of the old one, over the same bind mount: the image is
   * built and the inputs checked first, so a failure leaves the old container as it was. An
   * ephemeral container's files go with it (the provider asks for an explicit opt-in first).
   */
  async recreate(identity: WorkspaceIdentity, ctx: DriverContext = {}): Promise<BackendDescription> {
    await this.validate();
    await ensureImage(this.docker, this.imageInputs, ctx);
    const old = await this.find(identity.workspaceId);
    const wasPaused = old?.state === "paused";
    if (old) await this.destroy(identity.workspaceId);
    const created = await this.create(identity, ctx);
    if (wasPaused) await this.pause(identity.workspaceId);
    const now = (await this.find(identity.workspaceId)) ?? created;
    // The image the old container ran on is this workspace's leftover once nothing uses it: a stack
    // whose image inputs changed ten times must not keep ten images after its destroy.
    if (old?.location.image && old.location.image !== now.location.image) await this.#dropImage(old.location.image);
    return now;
  }

  /** Applies the caps (tasks, memory, cpus) to the running container: `docker update`, same container. */
  async reconfigure(workspaceId: string): Promise<void> {
    const d = await this.find(workspaceId);
    if (!d) throw new NotFoundError(`docker workspace '${workspaceId}' (container ${containerName(workspaceId)}) not found`, { field: "workspaceId" });
    try {
      await this.docker.getContainer(d.location.containerId!).update(this.#limits());
    } catch (e) {
      throw this.#mapLifecycleError(e, `update the limits of ${containerName(workspaceId)}`);
    }
  }

  /** Removes workspace images no container uses (old tags left by changed image inputs). */
  pruneImages(options: PruneImagesOptions = {}): Promise<PruneImagesResult> {
    return pruneImages(this.docker, options);
  }

  async find(workspaceId: string): Promise<BackendDescription | null> {
    const id = parseWorkspaceId(workspaceId);
    let info: Docker.ContainerInspectInfo;
    try {
      info = await this.docker.getContainer(containerName(id)).inspect();
    } catch (e) {
      if (statusCode(e) === 404) return null;
      throw this.#mapLifecycleError(e, `inspect container ${containerName(id)}`);
    }
    const labels = info.Config.Labels ?? {};
    if (labels[LABELS.workspaceId] !== id)
      throw new ConflictError(`a container named ${containerName(id)} exists but is not agent-workspaces' workspace '${id}'; rename or remove it`, {
        field: "workspaceId",
      });
    const d = describe(id, info);
    // Labels carry the owner set at create time; a warm-pool member's owner is its claim (owner-claim.ts).
    if (d.userId !== undefined) return d;
    const claim = await readOwnerClaim(this.docker, id).catch((e: unknown) => {
      throw this.#mapLifecycleError(e, `read the owner claim of ${containerName(id)}`);
    });
    return claim ? { ...d, userId: claim.userId, agentId: d.agentId ?? claim.agentId } : d;
  }

  /** Records the owner of an unowned container (a warm-pool member handed to a user), engine-side; another owner is a ConflictError. */
  async claimOwner(workspaceId: string, owner: { userId: string; agentId?: string | undefined }): Promise<void> {
    const d = await this.find(workspaceId);
    if (!d) throw new NotFoundError(`docker workspace '${workspaceId}' (container ${containerName(workspaceId)}) not found`, { field: "workspaceId" });
    if (d.userId !== undefined) {
      if (d.userId !== owner.userId)
        throw new ConflictError(`workspace '${workspaceId}' belongs to another user; workspace ids are never shared between users`, {
          field: "userId",
          details: { workspaceId },
        });
      return;
    }
    await recordOwnerClaim(this.docker, parseWorkspaceId(workspaceId), owner).catch((e: unknown) => {
      throw this.#mapLifecycleError(e, `record the owner claim of ${containerName(workspaceId)}`);
    });
  }

  /**
   * Containers carrying our labels on this engine, in this driver's scope: with a basedir, those whose
   * files are bind-mounted from directly under it; without one, the ephemeral ones (no bind mount).
   * So another stack's containers, sharing the engine with another basedir, are never listed.
   */
  async list(selector: ListSelector = {}, ctx: DriverContext = {}): Promise<BackendDescription[]> {
    const label = [`${MANAGED_LABEL}=true`];
    if (selector.managedBy !== undefined) label.push(`${LABELS.managedBy}=${selector.managedBy}`);
    if (typeof selector.userId === "string") label.push(`${LABELS.userId}=${selector.userId}`);
    let rows: Docker.ContainerInfo[];
    try {
      rows = await this.docker.listContainers({ all: true, filters: { label } });
    } catch (e) {
      throw this.#mapLifecycleError(e, "list workspace containers");
    }
    if (rows.length > MAX_LISTED) throw new TooLargeError(`more than ${MAX_LISTED} workspace containers on this engine; list refuses a partial answer`);
    const base = this.spec.basedir ? await fs.realpath(path.resolve(this.spec.basedir)).catch(() => path.resolve(this.spec.basedir!)) : undefined;
    const out: BackendDescription[] = [];
    for (const row of rows) {
      const id = row.Labels?.[LABELS.workspaceId];
      if (typeof id !== "string" || !WORKSPACE_ID_PATTERN.test(id) || `/${containerName(id)}` !== row.Names?.[0]) continue;
      const found = await this.find(id).catch((e: unknown) => {
        ctx.logger?.warn("skipped a workspace container that could not be inspected while listing", { workspaceId: id, error: String(e) });
        return null;
      });
      if (!found || !matchesSelector(found, selector)) continue;
      const host = found.location.hostPath;
      if (base === undefined ? host !== undefined : host === undefined || path.dirname(host) !== base) continue;
      out.push(found);
    }
    return out;
  }

  async pause(workspaceId: string): Promise<void> {
    const d = await this.find(workspaceId);
    if (!d || d.state !== "running") return;
    try {
      await this.#freeze(d.location.containerId!);
    } catch (e) {
      // Already paused by a racing replica, or stopped meanwhile: the goal state holds.
      if (statusCode(e) === 409) return;
      // Other refusals of a racing pause: the state decides (an unreachable engine still fails).
      const now = await this.find(workspaceId).catch(() => undefined);
      if (now === null || (now !== undefined && now.state !== "running")) return;
      throw this.#mapLifecycleError(e, `pause ${containerName(workspaceId)}`);
    }
  }

  /**
   * On cgroup v1, runc gives a freeze up ("unable to freeze") when the container's tasks do not all stop
   * within its retries, as on a loaded host; it thaws them again, so the container still runs: try again.
   */
  async #freeze(containerId: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.docker.getContainer(containerId).pause();
      } catch (e) {
        if (attempt >= 4 || statusCode(e) !== 500 || !/unable to freeze/.test(String((e as Error).message))) throw e;
        await new Promise((r) => setTimeout(r, 50 * 2 ** attempt));
      }
    }
  }

  async resume(workspaceId: string): Promise<void> {
    const d = await this.find(workspaceId);
    if (!d) throw new NotFoundError(`docker workspace '${workspaceId}' (container ${containerName(workspaceId)}) not found`, { field: "workspaceId" });
    await this.#startIfNeeded(d);
    await this.#settledRunning(workspaceId);
  }

  /**
   * The engine applies containerd's "paused" event asynchronously: right after a quick pause then
   * unpause, a late event can flip the daemon's view back to paused for a few milliseconds, and exec
   * is refused meanwhile. Wait until the engine agrees the container runs, unpausing again if needed.
   */
  async #settledRunning(workspaceId: string, { deadlineMs = 10_000, unpause = true } = {}): Promise<BackendDescription> {
    const until = Date.now() + deadlineMs;
    for (let delay = 5; ; delay = Math.min(delay * 2, 200)) {
      const d = await this.find(workspaceId);
      if (!d) throw new NotFoundError(`docker workspace '${workspaceId}' (container ${containerName(workspaceId)}) not found`, { field: "workspaceId" });
      if (d.state === "running") return d;
      if (Date.now() >= until) return d;
      await new Promise((r) => setTimeout(r, delay));
      if (unpause && delay >= 100) await this.#startIfNeeded(d);
    }
  }

  async destroy(workspaceId: string, options: DestroyOptions = {}): Promise<void> {
    const id = parseWorkspaceId(workspaceId);
    // find() refuses a foreign container holding the name (ConflictError): it is never removed.
    const found = await this.find(id);
    if (options.leftover) return this.#destroyLeftover(id, found, options);
    if (found) {
      const container = this.docker.getContainer(found.location.containerId!);
      // Thaw a paused container before the forced removal: a frozen process cannot die of SIGKILL
      // until thawed, and we have seen the engine hang (holding the container's lock) on that path.
      if (found.state === "paused") await container.unpause().catch(() => undefined);
      try {
        await container.remove({ force: true, v: true });
      } catch (e) {
        const code = statusCode(e);
        // 404: already gone; 409: removal already in progress (a racing destroy).
        if (code !== 404 && code !== 409) throw this.#mapLifecycleError(e, `remove ${containerName(id)}`);
      }
    }
    await removeWorkspaceNetwork(this.docker, id).catch((e: unknown) => {
      throw this.#mapLifecycleError(e, `remove the network of ${containerName(id)}`);
    });
    await removeOwnerClaim(this.docker, id).catch((e: unknown) => {
      throw this.#mapLifecycleError(e, `remove the owner claim of ${containerName(id)}`);
    });
    const host = this.hostPath(id);
    if (options.deleteData && host) {
      const base = path.resolve(this.spec.basedir!);
      if (path.dirname(host) !== base) throw new PathEscapeError(`path '${host}' is not directly under basedir`);
      await fs.rm(host, { recursive: true, force: true });
    }
    // With deleteData the workspace's image goes too unless another container uses it (the engine
    // refuses to remove an image in use: never forced, so no other stack's container is touched).
    // Best effort and bounded: a busy engine must not hold up the destroy.
    if (options.deleteData) await this.#dropImage(found?.location.image);
  }

  /**
   * The bind folder `<basedir>/<id>` an earlier destroy kept: with deleteData it goes, never a
   * container. When this id's container (on this engine) still mounts it, that is a ConflictError
   * and nothing is removed; the container of a workspace that moved to another basedir is left alone.
   */
  async #destroyLeftover(id: string, found: BackendDescription | null, options: DestroyOptions): Promise<void> {
    const host = this.hostPath(id);
    if (!options.deleteData || !host) return;
    const mounted = found?.location.hostPath;
    if (mounted !== undefined && path.resolve(mounted) === host)
      throw new ConflictError(`host folder ${host} is mounted by the live container ${containerName(id)}; it is not deleted`, {
        field: "backend.basedir",
        details: { folder: host },
      });
    if (path.dirname(host) !== path.resolve(this.spec.basedir!)) throw new PathEscapeError(`path '${host}' is not directly under basedir`);
    await fs.rm(host, { recursive: true, force: true });
  }

  /**
   * Removes one of our workspace images unless a container uses it (never forced: the engine refuses
   * an image in use, so no other stack's container is touched). Best effort and bounded: a busy
   * engine must not hold up a destroy or an update.
   */
  async #dropImage(tag: string | undefined): Promise<void> {
    if (!tag?.startsWith(`${IMAGE_REPO}:`)) return;
    const removal = this.docker
      .getImage(tag)
      .remove()
      .catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([removal, new Promise((r) => (timer = setTimeout(r, 30_000)))]).finally(() => clearTimeout(timer));
  }

  /**
   * Container labels are immutable, so new tags mean a new container: done only for persistent
   * workspaces (files live in the bind mount); an ephemeral one would lose its files, so it is refused.
   */
  async updateTags(workspaceId: string, tags: Record<string, string>, ctx: DriverContext = {}): Promise<void> {
    const d = await this.find(workspaceId);
    if (!d) throw new NotFoundError(`docker workspace '${workspaceId}' (container ${containerName(workspaceId)}) not found`, { field: "workspaceId" });
    if (sameTags(d.tags, tags)) return;
    if (d.location.persistent !== "true")
      throw new InvalidArgumentError(
        `an ephemeral Docker workspace cannot be re-labelled without losing its files; replace the workspace, or give it a basedir`,
        { field: "tags" },
      );
    const wasPaused = d.state === "paused";
    await this.destroy(workspaceId);
    await this.create({ workspaceId, userId: d.userId, agentId: d.agentId, managedBy: d.managedBy ?? "runtime", tags }, ctx);
    if (wasPaused) await this.pause(workspaceId);
  }

  async connect(workspaceId: string, ctx: DriverContext = {}): Promise<DockerSandbox> {
    let d = await this.find(workspaceId);
    if (!d)
      throw new NotFoundError(`docker workspace '${workspaceId}' (container ${containerName(workspaceId)}); create it first not found`, {
        field: "workspaceId",
      });
    // A just-resumed container can read as paused for a moment (see #settledRunning); a container
    // that really is paused stays so: connecting never resumes.
    if (d.state === "paused") d = await this.#settledRunning(workspaceId, { deadlineMs: 1_000, unpause: false });
    if (d.state !== "running") throw new UnavailableError(`docker workspace '${workspaceId}' is ${d.state}; resume it first`);
    await guardWorkspaceNetwork(d.workspaceId, d.location.network);
    const persistent = d.location.persistent === "true";
    const hostRoot = persistent && d.location.hostPath ? await this.#visibleHostRoot(d) : undefined;
    return new DockerSandbox(this.docker, d.location.containerId!, { persistent, hostRoot, logger: ctx.logger });
  }

  /**
   * The bind-mounted folder when this process sees the same files as the container (a local engine):
   * a probe file written here must appear at /workspace inside. Otherwise file operations use exec.
   * The answer holds for every folder under the same basedir on this engine, so one probe per
   * engine client and basedir serves every later connect in this process (the manager builds a
   * new workspace, and driver, for each resume, which would otherwise pay an exec for it).
   */
  async #visibleHostRoot(d: BackendDescription): Promise<string | undefined> {
    const host = d.location.hostPath!;
    const base = path.dirname(host);
    let byBase = sharesBasedir.get(this.docker);
    if (!byBase) sharesBasedir.set(this.docker, (byBase = new Map()));
    const known = byBase.get(base);
    if (known !== undefined) return known ? host : undefined;
    const probe = `.agentws-probe-${randomBytes(6).toString("hex")}`;
    try {
      await fs.writeFile(path.join(host, probe), "", { flag: "wx", mode: 0o600 });
    } catch {
      // Not remembered: the folder may just not be writable yet.
      return undefined;
    }
    try {
      const exec = new DockerSandbox(this.docker, d.location.containerId!, { persistent: true, plain: true });
      const shared = (await exec.exec(["test", "-f", `${DOCKER_WORKDIR}/${probe}`])).exitCode === 0;
      byBase.set(base, shared);
      return shared ? host : undefined;
    } finally {
      await fs.rm(path.join(host, probe), { force: true });
    }
  }

  async #startIfNeeded(d: BackendDescription): Promise<BackendDescription> {
    // A workspace on its own network runs only behind the host firewall rules.
    await guardWorkspaceNetwork(d.workspaceId, d.location.network);
    const c = this.docker.getContainer(d.location.containerId!);
    try {
      if (d.state === "paused") await c.unpause();
      else if (d.state === "stopped") await c.start();
    } catch (e) {
      // 304 "already started" / 409 "not paused": a racing replica got there first. Some engines
      // answer a racing unpause with 500 "is not paused": the state decides, not the status code.
      const code = statusCode(e);
      if (code !== 304 && code !== 409 && (await this.find(d.workspaceId).catch(() => null))?.state !== "running")
        throw this.#mapLifecycleError(e, `resume ${d.location.containerName}`);
    }
    return { ...d, state: "running" };
  }

  /** "none" and "bridge" as Docker has them; "internet": the workspace's own network, created or adopted. */
  async #networkMode(id: string, labels: Record<string, string>): Promise<string> {
    if (this.spec.network !== "internet") return this.spec.network;
    const identity = Object.entries(labels).filter(([k]) => k !== IMAGE_TAG_LABEL && k !== PERSISTENT_LABEL);
    return ensureWorkspaceNetwork(this.docker, id, Object.fromEntries(identity));
  }

  /** The caps: tasks, memory with swap capped at the same figure (so swap cannot stretch it), and a CFS quota for cpus. */
  #limits(): Pick<Docker.HostConfig, "PidsLimit" | "Memory" | "MemorySwap" | "CpuPeriod" | "CpuQuota"> {
    const s = this.spec;
    return {
      PidsLimit: s.maxProcesses,
      Memory: s.memoryBytes,
      MemorySwap: s.memoryBytes,
      CpuPeriod: CPU_PERIOD_US,
      CpuQuota: Math.max(1000, Math.round(s.cpus * CPU_PERIOD_US)),
    };
  }

  /**
   * The runner's boundary in the container. CAP_SYS_PTRACE is not in Docker's default set; dropped by name
   * all the same, since the runner being undumpable protects it only from processes without it. With a
   * read-only rootfs (the default): sized tmpfs where programs expect to write, and an anonymous volume
   * (removed with the container) at /workspace when no host folder is bound there.
   */
  #rootfs(hostFolder: boolean): Pick<Docker.HostConfig, "CapDrop" | "ReadonlyRootfs" | "Tmpfs" | "Mounts"> {
    const out: Pick<Docker.HostConfig, "CapDrop" | "ReadonlyRootfs" | "Tmpfs" | "Mounts"> = { CapDrop: ["SYS_PTRACE"] };
    if (!this.spec.readOnlyRootfs) return out;
    const tmp = `rw,nosuid,nodev,size=${DOCKER_TMP_BYTES},mode=1777`;
    out.ReadonlyRootfs = true;
    out.Tmpfs = {
      "/tmp": tmp,
      "/var/tmp": tmp,
      "/run": `rw,nosuid,nodev,size=${64 << 20},mode=755`,
      "/root": `rw,nosuid,nodev,size=${DOCKER_TMP_BYTES},mode=700`,
    };
    if (!hostFolder) out.Mounts = [{ Type: "volume", Source: "", Target: DOCKER_WORKDIR }];
    return out;
  }

  /** Who runs inside: the spec's user, else for a bind mount the caller's ids when it is not root (so its files stay the caller's). */
  #user(): string | undefined {
    if (this.spec.user) return this.spec.user;
    const uid = process.getuid?.();
    const gid = process.getgid?.();
    return this.persistent && uid !== undefined && uid !== 0 ? `${uid}:${gid ?? uid}` : undefined;
  }

  async #prepareHostFolder(id: string): Promise<string | null> {
    if (!this.spec.basedir) return null;
    const base = path.resolve(this.spec.basedir);
    await fs.mkdir(base, { recursive: true, mode: 0o700 });
    const host = path.join(base, id);
    await fs.mkdir(host, { recursive: true, mode: 0o700 });
    const [realBase, real] = await Promise.all([fs.realpath(base), fs.realpath(host)]);
    if (path.dirname(real) !== realBase) throw new PathEscapeError(`path '${host}' resolves to '${real}', outside basedir '${realBase}'`);
    return real;
  }

  #mapLifecycleError(e: unknown, what: string): unknown {
    if (e instanceof WorkspaceError) return e;
    const u = dockerUnavailable(e);
    if (u !== e) return u;
    return dockerError(e, what);
  }
}

function describe(id: string, info: Docker.ContainerInspectInfo): BackendDescription {
  const labels = info.Config.Labels ?? {};
  const state: BackendState = info.State.Paused ? "paused" : info.State.Running ? "running" : "stopped";
  const tags: Record<string, string> = {};
  for (const [k, v] of Object.entries(labels)) if (k.startsWith(TAG_PREFIX)) tags[k.slice(TAG_PREFIX.length)] = v;
  // A bind only: an ephemeral container with a read-only rootfs has an anonymous volume there.
  const bind = info.Mounts?.find((m) => m.Destination === DOCKER_WORKDIR && m.Type === "bind");
  const location: Record<string, string> = {
    containerId: info.Id,
    containerName: info.Name.replace(/^\//, ""),
    image: labels[IMAGE_TAG_LABEL] ?? info.Config.Image,
    persistent: String(!!bind),
    workdir: DOCKER_WORKDIR,
    network: info.HostConfig?.NetworkMode ?? "default",
  };
  if (bind?.Source) location.hostPath = bind.Source;
  return {
    workspaceId: id,
    kind: "docker",
    state,
    userId: labels[LABELS.userId],
    agentId: labels[LABELS.agentId],
    managedBy: labels[LABELS.managedBy] as ManagedBy | undefined,
    tags,
    location,
  };
}

function sameTags(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}
