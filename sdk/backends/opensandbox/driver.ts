// Size: the whole OpenSandbox lifecycle (find and create with convergence, adopt after a failed create, pause, resume,
// the keep-alive, leftovers, a created sandbox handed to the connect that follows), each step small.
import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import type { Sandbox as OsbSandbox, SandboxManager, ConnectionConfigOptions, SandboxInfo } from "@alibaba-group/opensandbox";
import { loadOpenSandbox } from "./sdk.js";
import { ConflictError, InvalidArgumentError, NotFoundError, PathEscapeError, TooLargeError, UnavailableError, fromZodError } from "../../errors.js";
import { ClosedError } from "../../errors.js";
import { LABELS, matchesSelector, type BackendDescription, type BackendState, type Driver, type DriverContext } from "../../contract/driver.js";
import { type ListSelector, type ManagedBy, type WorkspaceIdentity } from "../../contract/driver.js";
import { MAX_LISTED } from "../../kit/list.js";
import { parseWorkspaceId } from "../../contract/schema.js";
import { isSandboxGone, openSandboxError } from "./errors.js";
import { OPENSANDBOX_WORKDIR, OpenSandboxSandbox, startGateway, type GatewayStart } from "./sandbox.js";
import { OpenSandboxBackendSchema, type OpenSandboxBackendSpec } from "./schema.js";

/** Metadata marking sandboxes this SDK made, and the driver scope (basedir) they belong to. */
export const MANAGED_KEY = "agent-workspaces.managed";
export const SCOPE_KEY = "agent-workspaces.scope";
const TAG_PREFIX = "agent-workspaces.tag.";
/** The Python reference (AgentScope) tags its sandboxes with this key: a service moving from it keeps them. */
export const REFERENCE_KEY = "agentscope.workspace.id";
/** Lifecycle states that still hold a sandbox (Deleting / Deleted / Error do not). */
const LIVE_STATES = ["Creating", "Running", "Pausing", "Paused", "Resuming"];
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const PAGE = 100;
/** How long a sandbox `find` saw stays the one `connect` re-reads by id. */
const RECENT_MS = 5_000;
/** How long a new sandbox may take to answer its first ping. */
const READY_S = 60;
/** How long a just-created sandbox's SDK handle waits for the connect that usually follows. */
const FRESH_MS = 30_000;

/**
 * OpenSandbox lifecycle through `@alibaba-group/opensandbox`: one sandbox per workspace, found again
 * by its metadata (workspace id and this driver's scope; also the Python reference's key), paused and
 * resumed by the server (docker pause on its Docker runtime), its keep-alive timeout renewed by the
 * handle while in use. Creating is convergent: after a create, the sandboxes carrying the id are
 * listed and every creator keeps the oldest, so racing replicas end with one.
 */
export class OpenSandboxDriver implements Driver {
  readonly kind = "opensandbox";
  readonly spec: Omit<OpenSandboxBackendSpec, "apiKey">;
  readonly persistent: boolean;
  /** Metadata value scoping listing to this driver's storage. */
  readonly scope: string;
  readonly #apiKey: string | undefined;
  #manager: SandboxManager | undefined;
  /**
   * The last sandbox `find` saw per workspace id, for `connect` right after an ensure: it re-reads
   * that one sandbox by id (one inspect) instead of listing again. Listing walks every container on
   * the server's engine, the slow call on a busy host. null records that it had none (create's skip).
   */
  readonly #recent = new Map<string, { sandboxId: string | null; at: number }>();
  readonly #fresh = new Map<string, { sbx: OsbSandbox; gateway: Promise<GatewayStart>; timer: NodeJS.Timeout }>();

  constructor(spec: Partial<OpenSandboxBackendSpec> = {}) {
    const parsed = OpenSandboxBackendSchema.safeParse({ kind: "opensandbox", ...spec });
    if (!parsed.success) throw fromZodError("backend", parsed.error);
    const { apiKey, ...rest } = parsed.data;
    this.#apiKey = apiKey ?? process.env.OPEN_SANDBOX_API_KEY ?? undefined;
    this.spec = rest;
    this.persistent = rest.basedir !== undefined;
    this.scope = createHash("sha256")
      .update(rest.basedir ? path.resolve(rest.basedir) : "(no basedir)")
      .digest("hex")
      .slice(0, 16);
  }

