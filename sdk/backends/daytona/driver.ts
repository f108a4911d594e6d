// Size: one driver over Daytona's API: find by label (ours and the Python reference's), create with convergence, the state machine of start / stop / archive, list, tags, owner claims.
import { createHash } from "node:crypto";
import type { Daytona, Sandbox as DaytonaSdkSandbox } from "@daytonaio/sdk";
import { ConflictError, InvalidArgumentError, NotFoundError, ProvisionFailedError, TooLargeError, UnavailableError, fromZodError } from "../../errors.js";
import { LABELS, matchesSelector, type BackendDescription, type BackendState, type Driver, type DriverContext } from "../../contract/driver.js";
import { type ListSelector, type ManagedBy, type WorkspaceIdentity } from "../../contract/driver.js";
import { MAX_LISTED } from "../../kit/list.js";
import { parseWorkspaceId } from "../../contract/schema.js";
import { daytonaClient } from "./client.js";
import { daytonaError, isNotFound } from "./errors.js";
import { DaytonaSandbox } from "./sandbox.js";
import { shLine } from "./scripts.js";
import { DaytonaBackendSchema, type DaytonaBackendSpec } from "./schema.js";

/** Label marking sandboxes this SDK made; with the identity LABELS. */
export const MANAGED_LABEL = "agent-workspaces.managed";
/** The Python reference's label: its sandboxes are found (and kept) too. */
export const REFERENCE_LABEL = "agentscope.workspace.id";
const TAG_PREFIX = "agent-workspaces.tag.";
const PIP_LABEL = "agent-workspaces.extra-pip";
/** The folder under the sandbox's work dir that is the workspace root. */
export const WORKSPACE_FOLDER = "workspace";

/** States a sandbox can come back from; the rest (destroying, destroyed, build failures) count as gone. */
const USABLE = new Set([
  "started",
  "starting",
  "creating",
  "restoring",
  "pulling_snapshot",
  "pending_build",
  "building_snapshot",
  "stopped",
  "stopping",
  "archived",
  "archiving",
  "paused",
  "pausing",
  "resuming",
  "resizing",
  "snapshotting",
  "forking",
  "error",
]);
const STARTING = new Set([
  "starting",
  "creating",
  "restoring",
  "resuming",
  "pulling_snapshot",
  "pending_build",
  "building_snapshot",
  "resizing",
  "snapshotting",
  "forking",
]);
const STOPPING = new Set(["stopping", "pausing", "archiving"]);
const PAUSED = new Set(["stopped", "stopping", "paused", "pausing"]);

/** How long a lookup's answer serves a following connect. */
const RECENT_MS = 5_000;
/** Work dirs by sandbox id (they never change): connecting again costs no extra call. */
const WORKDIRS = new Map<string, string>();

/**
 * Daytona lifecycle through `@daytonaio/sdk`: one sandbox per workspace, labelled with the
 * identity (Daytona has no unique names we could rely on, so a workspace is found by label). Two
 * replicas creating one id converge: each lists after its create, the oldest sandbox wins, and a
 * loser deletes its own. Pause is Daytona's stop (files kept, processes gone); `archive` moves a
 * stopped sandbox's files to object storage; resume is start. Files live in the sandbox, so
 * destroying it removes them whatever `deleteData` says.
 */
export class DaytonaDriver implements Driver {
  readonly kind = "daytona";
  readonly persistent = true;
  readonly spec: DaytonaBackendSpec;
  #client: Daytona | undefined;
  readonly #byKey = new Map<string, Daytona>();
  #passedKey: string | undefined;
  /** The sandbox each workspace id resolved to on this driver's last lookup, and when (connect right after ensure needs no second listing). */
  readonly #recent = new Map<string, { sandbox: DaytonaSdkSandbox; at: number }>();

  constructor(spec: Partial<DaytonaBackendSpec> = {}) {
    const parsed = DaytonaBackendSchema.safeParse({ kind: "daytona", ...spec });
    if (!parsed.success) throw fromZodError("backend", parsed.error);
    if (parsed.data.snapshot && parsed.data.image) throw new InvalidArgumentError("give snapshot or image, not both", { field: "backend.image" });
    this.spec = parsed.data;
  }

