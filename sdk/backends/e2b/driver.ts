// Size: one driver over E2B's control plane: create with convergence, find by metadata (ours and the
// Python reference's key), list, pause, resume, destroy with its snapshot, connect with the keep-alive.
import { createHash } from "node:crypto";
import os from "node:os";
import path from "node:path";
import type { Sandbox as E2BSdkSandbox, SandboxInfo } from "e2b";
import { NotFoundError, TooLargeError, UnavailableError, fromZodError, ProvisionFailedError } from "../../errors.js";
import { LABELS, matchesSelector, type BackendDescription, type Driver, type DriverContext, type ListSelector } from "../../contract/driver.js";
import { type ManagedBy, type WorkspaceIdentity } from "../../contract/driver.js";
import { FileLeases } from "../../kit/lease.js";
import { MAX_LISTED } from "../../kit/list.js";
import { parseWorkspaceId } from "../../contract/schema.js";
import { connectionOf, e2bError, loadE2B, type E2BConnection, type E2BModule } from "./client.js";
import { E2BSandbox } from "./sandbox.js";
import { E2B_WORKDIR, quote } from "./scripts.js";
import { E2BBackendSchema, type E2BBackendSpec } from "./schema.js";

/** Metadata marking sandboxes this SDK made; with the identity LABELS. */
export const MANAGED_KEY = "agent-workspaces.managed";
/** The key the Python reference (AgentScope) tags its E2B sandboxes with: also stamped, and found. */
export const REFERENCE_KEY = "agentscope.workspace.id";
const TAG_PREFIX = "agent-workspaces.tag.";

/** The name of the snapshot that keeps a destroyed workspace's files (E2B names: lowercase, digits, dashes). */
export function snapshotName(workspaceId: string): string {
  return `agentws-${createHash("sha256").update(parseWorkspaceId(workspaceId)).digest("hex").slice(0, 20)}`;
}

/**
 * E2B lifecycle through the `e2b` SDK: one sandbox per workspace, tagged in its metadata with the
 * identity (and the Python reference's key, so either finds the other's). E2B has no unique names,
 * so create lists after creating: of several sandboxes for one id the oldest wins and the others
 * kill their own. Pause is E2B's pause (memory and files kept); resume is `Sandbox.connect`; destroy
 * keeps the files in a named snapshot the next create starts from, unless deleteData.
 */
export class E2BDriver implements Driver {
  readonly kind = "e2b";
  readonly persistent = true;
  readonly spec: E2BBackendSpec;
  readonly leases: FileLeases;
  #conn: E2BConnection | undefined;
  /** Workspace id → the sandbox this driver last found or made for it (pause and resume skip the look-up). */
  readonly #known = new Map<string, string>();

  constructor(spec: Partial<E2BBackendSpec> = {}) {
    const parsed = E2BBackendSchema.safeParse({ kind: "e2b", ...spec });
    if (!parsed.success) throw fromZodError("backend", parsed.error);
    this.spec = parsed.data;
    this.leases = e2bLeases(this.spec);
  }

  /** The SDK's connection options; the key is read (from the spec or E2B_API_KEY) on first use, so a driver can be built without one. */
  get #c(): E2BConnection {
    return (this.#conn ??= connectionOf(this.spec));
  }

