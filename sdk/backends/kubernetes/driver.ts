// Size: one driver over the Kubernetes API: the PVC as the durable record, the Pod's lifecycle around
// it (create/adopt, readiness with cleanup, pause/resume, destroy with or without the data), listing
// and owner claims; manifests, names, exec and errors already live in their own files.
import type { V1PersistentVolumeClaim, V1Pod } from "@kubernetes/client-node";
import { loadKubernetesClient } from "./sdk.js";
import { ConflictError, NotFoundError, ProvisionFailedError, TimeoutError, TooLargeError, UnavailableError, WorkspaceError } from "../../errors.js";
import { fromZodError } from "../../errors.js";
import { LABELS, matchesSelector, type BackendDescription, type BackendState, type Driver, type DriverContext } from "../../contract/driver.js";
import { type ListSelector, type ManagedBy, type WorkspaceIdentity } from "../../contract/driver.js";
import { MAX_LISTED } from "../../kit/list.js";
import { WORKSPACE_ID_PATTERN, parseWorkspaceId } from "../../contract/schema.js";
import { kubeClients, kubeError, statusOf, withRetry, type KubeClients } from "./client.js";
import { PodWake } from "./pod-watch.js";
import { GRACE_SECONDS, podManifest, pvcManifest, type ManifestIdentity } from "./manifests.js";
import { ANNOTATIONS, CONTAINER, MANAGED_LABEL, TAG_LABEL_PREFIX, identityLabels, labelValue, objectName, readTags } from "./names.js";
import { K8sSandbox } from "./sandbox.js";
import { KubernetesBackendSchema, type KubernetesBackendSpec } from "./schema.js";

/** Merge-patch request options, made on first use (the client package loads lazily). */
let mergeOptions: ReturnType<ReturnType<typeof loadKubernetesClient>["setHeaderOptions"]> | undefined;
const merge = () => {
  const { setHeaderOptions, PatchStrategy } = loadKubernetesClient();
  return (mergeOptions ??= setHeaderOptions("Content-Type", PatchStrategy.MergePatch));
};
/** How long a deleted object may take to leave the API (a Pod's grace period, the PVC protection finalizer). */
const GONE_TIMEOUT_MS = 90_000;
/** Waiting reasons that no amount of waiting fixes: fail the readiness wait at once. */
const FATAL_WAITING = new Set(["ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError"]);
/**
 * How long a Pod may wait on an unbound PVC before the PVC is touched, and then how often again. A
 * volume controller or scheduler that missed an event (one restarted, a watch lost) otherwise leaves
 * the Pod unschedulable until its next full resync, minutes later; an update makes both look again.
 */
const REQUEUE_EVERY_MS = 10_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Kubernetes lifecycle: one PVC and one Pod per workspace in `namespace`, both named by
 * objectName(id). The PVC is the workspace: its annotations hold the identity, the owner and the
 * lifecycle marks (paused, released), and the whole tree lives on it; the Pod is disposable.
 * A create meeting 409 adopts; pause deletes the Pod and keeps the PVC; resume makes the Pod again.
 */
export class K8sDriver implements Driver {
  readonly kind = "kubernetes";
  readonly spec: KubernetesBackendSpec;
  readonly persistent = true;
  #clients: KubeClients | undefined;

  constructor(spec: Partial<KubernetesBackendSpec> & { image: string }) {
    const parsed = KubernetesBackendSchema.safeParse({ kind: "kubernetes", ...spec });
    if (!parsed.success) throw fromZodError("backend", parsed.error);
    this.spec = parsed.data;
  }