  /** The SDK client, made on first use (so building a driver never needs credentials). */
  get client(): Daytona {
    this.#client ??= daytonaClient(this.spec);
    return this.#client;
  }

  /**
   * The spec's key wins; else one the Pulumi provider passed (`agentws:credentials.apiKey`), kept
   * for this driver's later calls that carry no context (the provider's seeding connects without
   * one); else DAYTONA_API_KEY.
   */
  #api(ctx: DriverContext = {}): Daytona {
    const key = ctx.credentials?.apiKey ?? this.#passedKey;
    if (this.spec.apiKey || !key) return this.client;
    this.#passedKey = key;
    let c = this.#byKey.get(key);
    if (!c) this.#byKey.set(key, (c = daytonaClient({ ...this.spec, apiKey: key })));
    return c;
  }

  async create(identity: WorkspaceIdentity, ctx: DriverContext = {}): Promise<BackendDescription> {
    const id = parseWorkspaceId(identity.workspaceId);
    const existing = await this.#winner(id, ctx);
    if (existing) return describe(id, await this.#ensureStarted(existing, ctx));
    ctx.onProgress?.({ phase: "sandbox", message: `creating a Daytona sandbox for ${id}` });
    let mine: DaytonaSdkSandbox;
    try {
      mine = await this.#api(ctx).create(
        {
          labels: this.#labels(identity),
          envVars: this.spec.env ?? {},
          public: false,
          autoStopInterval: this.spec.autoStopInterval,
          ...(this.spec.autoArchiveInterval !== undefined ? { autoArchiveInterval: this.spec.autoArchiveInterval } : {}),
          ...(this.spec.user ? { user: this.spec.user } : {}),
          ...(this.spec.image ? { image: this.spec.image } : this.spec.snapshot ? { snapshot: this.spec.snapshot } : {}),
        },
        { timeout: this.spec.timeoutSeconds },
      );
    } catch (e) {
      // A create that timed out may still finish: the next ensure finds it by label, never a second one.
      throw daytonaError(e, `create the Daytona sandbox of workspace '${id}'`);
    }
    // Convergence: whoever created later sees the older sandbox and removes its own.
    const winner = (await this.#winner(id, ctx)) ?? mine;
    this.#remember(id, winner);
    if (winner.id !== mine.id) {
      ctx.logger?.info("another replica created this workspace's sandbox first; removing ours", { workspaceId: id, kept: winner.id, removed: mine.id });
      await mine.delete(this.spec.timeoutSeconds).catch((e: unknown) => {
        if (!isNotFound(e))
          ctx.logger?.warn("removing a duplicate Daytona sandbox failed", { workspaceId: id, sandboxId: mine.id, error: daytonaError(e, "delete").message });
      });
      return describe(id, await this.#ensureStarted(winner, ctx));
    }
    await this.#installPip(mine, ctx);
    ctx.logger?.info("daytona workspace sandbox created", { workspaceId: id, sandboxId: mine.id });
    return describe(id, mine);
  }

  async find(workspaceId: string, ctx: DriverContext = {}): Promise<BackendDescription | null> {
    const id = parseWorkspaceId(workspaceId);
    const w = await this.#winner(id, ctx);
    return w ? describe(id, w) : null;
  }

  async list(selector: ListSelector = {}, ctx: DriverContext = {}): Promise<BackendDescription[]> {
    const labels: Record<string, string> = { [MANAGED_LABEL]: "true" };
    if (selector.managedBy !== undefined) labels[LABELS.managedBy] = selector.managedBy;
    if (typeof selector.userId === "string") labels[LABELS.userId] = selector.userId;
    const rows = await this.#list(labels, "list workspace sandboxes", ctx);
    const byId = new Map<string, DaytonaSdkSandbox[]>();
    for (const s of rows) {
      const id = s.labels?.[LABELS.workspaceId];
      if (!id || !USABLE.has(String(s.state))) continue;
      byId.set(id, [...(byId.get(id) ?? []), s]);
    }
    const out: BackendDescription[] = [];
    for (const [id, sandboxes] of byId) {
      const d = describe(id, oldest(sandboxes)!);
      if (matchesSelector(d, selector)) out.push(d);
      else ctx.logger?.debug("listing skipped a sandbox the selector does not match", { workspaceId: id });
    }
    return out;
  }

  /** Stops the sandbox (files kept, processes gone): Daytona's way to stop paying for an idle one. */
  async pause(workspaceId: string, ctx: DriverContext = {}): Promise<void> {
    const w = await this.#winner(parseWorkspaceId(workspaceId), ctx);
    if (!w) return;
    await this.#stop(w, ctx);
  }

  /** Stops, then archives (files to object storage; the slowest to start again): for long idle. */
  async archive(workspaceId: string, ctx: DriverContext = {}): Promise<void> {
    const w = await this.#winner(parseWorkspaceId(workspaceId), ctx);
    if (!w || w.state === "archived") return;
    await this.#stop(w, ctx);
    try {
      await w.archive();
    } catch (e) {
      throw daytonaError(e, `archive the Daytona sandbox of workspace '${workspaceId}'`);
    }
  }

  async resume(workspaceId: string, ctx: DriverContext = {}): Promise<void> {
    const id = parseWorkspaceId(workspaceId);
    const w = await this.#winner(id, ctx);
    if (!w) throw new NotFoundError(`daytona workspace '${id}' (no sandbox labelled with it) not found`, { field: "workspaceId" });
    this.#remember(id, await this.#ensureStarted(w, ctx));
  }

  async destroy(workspaceId: string, _options: { deleteData?: boolean } = {}, ctx: DriverContext = {}): Promise<void> {
    const id = parseWorkspaceId(workspaceId);
    this.#recent.delete(id);
    for (const s of await this.#sandboxes(id, ctx, true)) {
      try {
        await s.delete(this.spec.timeoutSeconds);
      } catch (e) {
        if (!isNotFound(e)) throw daytonaError(e, `delete the Daytona sandbox of workspace '${id}'`);
      }
    }
  }

  /** Daytona labels can be replaced in place: the tags change, the sandbox (and its files) stay. */
  async updateTags(workspaceId: string, tags: Record<string, string>, ctx: DriverContext = {}): Promise<void> {
    const w = await this.#winnerOrThrow(workspaceId, ctx);
    const labels = Object.fromEntries(Object.entries(w.labels ?? {}).filter(([k]) => !k.startsWith(TAG_PREFIX)));
    for (const [k, v] of Object.entries(tags)) labels[TAG_PREFIX + k] = v;
    await this.#setLabels(w, labels);
  }

  /** Records the owner of an unowned sandbox in its labels (set with the API key only; the agent inside has none). */
  async claimOwner(workspaceId: string, owner: { userId: string; agentId?: string | undefined }, ctx: DriverContext = {}): Promise<void> {
    const w = await this.#winnerOrThrow(workspaceId, ctx);
    const current = w.labels?.[LABELS.userId];
    if (current !== undefined) {
      if (current !== owner.userId)
        throw new ConflictError(`workspace '${workspaceId}' belongs to another user; workspace ids are never shared between users`, {
          field: "userId",
          details: { workspaceId },
        });
      return;
    }
    const labels: Record<string, string> = { ...(w.labels ?? {}), [LABELS.userId]: owner.userId };
    if (owner.agentId !== undefined && labels[LABELS.agentId] === undefined) labels[LABELS.agentId] = owner.agentId;
    await this.#setLabels(w, labels);
  }

  async connect(workspaceId: string, ctx: DriverContext = {}): Promise<DaytonaSandbox> {
    const id = parseWorkspaceId(workspaceId);
    // Right after this driver ensured it (create, find, resume) the sandbox is known; a stale one
    // only makes the handle's first call fail `unavailable`, which resumes it.
    const recent = this.#recent.get(id);
    const w = recent && Date.now() - recent.at < RECENT_MS && recent.sandbox.state === "started" ? recent.sandbox : await this.#winner(id, ctx);
    if (!w) throw new NotFoundError(`daytona workspace '${id}' (no sandbox labelled with it); create it first not found`, { field: "workspaceId" });
    if (w.state !== "started") throw new UnavailableError(`daytona workspace '${id}' is ${String(w.state)}; resume it first`);
    return new DaytonaSandbox(w, await this.#workdir(w), { logger: ctx.logger });
  }

  /**
   * The workspace root inside the sandbox, `<work dir>/workspace`: the daemon's work dir is one plain
   * GET (no command), and the folder is made by the runner's start (or by the fallback's first call).
   */
  async #workdir(w: DaytonaSdkSandbox): Promise<string> {
    const known = WORKDIRS.get(w.id);
    if (known) return known;
    let base: string | undefined;
    try {
      base = await w.getWorkDir();
    } catch (e) {
      throw daytonaError(e, "find the work dir of the Daytona sandbox");
    }
    if (typeof base !== "string" || !base.startsWith("/"))
      throw new ProvisionFailedError(`the Daytona sandbox gave no absolute work dir (${JSON.stringify(base)?.slice(0, 200)})`);
    const dir = `${base.replace(/\/+$/, "")}/${WORKSPACE_FOLDER}`;
    if (WORKDIRS.size > 10_000) WORKDIRS.clear();
    WORKDIRS.set(w.id, dir);
    return dir;
  }

  #labels(identity: WorkspaceIdentity): Record<string, string> {
    const labels: Record<string, string> = {
      [MANAGED_LABEL]: "true",
      [LABELS.workspaceId]: identity.workspaceId,
      [LABELS.managedBy]: identity.managedBy,
    };
    if (identity.userId !== undefined) labels[LABELS.userId] = identity.userId;
    if (identity.agentId !== undefined) labels[LABELS.agentId] = identity.agentId;
    if (this.spec.extraPip?.length) labels[PIP_LABEL] = pipHash(this.spec.extraPip);
    for (const [k, v] of Object.entries(identity.tags ?? {})) labels[TAG_PREFIX + k] = v;
    return labels;
  }

  /** Every sandbox of this id, under our label or the Python reference's, oldest first. */
  async #sandboxes(id: string, ctx: DriverContext, all = false): Promise<DaytonaSdkSandbox[]> {
    const what = `find workspace '${id}'`;
    const [ours, reference] = await Promise.all([this.#list({ [LABELS.workspaceId]: id }, what, ctx), this.#list({ [REFERENCE_LABEL]: id }, what, ctx)]);
    const seen = new Map<string, DaytonaSdkSandbox>();
    for (const s of [...ours, ...reference]) if (all || USABLE.has(String(s.state))) seen.set(s.id, s);
    return [...seen.values()].sort(byAge);
  }

  /** The sandbox that is this workspace: the oldest (every replica picks the same one). */
  async #winner(id: string, ctx: DriverContext): Promise<DaytonaSdkSandbox | undefined> {
    const w = oldest(await this.#sandboxes(id, ctx));
    if (w) this.#remember(id, w);
    else this.#recent.delete(id);
    return w;
  }

  #remember(id: string, w: DaytonaSdkSandbox): void {
    if (this.#recent.size > 1000) this.#recent.clear();
    this.#recent.set(id, { sandbox: w, at: Date.now() });
  }

  async #winnerOrThrow(workspaceId: string, ctx: DriverContext): Promise<DaytonaSdkSandbox> {
    const w = await this.#winner(parseWorkspaceId(workspaceId), ctx);
    if (!w) throw new NotFoundError(`daytona workspace '${workspaceId}' not found`, { field: "workspaceId" });
    return w;
  }

  async #list(labels: Record<string, string>, what: string, ctx: DriverContext): Promise<DaytonaSdkSandbox[]> {
    const out: DaytonaSdkSandbox[] = [];
    try {
      for await (const s of this.#api(ctx).list({ labels, limit: 100 })) {
        if (out.length >= MAX_LISTED) throw new TooLargeError(`more than ${MAX_LISTED} Daytona sandboxes match; list refuses a partial answer`);
        out.push(s);
      }
    } catch (e) {
      throw daytonaError(e, what);
    }
    return out;
  }

  async #setLabels(w: DaytonaSdkSandbox, labels: Record<string, string>): Promise<void> {
    try {
      await w.setLabels(labels);
    } catch (e) {
      throw daytonaError(e, "set the labels of a Daytona sandbox");
    }
  }

  /** Brings a sandbox to `started` from whatever state it is in; a failed start creates nothing. */
  async #ensureStarted(w: DaytonaSdkSandbox, ctx: DriverContext): Promise<DaytonaSdkSandbox> {
    const t = this.spec.timeoutSeconds;
    const state = String(w.state);
    try {
      if (state === "started") return w;
      if (STARTING.has(state)) {
        await w.waitUntilStarted(t);
        return w;
      }
      if (STOPPING.has(state)) await w.waitUntilStopped(t).catch(() => undefined);
      if (state === "error") {
        if (!w.recoverable)
          throw new ProvisionFailedError(
            `the Daytona sandbox ${w.id} is in an error state (${w.errorReason ?? "no reason given"}); delete the workspace to recreate it`,
          );
        await w.recover(t);
        return w;
      }
      ctx.onProgress?.({ phase: "sandbox", message: `starting Daytona sandbox ${w.id} (was ${state})` });
      await w.start(t);
      return w;
    } catch (e) {
      // A racing replica may have started it meanwhile: the state decides.
      await w.refreshData().catch(() => undefined);
      if (w.state === "started") return w;
      throw daytonaError(e, `start the Daytona sandbox ${w.id}`);
    }
  }

  async #stop(w: DaytonaSdkSandbox, ctx: DriverContext): Promise<void> {
    const state = String(w.state);
    if (state === "stopped" || state === "archived") return;
    try {
      if (STARTING.has(state)) await w.waitUntilStarted(this.spec.timeoutSeconds);
      ctx.onProgress?.({ phase: "sandbox", message: `stopping Daytona sandbox ${w.id}` });
      await w.stop(this.spec.timeoutSeconds);
    } catch (e) {
      await w.refreshData().catch(() => undefined);
      if (w.state === "stopped" || w.state === "archived") return;
      throw daytonaError(e, `stop the Daytona sandbox ${w.id}`);
    }
  }

  async #installPip(w: DaytonaSdkSandbox, ctx: DriverContext): Promise<void> {
    const pkgs = this.spec.extraPip ?? [];
    if (pkgs.length === 0) return;
    ctx.onProgress?.({ phase: "packages", message: `pip install ${pkgs.join(" ")}` });
    const line = shLine(`python3 -m pip install --user --disable-pip-version-check -q "$@" 2>&1 || pip install --user -q "$@" 2>&1`, pkgs);
    let r: { exitCode: number; result: string };
    try {
      r = await w.process.executeCommand(line, undefined, undefined, this.spec.timeoutSeconds);
    } catch (e) {
      throw daytonaError(e, "install extraPip in the Daytona sandbox");
    }
    if (r.exitCode !== 0) throw new ProvisionFailedError(`extraPip: pip install failed (${r.exitCode}): ${r.result.slice(-1000)}`, { field: "extraPip" });
  }
}