  get #sdk(): E2BModule {
    return loadE2B();
  }

  #err(e: unknown, what: string): unknown {
    return e2bError(e, what, this.#conn?.apiKey);
  }

  async create(identity: WorkspaceIdentity, ctx: DriverContext = {}): Promise<BackendDescription> {
    const id = parseWorkspaceId(identity.workspaceId);
    const found = await this.find(id);
    if (found) {
      if (found.state !== "running") await this.resume(id);
      return { ...found, state: "running" };
    }
    const snapshot = await this.#snapshot(id);
    const metadata: Record<string, string> = { ...this.spec.sandboxMetadata };
    for (const [k, v] of Object.entries(identity.tags ?? {})) metadata[TAG_PREFIX + k] = v;
    // The identity keys last: caller metadata never overrides them.
    Object.assign(metadata, { [MANAGED_KEY]: "true", [LABELS.workspaceId]: id, [REFERENCE_KEY]: id, [LABELS.managedBy]: identity.managedBy });
    if (identity.userId !== undefined) metadata[LABELS.userId] = identity.userId;
    if (identity.agentId !== undefined) metadata[LABELS.agentId] = identity.agentId;
    ctx.onProgress?.({ phase: "sandbox", message: `creating e2b sandbox for ${id}${snapshot ? " from its snapshot" : ""}` });
    let sbx: E2BSdkSandbox;
    try {
      sbx = await this.#sdk.Sandbox.create(snapshot ?? this.spec.template, {
        ...this.#c,
        metadata,
        ...(this.spec.env ? { envs: this.spec.env } : {}),
        timeoutMs: this.spec.timeoutSeconds * 1000,
        lifecycle: { onTimeout: "pause" },
      });
    } catch (e) {
      throw this.#err(e, `create an e2b sandbox for workspace '${id}'`);
    }
    const sandboxId = sbx.sandboxId;
    // No unique names on E2B: whoever created a sandbox for this id and is not the oldest removes its own.
    const rows = await this.#rows(id);
    const winner = rows[0];
    if (winner && winner.sandboxId !== sandboxId) {
      await this.#kill(sandboxId);
      ctx.logger?.info("another replica created this workspace's e2b sandbox first; removed ours", { workspaceId: id });
      if (winner.state !== "running") await this.resume(id);
      return { ...describe(id, winner), state: "running" };
    }
    if (!winner) throw new ProvisionFailedError(`the e2b sandbox of workspace '${id}' vanished right after it was created`);
    try {
      await this.#bootstrap(sbx, ctx);
    } catch (e) {
      await this.#kill(sandboxId);
      throw e;
    }
    ctx.logger?.info("e2b workspace sandbox created", { workspaceId: id, sandboxId });
    this.#known.set(id, sandboxId);
    // The converging list's own row: this sandbox, oldest of its id (no second look-up).
    return describe(id, winner);
  }

  async find(workspaceId: string): Promise<BackendDescription | null> {
    const id = parseWorkspaceId(workspaceId);
    const winner = (await this.#rows(id))[0];
    if (winner) this.#known.set(id, winner.sandboxId);
    else this.#known.delete(id);
    return winner ? describe(id, winner) : null;
  }

  async list(selector: ListSelector = {}): Promise<BackendDescription[]> {
    const query: Record<string, string> = { [MANAGED_KEY]: "true" };
    if (selector.managedBy !== undefined) query[LABELS.managedBy] = selector.managedBy;
    if (typeof selector.userId === "string") query[LABELS.userId] = selector.userId;
    const rows = await this.#list(query);
    const byId = new Map<string, SandboxInfo>();
    for (const r of rows) {
      const id = r.metadata[LABELS.workspaceId];
      if (typeof id === "string" && !byId.has(id)) byId.set(id, r);
    }
    return [...byId.entries()].map(([id, r]) => describe(id, r)).filter((d) => matchesSelector(d, selector));
  }

  async pause(workspaceId: string): Promise<void> {
    // The sandbox this driver last saw for the id, paused without a look-up (already paused: nothing to do).
    const known = this.#known.get(parseWorkspaceId(workspaceId));
    if (known) {
      const done = await this.#sdk.Sandbox.pause(known, this.#c).then(
        () => true,
        (e: unknown) => {
          const mapped = this.#err(e, `pause the e2b sandbox of '${workspaceId}'`);
          if (!(mapped instanceof NotFoundError)) throw mapped;
          return false;
        },
      );
      if (done) return;
    }
    const d = await this.find(workspaceId);
    if (!d || d.state !== "running") return;
    try {
      await this.#sdk.Sandbox.pause(d.location.sandboxId!, this.#c);
    } catch (e) {
      const mapped = this.#err(e, `pause the e2b sandbox of '${workspaceId}'`);
      // Killed by a racing destroy meanwhile: the goal (nothing running) holds.
      if (mapped instanceof NotFoundError) return;
      throw mapped;
    }
  }

  /** `Sandbox.connect` resumes a paused sandbox. A failure is an error and creates nothing (never a second sandbox). */
  async resume(workspaceId: string): Promise<void> {
    // The sandbox this driver last saw for the id, resumed without a look-up; one gone since is looked up again.
    const known = this.#known.get(parseWorkspaceId(workspaceId));
    if (known) {
      try {
        await this.#sdk.Sandbox.connect(known, { ...this.#c, timeoutMs: this.spec.timeoutSeconds * 1000 });
        return;
      } catch (e) {
        const mapped = this.#err(e, `resume the e2b sandbox of '${workspaceId}'`);
        if (!(mapped instanceof NotFoundError)) throw mapped;
        this.#known.delete(parseWorkspaceId(workspaceId));
      }
    }
    const d = await this.find(workspaceId);
    if (!d) throw new NotFoundError(`e2b workspace '${workspaceId}' not found`, { field: "workspaceId" });
    if (d.state === "running") return;
    try {
      await this.#sdk.Sandbox.connect(d.location.sandboxId!, { ...this.#c, timeoutMs: this.spec.timeoutSeconds * 1000 });
    } catch (e) {
      throw this.#err(e, `resume the e2b sandbox of '${workspaceId}'`);
    }
  }

  async destroy(workspaceId: string, options: { deleteData?: boolean } = {}): Promise<void> {
    const id = parseWorkspaceId(workspaceId);
    const rows = await this.#rows(id);
    if (!options.deleteData && rows[0]) {
      try {
        await this.#sdk.Sandbox.createSnapshot(rows[0].sandboxId, { ...this.#c, name: snapshotName(id) });
      } catch (e) {
        throw this.#err(e, `snapshot the files of '${id}' before removing its e2b sandbox`);
      }
    }
    this.#known.delete(id);
    for (const r of rows) await this.#kill(r.sandboxId);
    if (options.deleteData) {
      const snap = await this.#snapshot(id);
      if (snap)
        await this.#sdk.Sandbox.deleteSnapshot(snap, this.#c).catch((e: unknown) => {
          throw this.#err(e, `delete the snapshot of '${id}'`);
        });
    }
  }

  async connect(workspaceId: string, ctx: DriverContext = {}): Promise<E2BSandbox> {
    const d = await this.find(workspaceId);
    if (!d) throw new NotFoundError(`e2b workspace '${workspaceId}'; create it first not found`, { field: "workspaceId" });
    if (d.state !== "running") throw new UnavailableError(`e2b workspace '${workspaceId}' is ${d.state}; resume it first`);
    const sandboxId = d.location.sandboxId!;
    const timeoutMs = this.spec.timeoutSeconds * 1000;
    let sbx;
    try {
      sbx = await this.#sdk.Sandbox.connect(sandboxId, { ...this.#c, timeoutMs });
    } catch (e) {
      throw this.#err(e, `connect to the e2b sandbox of '${workspaceId}'`);
    }
    return new E2BSandbox(sbx, { touch: this.#keepAlive(sandboxId, timeoutMs, ctx), secret: this.#c.apiKey, logger: ctx.logger });
  }

  /**
   * The keep-alive: E2B pauses a sandbox `timeoutSeconds` after the last renewal, so operations renew
   * it, at most once per quarter of the timeout (in the background: never on an operation's path).
   */
  #keepAlive(sandboxId: string, timeoutMs: number, ctx: DriverContext): () => void {
    let last = Date.now();
    return () => {
      if (Date.now() - last < timeoutMs / 4) return;
      last = Date.now();
      this.#sdk.Sandbox.setTimeout(sandboxId, timeoutMs, this.#c).catch((e: unknown) =>
        ctx.logger?.warn("renewing the e2b sandbox keep-alive failed", { sandboxId, error: String((this.#err(e, "renew") as Error).message) }),
      );
    };
  }

  /**
   * The spec's extra Python packages in a new sandbox. The workspace folder needs no command here: the
   * runner makes it as it starts (and the no-python3 fallback its folders on first use).
   */
  async #bootstrap(sbx: E2BSdkSandbox, ctx: DriverContext): Promise<void> {
    try {
      const pip = this.spec.extraPip ?? [];
      if (pip.length) {
        ctx.onProgress?.({ phase: "bootstrap", message: `pip install ${pip.join(" ")}` });
        await sbx.commands.run(`python3 -m pip install --quiet --user ${pip.map(quote).join(" ")}`, { timeoutMs: 600_000 });
      }
    } catch (e) {
      const out = (e as { stderr?: string }).stderr;
      throw new ProvisionFailedError(`bootstrapping the e2b sandbox failed${out ? `: ${out.slice(-500)}` : ""}`, { cause: this.#err(e, "bootstrap") });
    }
  }

  async #kill(sandboxId: string): Promise<void> {
    try {
      await this.#sdk.Sandbox.kill(sandboxId, this.#c);
    } catch (e) {
      throw this.#err(e, `kill e2b sandbox ${sandboxId}`);
    }
  }

  /** The sandboxes of one id (ours or the Python reference's), oldest first: the first is the workspace's. */
  async #rows(id: string): Promise<SandboxInfo[]> {
    const rows = await this.#list({ [REFERENCE_KEY]: id });
    return rows.sort((a, b) => a.startedAt.getTime() - b.startedAt.getTime() || a.sandboxId.localeCompare(b.sandboxId));
  }

  /** Every page of a metadata query (running and paused); a failed page fails the call, never a partial answer. */
  async #list(metadata: Record<string, string>): Promise<SandboxInfo[]> {
    const out: SandboxInfo[] = [];
    try {
      const pages = this.#sdk.Sandbox.list({ ...this.#c, query: { metadata, state: ["running", "paused"] }, limit: 100 });
      while (pages.hasNext) {
        out.push(...(await pages.nextItems()));
        if (out.length > MAX_LISTED) throw new TooLargeError(`more than ${MAX_LISTED} e2b sandboxes match; list refuses a partial answer`);
      }
    } catch (e) {
      throw this.#err(e, "list e2b sandboxes");
    }
    return out;
  }

  async #snapshot(id: string): Promise<string | undefined> {
    try {
      const pages = this.#sdk.Sandbox.listSnapshots({ ...this.#c, name: snapshotName(id) });
      const first = pages.hasNext ? await pages.nextItems() : [];
      return first[0]?.snapshotId;
    } catch (e) {
      throw this.#err(e, `look up the snapshot of '${id}'`);
    }
  }
}