  /** Loaded on first use: a driver can be built (and its spec checked) without a reachable cluster. */
  get clients(): KubeClients {
    return (this.#clients ??= kubeClients(this.spec));
  }

  get namespace(): string {
    return this.spec.namespace;
  }

  async create(identity: WorkspaceIdentity, ctx: DriverContext = {}): Promise<BackendDescription> {
    const id = parseWorkspaceId(identity.workspaceId);
    const name = objectName(id);
    ctx.onProgress?.({ phase: "volume", message: `ensuring PVC ${this.namespace}/${name}` });
    const { pvc, created } = await this.#ensurePvc(id, identity);
    ctx.onProgress?.({ phase: "pod", message: `ensuring pod ${this.namespace}/${name}` });
    const ready = await this.#ensurePod(id, pvc, { dropPvcOnFailure: created });
    ctx.logger?.info("kubernetes workspace ready", { workspaceId: id, namespace: this.namespace, pod: name, pvcCreated: created });
    // Described from what the wait last read: no second lookup.
    return describe(this.namespace, ready.pvc, ready.pod);
  }

  async find(workspaceId: string): Promise<BackendDescription | null> {
    const id = parseWorkspaceId(workspaceId);
    const pvc = await this.#readPvc(id);
    if (!pvc || pvc.metadata?.deletionTimestamp || pvc.metadata?.annotations?.[ANNOTATIONS.released]) return null;
    const pod = await this.#readPod(id);
    return describe(this.namespace, pvc, pod);
  }

  /** Workspaces in this driver's namespace (its scope): PVCs with our label, each confirmed by its exact annotation. */
  async list(selector: ListSelector = {}): Promise<BackendDescription[]> {
    const parts = [`${MANAGED_LABEL}=true`];
    if (selector.managedBy !== undefined) parts.push(`${LABELS.managedBy}=${selector.managedBy}`);
    if (typeof selector.userId === "string") parts.push(`${LABELS.userId}=${labelValue(selector.userId)}`);
    const labelSelector = parts.join(",");
    const [pvcs, pods] = await Promise.all([
      this.#api("list workspace PVCs", () =>
        this.clients.core.listNamespacedPersistentVolumeClaim({ namespace: this.namespace, labelSelector, limit: MAX_LISTED + 1 }),
      ),
      this.#api("list workspace pods", () =>
        this.clients.core.listNamespacedPod({ namespace: this.namespace, labelSelector: `${MANAGED_LABEL}=true`, limit: MAX_LISTED + 1 }),
      ),
    ]);
    if (pvcs.items.length > MAX_LISTED || pvcs.metadata?._continue)
      throw new TooLargeError(`more than ${MAX_LISTED} workspace PVCs in namespace ${this.namespace}; list refuses a partial answer`);
    const byName = new Map(pods.items.map((p) => [p.metadata?.name ?? "", p]));
    const out: BackendDescription[] = [];
    for (const pvc of pvcs.items) {
      const id = pvc.metadata?.annotations?.[ANNOTATIONS.workspaceId];
      if (!id || !WORKSPACE_ID_PATTERN.test(id) || pvc.metadata?.name !== objectName(id)) continue;
      if (pvc.metadata.deletionTimestamp || pvc.metadata.annotations?.[ANNOTATIONS.released]) continue;
      const pod = byName.get(pvc.metadata.name);
      const d = describe(this.namespace, pvc, pod?.metadata?.annotations?.[ANNOTATIONS.workspaceId] === id ? pod : undefined);
      if (matchesSelector(d, selector)) out.push(d);
    }
    return out;
  }

  /** Deletes the Pod and keeps the PVC (marked paused, so a find tells a pause from a Pod lost by accident). */
  async pause(workspaceId: string): Promise<void> {
    const id = parseWorkspaceId(workspaceId);
    const d = await this.find(id);
    if (!d || d.state === "paused") return;
    await this.#annotate(id, { [ANNOTATIONS.paused]: "true" });
    await this.#deletePod(id);
  }

  /** Makes the Pod again on the same PVC and waits until it runs. */
  async resume(workspaceId: string): Promise<void> {
    const id = parseWorkspaceId(workspaceId);
    const pvc = await this.#readPvc(id);
    if (!pvc || pvc.metadata?.deletionTimestamp || pvc.metadata?.annotations?.[ANNOTATIONS.released])
      throw new NotFoundError(`kubernetes workspace '${id}' (PVC ${this.namespace}/${objectName(id)}) not found`, { field: "workspaceId" });
    if (pvc.metadata?.annotations?.[ANNOTATIONS.paused]) await this.#annotate(id, { [ANNOTATIONS.paused]: null });
    await this.#ensurePod(id, pvc, { dropPvcOnFailure: false });
  }

  /** Removes the Pod; the PVC too with deleteData (or deletePvcOnClose), else it is kept, marked released, for a later create to adopt. */
  async destroy(workspaceId: string, options: { deleteData?: boolean } = {}): Promise<void> {
    const id = parseWorkspaceId(workspaceId);
    const pvc = await this.#readPvc(id); // refuses a foreign PVC holding the name
    await this.#deletePod(id);
    if (!pvc) return;
    if (options.deleteData || this.spec.deletePvcOnClose) await this.#deletePvc(id);
    else if (!pvc.metadata?.deletionTimestamp) await this.#annotate(id, { [ANNOTATIONS.released]: "true", [ANNOTATIONS.paused]: null });
  }

  /** Tags are labels and an annotation: patched in place on the PVC and the Pod. */
  async updateTags(workspaceId: string, tags: Record<string, string>): Promise<void> {
    const id = parseWorkspaceId(workspaceId);
    const pvc = await this.#readPvc(id);
    if (!pvc || pvc.metadata?.annotations?.[ANNOTATIONS.released]) throw new NotFoundError(`kubernetes workspace '${id}' not found`, { field: "workspaceId" });
    const labels: Record<string, string | null> = {};
    for (const k of Object.keys(pvc.metadata?.labels ?? {})) if (k.startsWith(TAG_LABEL_PREFIX)) labels[k] = null;
    const now = identityLabels({ workspaceId: id, managedBy: "runtime" }, tags);
    for (const [k, v] of Object.entries(now)) if (k.startsWith(TAG_LABEL_PREFIX)) labels[k] = v;
    const body = { metadata: { labels, annotations: { [ANNOTATIONS.tags]: JSON.stringify(tags) } } };
    const name = objectName(id);
    await this.#api(`label PVC ${name}`, () => this.clients.core.patchNamespacedPersistentVolumeClaim({ name, namespace: this.namespace, body }, merge()));
    await this.#api(`label pod ${name}`, () =>
      this.clients.core.patchNamespacedPod({ name, namespace: this.namespace, body: { metadata: { labels } } }, merge()),
    ).catch((e: unknown) => {
      if (!(e instanceof NotFoundError)) throw e;
    });
  }

  /** Records the owner of an unowned workspace on its PVC, guarded by the resourceVersion (two claimers: one wins). */
  async claimOwner(workspaceId: string, owner: { userId: string; agentId?: string | undefined }): Promise<void> {
    const id = parseWorkspaceId(workspaceId);
    for (let i = 0; i < 10; i++) {
      const pvc = await this.#readPvc(id);
      const d = pvc && !pvc.metadata?.annotations?.[ANNOTATIONS.released] ? describe(this.namespace, pvc, undefined) : null;
      if (!d) throw new NotFoundError(`kubernetes workspace '${id}' not found`, { field: "workspaceId" });
      if (d.userId !== undefined) {
        if (d.userId !== owner.userId)
          throw new ConflictError(`workspace '${id}' belongs to another user; workspace ids are never shared between users`, {
            field: "userId",
            details: { workspaceId: id },
          });
        return;
      }
      const agentId = d.agentId ?? owner.agentId;
      const annotations: Record<string, string> = { [ANNOTATIONS.userId]: owner.userId, ...(agentId !== undefined ? { [ANNOTATIONS.agentId]: agentId } : {}) };
      const labels: Record<string, string> = {
        [LABELS.userId]: labelValue(owner.userId),
        ...(agentId !== undefined ? { [LABELS.agentId]: labelValue(agentId) } : {}),
      };
      const name = objectName(id);
      try {
        // Guarded by the resourceVersion, so a retry after a lost connection cannot overwrite anyone.
        await withRetry(() =>
          this.clients.core.patchNamespacedPersistentVolumeClaim(
            { name, namespace: this.namespace, body: { metadata: { resourceVersion: pvc!.metadata?.resourceVersion, annotations, labels } } },
            merge(),
          ),
        );
      } catch (e) {
        if (statusOf(e) === 409) continue; // someone changed it meanwhile: read again
        throw kubeError(e, `record the owner of PVC ${name}`, this.clients.source);
      }
      await this.#api(`label pod ${name}`, () =>
        this.clients.core.patchNamespacedPod({ name, namespace: this.namespace, body: { metadata: { labels } } }, merge()),
      ).catch(() => undefined);
      return;
    }
    throw new ConflictError(`workspace '${id}': its owner record kept changing; try again`);
  }

  async connect(workspaceId: string): Promise<K8sSandbox> {
    const id = parseWorkspaceId(workspaceId);
    const d = await this.find(id);
    if (!d)
      throw new NotFoundError(`kubernetes workspace '${id}' (PVC ${this.namespace}/${objectName(id)}); create it first not found`, { field: "workspaceId" });
    if (d.state !== "running") throw new UnavailableError(`kubernetes workspace '${id}' is ${d.state}; resume it first`);
    // A Pod another replica just made may still be starting: wait for it as a create would.
    await this.#waitReady(id, Date.now() + this.spec.readinessTimeoutMs);
    return new K8sSandbox({ clients: this.clients, namespace: this.namespace, pod: objectName(id) });
  }

  // ---------------------------------------------------------------- PVC

  async #ensurePvc(id: string, identity: WorkspaceIdentity): Promise<{ pvc: V1PersistentVolumeClaim; created: boolean }> {
    const name = objectName(id);
    const until = Date.now() + GONE_TIMEOUT_MS;
    for (;;) {
      try {
        const pvc = await withRetry(() =>
          this.clients.core.createNamespacedPersistentVolumeClaim({ namespace: this.namespace, body: pvcManifest(this.spec, identity) }),
        );
        return { pvc, created: true };
      } catch (e) {
        if (statusOf(e) !== 409) throw kubeError(e, `create PVC ${this.namespace}/${name}`, this.clients.source);
      }
      const existing = await this.#readPvc(id);
      if (existing && !existing.metadata?.deletionTimestamp) {
        const a = existing.metadata?.annotations ?? {};
        if (!a[ANNOTATIONS.released] && !a[ANNOTATIONS.paused]) return { pvc: existing, created: false };
        // Adopting kept data: the old owner stays (a workspace id is never handed to another user).
        const patch: Record<string, string | null> = { [ANNOTATIONS.released]: null, [ANNOTATIONS.paused]: null };
        if (a[ANNOTATIONS.released]) {
          patch[ANNOTATIONS.managedBy] = identity.managedBy;
          if (a[ANNOTATIONS.userId] === undefined && identity.userId !== undefined) patch[ANNOTATIONS.userId] = identity.userId;
          if (a[ANNOTATIONS.agentId] === undefined && identity.agentId !== undefined) patch[ANNOTATIONS.agentId] = identity.agentId;
          patch[ANNOTATIONS.tags] = JSON.stringify(identity.tags ?? {});
        }
        return { pvc: await this.#annotate(id, patch), created: false };
      }
      // Gone, or still being deleted (a destroy that removed the data): wait, then create afresh.
      if (Date.now() > until) throw new TimeoutError(`PVC ${this.namespace}/${name} is still being deleted; try again later`);
      await sleep(200);
    }
  }

  async #readPvc(id: string): Promise<V1PersistentVolumeClaim | null> {
    const name = objectName(id);
    try {
      const pvc = await withRetry(() => this.clients.core.readNamespacedPersistentVolumeClaim({ name, namespace: this.namespace }));
      if (pvc.metadata?.annotations?.[ANNOTATIONS.workspaceId] !== id)
        throw new ConflictError(`a PVC named ${this.namespace}/${name} exists but is not agent-workspaces' workspace '${id}'; rename or remove it`, {
          field: "workspaceId",
        });
      return pvc;
    } catch (e) {
      if (statusOf(e) === 404) return null;
      throw kubeError(e, `read PVC ${this.namespace}/${name}`, this.clients.source);
    }
  }

  async #annotate(id: string, annotations: Record<string, string | null>): Promise<V1PersistentVolumeClaim> {
    const name = objectName(id);
    return this.#api(`annotate PVC ${name}`, () =>
      this.clients.core.patchNamespacedPersistentVolumeClaim({ name, namespace: this.namespace, body: { metadata: { annotations } } }, merge()),
    );
  }

  async #deletePvc(id: string): Promise<void> {
    const name = objectName(id);
    await this.#api(`delete PVC ${name}`, () => this.clients.core.deleteNamespacedPersistentVolumeClaim({ name, namespace: this.namespace })).catch(
      (e: unknown) => {
        if (!(e instanceof NotFoundError)) throw e;
      },
    );
    await this.#waitGone(`PVC ${name}`, () => this.clients.core.readNamespacedPersistentVolumeClaim({ name, namespace: this.namespace }));
  }

  // ---------------------------------------------------------------- Pod

  async #readPod(id: string): Promise<V1Pod | undefined> {
    const name = objectName(id);
    try {
      const pod = await withRetry(() => this.clients.core.readNamespacedPod({ name, namespace: this.namespace }));
      if (pod.metadata?.annotations?.[ANNOTATIONS.workspaceId] !== id)
        throw new ConflictError(`a pod named ${this.namespace}/${name} exists but is not agent-workspaces' workspace '${id}'; rename or remove it`, {
          field: "workspaceId",
        });
      return pod;
    } catch (e) {
      if (statusOf(e) === 404) return undefined;
      throw kubeError(e, `read pod ${this.namespace}/${name}`, this.clients.source);
    }
  }

  /**
   * Creates the Pod (a 409 adopts the one there; one still terminating is waited out first), then
   * waits until it runs. A Pod that does not come up in time is deleted, and with it the PVC when
   * this very call made it (an empty volume); a PVC that held data stays.
   */
  async #ensurePod(id: string, pvc: V1PersistentVolumeClaim, o: { dropPvcOnFailure: boolean }): Promise<{ pod: V1Pod; pvc: V1PersistentVolumeClaim }> {
    const name = objectName(id);
    const deadline = Date.now() + this.spec.readinessTimeoutMs;
    const a = pvc.metadata?.annotations ?? {};
    const identity: ManifestIdentity = {
      workspaceId: id,
      userId: a[ANNOTATIONS.userId],
      agentId: a[ANNOTATIONS.agentId],
      managedBy: a[ANNOTATIONS.managedBy] ?? "runtime",
      tags: readTags(a),
    };
    const owned = this.spec.runAsUser === null || a[ANNOTATIONS.volumeOwner] === String(this.spec.runAsUser);
    let pod: V1Pod;
    let marked: Promise<V1PersistentVolumeClaim | undefined> | undefined;
    const markOwned = () => (marked ??= this.#annotate(id, { [ANNOTATIONS.volumeOwner]: String(this.spec.runAsUser) }).catch(() => undefined));
    try {
      for (;;) {
        try {
          await withRetry(() => this.clients.core.createNamespacedPod({ namespace: this.namespace, body: podManifest(this.spec, identity, owned) }));
          break;
        } catch (e) {
          if (statusOf(e) !== 409) throw kubeError(e, `create pod ${this.namespace}/${name}`, this.clients.source);
        }
        const pod = await this.#readPod(id);
        if (pod && !pod.metadata?.deletionTimestamp && pod.status?.phase !== "Failed" && pod.status?.phase !== "Succeeded") break; // adopt
        if (pod && !pod.metadata?.deletionTimestamp) await this.#deletePod(id);
        else if (pod) await sleep(200);
        if (Date.now() > deadline) throw new TimeoutError(`pod ${this.namespace}/${name} is still being deleted; try again later`);
      }
      // The volume's ownership is recorded as soon as the init container that set it has succeeded,
      // while the workspace container starts (a later Pod then skips that step).
      pod = await this.#waitReady(id, deadline, owned ? undefined : markOwned);
    } catch (e) {
      if (e instanceof ConflictError) throw e;
      await this.#deletePod(id, 0).catch(() => undefined);
      if (o.dropPvcOnFailure) await this.#deletePvc(id).catch(() => undefined);
      throw e;
    }
    const now = (owned ? undefined : await markOwned()) ?? pvc;
    // The bound volume's name comes with the PVC once bound; a PVC read before that is read again.
    return { pod, pvc: now.spec?.volumeName ? now : ((await this.#readPvc(id).catch(() => null)) ?? now) };
  }

  /** Polls the Pod until its workspace container runs (a watch cuts the sleeps short); a reason no wait can fix fails at once. */
  async #waitReady(id: string, deadline: number, initDone?: () => void): Promise<V1Pod> {
    const wake = new PodWake(this.clients.kc, this.namespace, objectName(id));
    try {
      return await this.#pollReady(id, deadline, wake, initDone);
    } finally {
      wake.stop();
    }
  }

  async #pollReady(id: string, deadline: number, wake: PodWake, initDone?: () => void): Promise<V1Pod> {
    const name = objectName(id);
    let last = "pending";
    let waitingOnVolume: number | undefined;
    let requeues = 0;
    let volume = "";
    for (let delay = 25; ; delay = Math.min(delay * 2, 250)) {
      const pod = await this.#readPod(id).catch((e: unknown) => {
        if (e instanceof WorkspaceError && e.code === "unavailable") return null; // the API server restarting: keep waiting
        throw e;
      });
      if (pod === undefined) throw new UnavailableError(`pod ${this.namespace}/${name} was deleted while it was starting`);
      if (pod) {
        const s = pod.status;
        const main = s?.containerStatuses?.find((c) => c.name === CONTAINER);
        if (s?.phase === "Running" && main?.state?.running && !pod.metadata?.deletionTimestamp) return pod;
        if (initDone && s?.initContainerStatuses?.length && s.initContainerStatuses.every((c) => c.state?.terminated?.exitCode === 0)) initDone();
        if (s?.phase === "Failed" || s?.phase === "Succeeded")
          throw new ProvisionFailedError(`pod ${this.namespace}/${name} ended (${s.phase}): ${s.reason ?? ""} ${s.message ?? ""}`.trim());
        const waiting = [...(s?.initContainerStatuses ?? []), ...(s?.containerStatuses ?? [])].map((c) => c.state?.waiting).find((w) => w?.reason);
        const unscheduled = s?.conditions?.find((c) => c.type === "PodScheduled" && c.status === "False");
        last = waiting ? `${waiting.reason}: ${waiting.message ?? ""}` : unscheduled ? `unschedulable: ${unscheduled.message ?? ""}` : (s?.phase ?? "pending");
        if (unscheduled && /PersistentVolumeClaim/i.test(unscheduled.message ?? "")) {
          waitingOnVolume ??= Date.now();
          if (Date.now() - waitingOnVolume >= REQUEUE_EVERY_MS * (requeues + 1)) volume = (await this.#requeueVolume(id, ++requeues)) ?? volume;
        } else {
          waitingOnVolume = undefined;
          volume = "";
        }
        if (waiting?.reason && FATAL_WAITING.has(waiting.reason))
          throw new ProvisionFailedError(`pod ${this.namespace}/${name} cannot start: ${last.slice(0, 500)}`);
      }
      if (Date.now() + delay > deadline)
        throw new TimeoutError(`pod ${this.namespace}/${name} did not run within ${this.spec.readinessTimeoutMs} ms (last: ${last.slice(0, 500)}${volume})`);
      await wake.sleep(delay);
    }
  }

  /** Touches the PVC a Pod waits on (see REQUEUE_EVERY_MS); returns what the timeout says of it, or undefined when the patch failed. */
  async #requeueVolume(id: string, count: number): Promise<string | undefined> {
    const pvc = await this.#annotate(id, { [ANNOTATIONS.requeued]: String(count) }).catch(() => undefined);
    return pvc && ` (PVC ${this.namespace}/${objectName(id)} ${pvc.status?.phase ?? "Pending"}, storage class ${pvc.spec?.storageClassName ?? "(default)"})`;
  }

  /** Deletes the Pod (missing is fine) and waits until it has left the API, so the name is free again. */
  async #deletePod(id: string, gracePeriodSeconds = GRACE_SECONDS): Promise<void> {
    const name = objectName(id);
    const pod = await this.#readPod(id);
    if (!pod) return;
    await this.#api(`delete pod ${name}`, () => this.clients.core.deleteNamespacedPod({ name, namespace: this.namespace, gracePeriodSeconds })).catch(
      (e: unknown) => {
        if (!(e instanceof NotFoundError)) throw e;
      },
    );
    await this.#waitGone(`pod ${name}`, () => this.clients.core.readNamespacedPod({ name, namespace: this.namespace }));
  }

  async #waitGone(what: string, read: () => Promise<unknown>): Promise<void> {
    const until = Date.now() + GONE_TIMEOUT_MS;
    for (let delay = 25; ; delay = Math.min(delay * 2, 500)) {
      try {
        await withRetry(read);
      } catch (e) {
        if (statusOf(e) === 404) return;
        throw kubeError(e, `read ${what}`, this.clients.source);
      }
      if (Date.now() > until) throw new TimeoutError(`${this.namespace}/${what} is still being deleted after ${GONE_TIMEOUT_MS} ms`);
      await sleep(delay);
    }
  }

  async #api<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await withRetry(fn);
    } catch (e) {
      throw kubeError(e, what, this.clients.source);
    }
  }
}