  /** Connection options for the SDK; the key stays in this object, never in a description or an error. */
  get connection(): ConnectionConfigOptions {
    return {
      domain: this.spec.domain ?? process.env.OPEN_SANDBOX_DOMAIN ?? "localhost:8080",
      protocol: this.spec.protocol,
      ...(this.#apiKey ? { apiKey: this.#apiKey } : {}),
      requestTimeoutSeconds: this.spec.requestTimeoutSeconds,
      useServerProxy: this.spec.useServerProxy,
      disableMetrics: true,
    };
  }

  get #sandboxes(): SandboxManager {
    this.#manager ??= loadOpenSandbox().SandboxManager.create({ connectionConfig: this.connection });
    return this.#manager;
  }

  /** Host folder bind-mounted at /workspace for a workspace (on the server's Docker host); null without basedir. */
  hostPath(workspaceId: string): string | null {
    return this.spec.basedir ? path.join(path.resolve(this.spec.basedir), parseWorkspaceId(workspaceId)) : null;
  }

  async create(identity: WorkspaceIdentity, ctx: DriverContext = {}): Promise<BackendDescription> {
    const id = parseWorkspaceId(identity.workspaceId);
    // A find that saw no sandbox moments ago (ensureBackend's) is not repeated: the convergence
    // check after the create keeps one sandbox whatever appeared since.
    const r = this.#recent.get(id);
    if (!(r && r.sandboxId === null && Date.now() - r.at < RECENT_MS)) {
      const found = await this.#find(id, true);
      if (found) return found;
    }
    const metadata = this.#metadata(identity);
    const host = this.hostPath(id);
    ctx.onProgress?.({ phase: "sandbox", message: `creating OpenSandbox sandbox for ${id}` });
    let made: OsbSandbox;
    try {
      made = await loadOpenSandbox().Sandbox.create({
        connectionConfig: this.connection,
        image: this.spec.image,
        metadata,
        env: { ...this.spec.env },
        timeoutSeconds: this.spec.timeoutSeconds,
        // Readiness is waited for below, beside the convergence check.
        skipHealthCheck: true,
        ...(host ? { volumes: [{ name: "workspace", host: { path: host }, mountPath: OPENSANDBOX_WORKDIR }] } : {}),
      });
    } catch (e) {
      // The server may have made the sandbox before failing (say it restarted mid-create): adopt
      // what is there rather than create again; a failure with nothing there is the caller's.
      const after = await this.find(id).catch(() => null);
      if (after) return after;
      throw openSandboxError(e, `create a sandbox for workspace '${id}'`);
    }
    const mine = made.id;
    // Readiness (then the runner's gateway) and the convergence list run side by side: a list costs the
    // server time in proportion to its sandboxes and needs no answer from the new one. The SDK polls every
    // 200 ms by default; a ping is one small GET to execd, so look every 20 ms. `given` ends the poll early.
    let given = false;
    const readiness = made.waitUntilReady({ readyTimeoutSeconds: READY_S, pollingIntervalMillis: 20, healthCheck: async (s) => given || s.health.ping() }).then(
      () => undefined,
      (e: unknown) => e,
    );
    // A sandbox given up (lost the race, closed) gets no gateway: its handle is closed by then.
    const gateway = readiness.then((e) =>
      e === undefined && !given ? startGateway(made) : Promise.reject(e ?? new ClosedError("the create gave this sandbox up")),
    );
    gateway.catch(() => undefined);
    const giveUp = async (kill: boolean) => {
      given = true;
      await made.close().catch(() => undefined);
      if (kill) await this.#sandboxes.killSandbox(mine).catch(() => undefined);
    };
    // Convergence: every creator keeps the oldest sandbox carrying the id; a loser removes its own.
    const winner = await this.#winner(id).catch(async (e: unknown) => {
      await giveUp(false);
      throw e;
    });
    if (winner) this.#remember(id, winner.id);
    if (winner && winner.id !== mine) {
      await giveUp(true);
      ctx.logger?.info("another replica created this workspace's sandbox first; removed ours", { workspaceId: id, kept: winner.id });
      return this.#describe(id, winner);
    }
    const notReady = await readiness;
    if (notReady !== undefined) {
      // As the SDK's own create does: a sandbox that never answered is removed.
      await giveUp(true);
      this.#recent.delete(id);
      throw openSandboxError(notReady, `wait for the sandbox of workspace '${id}' to answer`);
    }
    this.#keepFresh(made, gateway);
    ctx.logger?.info("opensandbox workspace sandbox created", { workspaceId: id, sandboxId: mine });
    if (this.spec.extraPip?.length) await this.#installPip(mine, ctx);
    return this.#describe(id, winner ?? (await this.#sandboxes.getSandboxInfo(mine)));
  }

  async find(workspaceId: string): Promise<BackendDescription | null> {
    return this.#find(parseWorkspaceId(workspaceId), false);
  }

  async #find(id: string, atOnce: boolean): Promise<BackendDescription | null> {
    const winner = await this.#winner(id, atOnce);
    this.#remember(id, winner?.id ?? null);
    return winner ? this.#describe(id, winner) : null;
  }

  #remember(id: string, sandboxId: string | null): void {
    this.#recent.delete(id);
    if (this.#recent.size >= 1024) this.#recent.delete(this.#recent.keys().next().value as string);
    this.#recent.set(id, { sandboxId, at: Date.now() });
  }

  /** The workspace's sandbox: the one `find` saw moments ago when it is still there, else a fresh find. */
  async #current(id: string): Promise<BackendDescription | null> {
    const r = this.#recent.get(id);
    if (r?.sandboxId && Date.now() - r.at < RECENT_MS) {
      const info = await this.#sandboxes.getSandboxInfo(r.sandboxId).catch(() => null);
      if (info && LIVE_STATES.includes(info.status.state) && info.metadata?.[LABELS.workspaceId] === id) return this.#describe(id, info);
    }
    return this.find(id);
  }

  async list(selector: ListSelector = {}): Promise<BackendDescription[]> {
    const filter: Record<string, string> = { [MANAGED_KEY]: "true", [SCOPE_KEY]: this.scope };
    if (selector.managedBy !== undefined) filter[LABELS.managedBy] = selector.managedBy;
    if (typeof selector.userId === "string") filter[LABELS.userId] = labelValue(selector.userId, "userId");
    const byId = new Map<string, SandboxInfo[]>();
    for (const info of await this.#listAll(filter)) {
      const id = info.metadata?.[LABELS.workspaceId];
      if (id) byId.set(id, [...(byId.get(id) ?? []), info]);
    }
    const out: BackendDescription[] = [];
    for (const [id, infos] of byId) {
      const d = this.#describe(id, oldest(infos)!);
      if (matchesSelector(d, selector)) out.push(d);
    }
    return out.sort((a, b) => a.workspaceId.localeCompare(b.workspaceId));
  }

  async pause(workspaceId: string): Promise<void> {
    const d = await this.#current(parseWorkspaceId(workspaceId));
    if (!d || d.state !== "running") return;
    try {
      await this.#sandboxes.pauseSandbox(d.location.sandboxId!);
      // The resume that follows finds the sandbox by id, without a list.
      this.#remember(d.workspaceId, d.location.sandboxId!);
    } catch (e) {
      // A racing pause: the state decides.
      const now = await this.find(workspaceId).catch(() => undefined);
      if (now === null || (now !== undefined && now.state !== "running")) return;
      throw openSandboxError(e, `pause the sandbox of '${workspaceId}'`);
    }
  }

  /** Resumes a paused sandbox and waits until it runs; never creates one (a gone sandbox is a NotFoundError). */
  async resume(workspaceId: string): Promise<void> {
    const d = await this.#current(parseWorkspaceId(workspaceId));
    if (!d) throw new NotFoundError(`opensandbox workspace '${workspaceId}' not found`, { field: "workspaceId" });
    const sid = d.location.sandboxId!;
    if (d.location.status === "Paused" || d.location.status === "Pausing") {
      await this.#sandboxes.resumeSandbox(sid).catch(async (e: unknown) => {
        if ((await this.#sandboxes.getSandboxInfo(sid).catch(() => null))?.status.state === "Running") return;
        throw openSandboxError(e, `resume the sandbox of '${workspaceId}'`);
      });
    }
    const until = Date.now() + 60_000;
    for (let delay = 20; ; delay = Math.min(delay * 2, 500)) {
      const info = await this.#sandboxes.getSandboxInfo(sid).catch((e: unknown) => {
        throw openSandboxError(e, `read the sandbox of '${workspaceId}'`);
      });
      if (info.status.state === "Running") break;
      if (!LIVE_STATES.includes(info.status.state) || Date.now() > until)
        throw new UnavailableError(`opensandbox workspace '${workspaceId}' is ${info.status.state} (${info.status.reason ?? "no reason given"})`);
      await sleep(delay);
    }
    this.#remember(d.workspaceId, sid);
    // The keep-alive restarts from now; off the resume's path (the handle renews again while in use).
    void this.renew(sid).catch(() => undefined);
  }

  /** Pushes the sandbox's expiry `timeoutSeconds` ahead (the keep-alive). */
  async renew(sandboxId: string): Promise<void> {
    if (this.spec.timeoutSeconds === null) return;
    await this.#sandboxes.renewSandbox(sandboxId, this.spec.timeoutSeconds).catch((e: unknown) => {
      throw openSandboxError(e, "renew the sandbox's keep-alive");
    });
  }

  async destroy(workspaceId: string, options: { deleteData?: boolean } = {}): Promise<void> {
    const id = parseWorkspaceId(workspaceId);
    const all = await this.#matching(id, false);
    for (const info of all) {
      this.#takeFresh(info.id)
        ?.sbx.close()
        .catch(() => undefined);
      if (options.deleteData && this.persistent) await this.#wipe(id, info).catch(() => undefined);
      await this.#sandboxes.killSandbox(info.id).catch((e: unknown) => {
        if (!isSandboxGone(e)) throw openSandboxError(e, `remove the sandbox of '${id}'`);
      });
    }
    const host = this.hostPath(id);
    // A server on this host: the folder may still be here when no sandbox was left to wipe it.
    if (options.deleteData && host) {
      if (path.dirname(host) !== path.resolve(this.spec.basedir!)) throw new PathEscapeError(`path '${host}' is not directly under basedir`);
      await fs.rm(host, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  async updateTags(workspaceId: string, tags: Record<string, string>): Promise<void> {
    const d = await this.find(workspaceId);
    if (!d) throw new NotFoundError(`opensandbox workspace '${workspaceId}' not found`, { field: "workspaceId" });
    const patch: Record<string, string | null> = {};
    for (const k of Object.keys(d.tags)) patch[TAG_PREFIX + k] = null;
    for (const [k, v] of Object.entries(tags)) patch[tagKey(k)] = labelValue(v, `tags.${k}`);
    await this.#sandboxes.patchSandboxMetadata(d.location.sandboxId!, patch).catch((e: unknown) => {
      throw openSandboxError(e, `update the tags of '${workspaceId}'`);
    });
  }

  async claimOwner(workspaceId: string, owner: { userId: string; agentId?: string | undefined }): Promise<void> {
    const d = await this.find(workspaceId);
    if (!d) throw new NotFoundError(`opensandbox workspace '${workspaceId}' not found`, { field: "workspaceId" });
    if (d.userId !== undefined) {
      if (d.userId !== owner.userId)
        throw new ConflictError(`workspace '${workspaceId}' belongs to another user; workspace ids are never shared between users`, { field: "userId" });
      return;
    }
    const patch: Record<string, string> = { [LABELS.userId]: labelValue(owner.userId, "userId") };
    if (owner.agentId !== undefined && d.agentId === undefined) patch[LABELS.agentId] = labelValue(owner.agentId, "agentId");
    await this.#sandboxes.patchSandboxMetadata(d.location.sandboxId!, patch).catch((e: unknown) => {
      throw openSandboxError(e, `record the owner of '${workspaceId}'`);
    });
  }

  async connect(workspaceId: string, ctx: DriverContext = {}): Promise<OpenSandboxSandbox> {
    const id = parseWorkspaceId(workspaceId);
    // A sandbox this driver created (and won the convergence for) moments ago is running: no lookup.
    const recent = this.#recent.get(id);
    let sid = recent?.sandboxId && this.#fresh.has(recent.sandboxId) && Date.now() - recent.at < RECENT_MS ? recent.sandboxId : undefined;
    if (!sid) {
      const d = await this.#current(id);
      if (!d) throw new NotFoundError(`opensandbox workspace '${workspaceId}'; create it first not found`, { field: "workspaceId" });
      if (d.state !== "running") throw new UnavailableError(`opensandbox workspace '${workspaceId}' is ${d.state}; resume it first`);
      sid = d.location.sandboxId!;
    }
    const fresh = this.#takeFresh(sid);
    let sbx: OsbSandbox;
    try {
      sbx = fresh?.sbx ?? (await loadOpenSandbox().Sandbox.connect({ sandboxId: sid, connectionConfig: this.connection, readyTimeoutSeconds: 30 }));
    } catch (e) {
      throw openSandboxError(e, `connect to the sandbox of '${workspaceId}'`);
    }
    const sandbox = new OpenSandboxSandbox(sbx, {
      ...(fresh ? { gateway: fresh.gateway } : {}),
      persistent: this.persistent,
      renew: () => this.renew(sid),
      renewEveryMs: this.spec.timeoutSeconds === null ? undefined : Math.max(10_000, (this.spec.timeoutSeconds * 1000) / 3),
      ...(ctx.logger ? { logger: ctx.logger } : {}),
    });
    try {
      await sandbox.start();
    } catch (e) {
      await sandbox.close();
      throw e;
    }
    return sandbox;
  }

  /** Holds a just-created sandbox's SDK handle and gateway start for a connect that follows (else let go of soon). */
  #keepFresh(sbx: OsbSandbox, gateway: Promise<GatewayStart>): void {
    this.#takeFresh(sbx.id)
      ?.sbx.close()
      .catch(() => undefined);
    const timer = setTimeout(
      () =>
        void this.#takeFresh(sbx.id)
          ?.sbx.close()
          .catch(() => undefined),
      FRESH_MS,
    );
    timer.unref();
    this.#fresh.set(sbx.id, { sbx, gateway, timer });
  }

  #takeFresh(sandboxId: string): { sbx: OsbSandbox; gateway: Promise<GatewayStart> } | undefined {
    const f = this.#fresh.get(sandboxId);
    if (!f) return undefined;
    this.#fresh.delete(sandboxId);
    clearTimeout(f.timer);
    return f;
  }

  /** Releases the SDK's HTTP agent. */
  async close(): Promise<void> {
    await Promise.all(
      [...this.#fresh.keys()].map((k) =>
        this.#takeFresh(k)
          ?.sbx.close()
          .catch(() => undefined),
      ),
    );
    await this.#manager?.close();
    this.#manager = undefined;
  }

  #metadata(identity: WorkspaceIdentity): Record<string, string> {
    const m: Record<string, string> = { ...this.spec.metadata };
    for (const k of Object.keys(m))
      if (k.startsWith("agent-workspaces.") || k.startsWith("opensandbox.io/")) throw new InvalidArgumentError("is a reserved key", { field: `metadata.${k}` });
    m[MANAGED_KEY] = "true";
    m[SCOPE_KEY] = this.scope;
    m[LABELS.workspaceId] = labelValue(identity.workspaceId, "workspaceId");
    m[LABELS.managedBy] = identity.managedBy;
    if (identity.userId !== undefined) m[LABELS.userId] = labelValue(identity.userId, "userId");
    if (identity.agentId !== undefined) m[LABELS.agentId] = labelValue(identity.agentId, "agentId");
    for (const [k, v] of Object.entries(identity.tags ?? {})) m[tagKey(k)] = labelValue(v, `tags.${k}`);
    return m;
  }

  /** Every live sandbox carrying the workspace id: ours in this scope, else the Python reference's. */
  async #matching(id: string, atOnce: boolean): Promise<SandboxInfo[]> {
    const listOurs = this.#listAll({ [LABELS.workspaceId]: id, [SCOPE_KEY]: this.scope });
    if (this.persistent) return listOurs;
    // atOnce asks both lists together, when neither is likely to have it (a find before a create).
    const reference = atOnce ? this.#listAll({ [REFERENCE_KEY]: id }) : undefined;
    reference?.catch(() => undefined);
    const ours = await listOurs;
    return ours.length ? ours : (reference ?? this.#listAll({ [REFERENCE_KEY]: id }));
  }

  /** The oldest live sandbox carrying the id (see #matching for atOnce). */
  async #winner(id: string, atOnce = false): Promise<SandboxInfo | undefined> {
    return oldest(await this.#matching(id, atOnce));
  }

  async #listAll(metadata: Record<string, string>): Promise<SandboxInfo[]> {
    const out: SandboxInfo[] = [];
    for (let page = 1; ; page++) {
      const r = await this.#sandboxes.listSandboxInfos({ metadata, states: LIVE_STATES, page, pageSize: PAGE }).catch((e: unknown) => {
        throw openSandboxError(e, "list sandboxes");
      });
      out.push(...r.items.filter((i) => LIVE_STATES.includes(i.status.state)));
      if (out.length > MAX_LISTED) throw new TooLargeError(`more than ${MAX_LISTED} sandboxes match; list refuses a partial answer`);
      if (!r.pagination?.hasNextPage || r.items.length === 0) return out;
    }
  }

  #describe(id: string, info: SandboxInfo): BackendDescription {
    const md = info.metadata ?? {};
    const s = info.status.state;
    const state: BackendState = s === "Paused" || s === "Pausing" ? "paused" : s === "Running" || s === "Creating" || s === "Resuming" ? "running" : "stopped";
    const tags: Record<string, string> = {};
    for (const [k, v] of Object.entries(md)) if (k.startsWith(TAG_PREFIX)) tags[k.slice(TAG_PREFIX.length)] = v;
    const location: Record<string, string> = {
      sandboxId: info.id,
      status: s,
      image: typeof info.image === "object" && info.image ? String((info.image as { uri?: string }).uri ?? "") : String(info.image ?? ""),
      workdir: OPENSANDBOX_WORKDIR,
      persistent: String(this.persistent),
      createdAt: info.createdAt.toISOString(),
    };
    if (info.expiresAt) location.expiresAt = info.expiresAt.toISOString();
    if (md[REFERENCE_KEY] && !md[LABELS.workspaceId]) location.origin = "agentscope";
    const host = this.hostPath(id);
    if (host) location.hostPath = host;
    return {
      workspaceId: id,
      kind: "opensandbox",
      state,
      userId: md[LABELS.userId],
      agentId: md[LABELS.agentId],
      managedBy: md[LABELS.managedBy] as ManagedBy | undefined,
      tags,
      location,
    };
  }

  /** Empties /workspace from inside (the folder lives on the server's host, maybe not ours). */
  async #wipe(id: string, info: SandboxInfo): Promise<void> {
    if (info.status.state === "Paused") await this.resume(id);
    const sbx = await loadOpenSandbox().Sandbox.connect({ sandboxId: info.id, connectionConfig: this.connection, readyTimeoutSeconds: 15 });
    try {
      await sbx.commands.run(`find ${OPENSANDBOX_WORKDIR} -mindepth 1 -maxdepth 1 -exec rm -rf -- {} +`, { timeoutSeconds: 120 });
    } finally {
      await sbx.close();
    }
  }

  async #installPip(sandboxId: string, ctx: DriverContext): Promise<void> {
    ctx.onProgress?.({ phase: "bootstrap", message: `pip install ${this.spec.extraPip!.join(" ")}` });
    const sbx = await loadOpenSandbox().Sandbox.connect({ sandboxId, connectionConfig: this.connection });
    try {
      const args = this.spec.extraPip!.map((p) => `'${p}'`).join(" ");
      const r = await sbx.commands.run(`python3 -m pip install --no-input --disable-pip-version-check ${args}`, { timeoutSeconds: 600 });
      if (r.exitCode !== 0)
        throw new UnavailableError(
          `opensandbox: pip install of extraPip failed (exit ${r.exitCode}): ${r.logs.stderr
            .map((m) => m.text)
            .join("\n")
            .slice(-800)}`,
        );
    } finally {
      await sbx.close();
    }
  }
}

/** The sandbox every replica agrees on: the oldest, ties broken by id. */
function oldest(infos: SandboxInfo[]): SandboxInfo | undefined {
  return [...infos].sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.id.localeCompare(b.id))[0];
}

/** A value the server accepts as metadata (Kubernetes label value syntax); an InvalidArgumentError naming the field otherwise. */
function labelValue(v: string, field: string): string {
  if (v.length > 63 || !LABEL_VALUE.test(v))
    throw new InvalidArgumentError("OpenSandbox metadata values must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric", { field });
  return v;
}

function tagKey(k: string): string {
  const key = TAG_PREFIX + k;
  if (key.length > 63 || !/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(key))
    throw new InvalidArgumentError("tag names must fit an OpenSandbox metadata key (alphanumeric, -_. , at most 42 characters)", { field: `tags.${k}` });
  return key;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