function describe(id: string, r: SandboxInfo): BackendDescription {
  const m = r.metadata;
  const tags: Record<string, string> = {};
  for (const [k, v] of Object.entries(m)) if (k.startsWith(TAG_PREFIX)) tags[k.slice(TAG_PREFIX.length)] = v;
  return {
    workspaceId: id,
    kind: "e2b",
    state: r.state === "paused" ? "paused" : "running",
    userId: m[LABELS.userId],
    agentId: m[LABELS.agentId],
    managedBy: m[LABELS.managedBy] as ManagedBy | undefined,
    tags,
    location: { sandboxId: r.sandboxId, template: r.templateId, workdir: E2B_WORKDIR, ...(m[LABELS.workspaceId] ? {} : { taggedBy: "agentscope" }) },
  };
}

/**
 * Replica leases on E2B workspaces: host-side files (a paused sandbox runs nothing, so a lease
 * cannot live in it), per user and per E2B endpoint, so replicas on one host share them. Replicas on
 * other hosts do not see them; their operations still succeed through the transparent resume.
 */
function e2bLeases(spec: E2BBackendSpec): FileLeases {
  const endpoint = spec.apiUrl ?? spec.domain ?? process.env.E2B_DOMAIN ?? "e2b.app";
  const key = createHash("sha256").update(endpoint).digest("hex").slice(0, 16);
  const user = process.getuid?.() ?? os.userInfo().username;
  const owned = path.join(os.tmpdir(), `agentws-e2b-leases-${user}`);
  return new FileLeases(path.join(owned, key), { ownedFolder: owned });
}