function describe(namespace: string, pvc: V1PersistentVolumeClaim, pod: V1Pod | undefined): BackendDescription {
  const a = pvc.metadata?.annotations ?? {};
  const live = pod && !pod.metadata?.deletionTimestamp && pod.status?.phase !== "Failed" && pod.status?.phase !== "Succeeded";
  const state: BackendState = live ? "running" : a[ANNOTATIONS.paused] ? "paused" : "stopped";
  const location: Record<string, string> = {
    namespace,
    pvcName: pvc.metadata?.name ?? "",
    podName: pod?.metadata?.name ?? "",
    storageSize: pvc.spec?.resources?.requests?.storage ?? "",
    storageClassName: pvc.spec?.storageClassName ?? "",
    persistent: "true",
    workdir: "/workspace",
  };
  if (pvc.spec?.volumeName) location.volumeName = pvc.spec.volumeName;
  const image = pod?.spec?.containers?.find((c) => c.name === CONTAINER)?.image;
  if (image) location.image = image;
  return {
    workspaceId: a[ANNOTATIONS.workspaceId] ?? "",
    kind: "kubernetes",
    state,
    userId: a[ANNOTATIONS.userId],
    agentId: a[ANNOTATIONS.agentId],
    managedBy: a[ANNOTATIONS.managedBy] as ManagedBy | undefined,
    tags: readTags(a),
    location,
  };
}