function describe(id: string, s: DaytonaSdkSandbox): BackendDescription {
  const labels = s.labels ?? {};
  const tags: Record<string, string> = {};
  for (const [k, v] of Object.entries(labels)) if (k.startsWith(TAG_PREFIX)) tags[k.slice(TAG_PREFIX.length)] = v;
  const daytonaState = String(s.state ?? "unknown");
  // Our pause is Daytona's stop (files kept, a quick start): a stopped sandbox reads "paused"; archived ones and the rest "stopped".
  const state: BackendState = daytonaState === "started" ? "running" : PAUSED.has(daytonaState) ? "paused" : "stopped";
  return {
    workspaceId: id,
    kind: "daytona",
    state,
    userId: labels[LABELS.userId],
    agentId: labels[LABELS.agentId],
    managedBy: labels[LABELS.managedBy] as ManagedBy | undefined,
    tags,
    location: {
      sandboxId: s.id,
      daytonaState,
      target: String(s.target ?? ""),
      ...(labels[REFERENCE_LABEL] && !labels[LABELS.workspaceId] ? { origin: "agentscope" } : {}),
    },
  };
}

function byAge(a: DaytonaSdkSandbox, b: DaytonaSdkSandbox): number {
  return String(a.createdAt ?? "").localeCompare(String(b.createdAt ?? "")) || a.id.localeCompare(b.id);
}

function oldest(xs: DaytonaSdkSandbox[]): DaytonaSdkSandbox | undefined {
  return [...xs].sort(byAge)[0];
}

function pipHash(pkgs: string[]): string {
  return createHash("sha256").update(pkgs.join("\n")).digest("hex").slice(0, 16);
}
