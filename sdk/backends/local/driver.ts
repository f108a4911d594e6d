import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { ConflictError, InvalidArgumentError, NotFoundError, PathEscapeError, fromZodError } from "../../errors.js";
import type { Logger } from "../../logger.js";
import { expandHome } from "../../paths.js";
import type { Sandbox } from "../../sandbox.js";
import { matchesSelector, type BackendDescription, type DestroyOptions, type Driver, type DriverContext } from "../../contract/driver.js";
import { type ListSelector, type WorkspaceIdentity } from "../../contract/driver.js";
import { recordNames } from "../../kit/list.js";
import { HostRecordStore, ownerConflict, readClaim, readJsonFile, recordClaim } from "../../kit/owner-store.js";
import { WorkspaceIdSchema, parseWorkspaceId } from "../../contract/schema.js";
import { LocalBackendSchema, type LocalBackendSpec } from "./schema.js";
import type { FileLeases } from "../../kit/lease.js";
import { localLeases } from "./lease.js";
import { LocalSandbox } from "../../kit/host-sandbox.js";

/**
 * Where earlier versions kept the metadata: inside the workspace folder, where the agent's own
 * Write tool could rewrite the owner. Read once to migrate (see #readMetadata), then deleted.
 */
export const METADATA_FILE = ".agentws.json";

/** Folder beside the workspace folders holding their records (a workspace id never starts with "."). */
export const RECORDS_DIR = ".agentws";

/** The host-side metadata record of a workspace folder: `<parent>/.agentws/owners/<folder name>.json`. */
export function metadataRecordPath(folder: string): string {
  return path.join(path.dirname(folder), RECORDS_DIR, "owners", `${path.basename(folder)}.json`);
}

const MetadataSchema = z.object({
  version: z.literal(1),
  workspaceId: WorkspaceIdSchema,
  userId: z.string().optional(),
  agentId: z.string().optional(),
  managedBy: z.enum(["pulumi", "runtime"]),
  tags: z.record(z.string(), z.string()).default({}),
  createdAt: z.string(),
});
type Metadata = z.infer<typeof MetadataSchema>;

/** Where workspaces live when the spec names neither `basedir` nor `path`. */
export function defaultLocalBasedir(): string {
  return path.join(os.homedir(), ".agent-workspaces", "local");
}

/**
 * Local backend: one host folder per workspace, `<basedir>/<workspaceId>` (or exactly `path` for a
 * single-workspace spec). The backend object is a metadata record beside the folder, out of the
 * file tools' reach (`<parent>/.agentws/owners/<name>.json`; a warm-pool claim goes to
 * `.agentws/claims/`): `find` reads it, `destroy` removes it (and with `deleteData` the whole folder;
 * folders without our metadata are never deleted). A folder is always "running": pause and resume
 * are no-ops. Commands still run on the host: an agent's Bash can reach these records (Local has no isolation).
 */
export class LocalDriver implements Driver {
  readonly kind = "local";
  /** A host folder outlives the process. */
  readonly persistent = true;
  readonly #basedir: string;
  readonly #path: string | undefined;
  readonly leases: FileLeases;

  constructor(spec: z.input<typeof LocalBackendSchema> = { kind: "local" }) {
    const parsed = LocalBackendSchema.safeParse(spec);
    if (!parsed.success) throw fromZodError("backend", parsed.error);
    const s: LocalBackendSpec = parsed.data;
    this.#basedir = path.resolve(expandHome(s.basedir ?? defaultLocalBasedir()));
    this.#path = s.path === undefined ? undefined : path.resolve(expandHome(s.path));
    this.leases = localLeases(this.#basedir, this.#path);
    if (this.#path !== undefined) {
      const records = path.dirname(metadataRecordPath(this.#path));
      const rel = path.relative(this.#path, records);
      if (rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel)))
        throw new InvalidArgumentError(
          `'${this.#path}' would hold its own owner records (${records}); choose a folder that is not a filesystem root or named ${RECORDS_DIR}`,
          { field: "backend.path" },
        );
    }
  }

  /** Metadata records (the backend objects) and warm-pool claims, beside the folder of `workspaceId`. */
  #stores(folder: string): { records: HostRecordStore; claims: HostRecordStore; name: string } {
    const dir = path.join(path.dirname(folder), RECORDS_DIR);
    return { records: new HostRecordStore(path.join(dir, "owners")), claims: new HostRecordStore(path.join(dir, "claims")), name: path.basename(folder) };
  }

  /** The host folder of a workspace id. Ids are checked, so the folder is a direct child of basedir. */
  folderFor(workspaceId: string): string {
    const id = parseWorkspaceId(workspaceId);
    return this.#path ?? path.join(this.#basedir, id);
  }

  async create(identity: WorkspaceIdentity, ctx: DriverContext = {}): Promise<BackendDescription> {
    const folder = this.folderFor(identity.workspaceId);
    await this.#checkFolder(folder, identity.workspaceId);
    await fs.mkdir(folder, { recursive: true });
    const metadata: Metadata = {
      version: 1,
      workspaceId: identity.workspaceId,
      ...(identity.userId !== undefined && { userId: identity.userId }),
      ...(identity.agentId !== undefined && { agentId: identity.agentId }),
      managedBy: identity.managedBy,
      tags: { ...identity.tags },
      createdAt: new Date().toISOString(),
    };
    // Claim the folder with a create-exclusive write: of two racing creators one writes, the other adopts.
    const { records, name } = this.#stores(folder);
    const claimed = await records.create(name, metadata);
    if (!claimed) {
      const existing = await this.#readMetadata(folder, ctx.logger);
      if (!existing || existing.workspaceId !== identity.workspaceId)
        throw new ConflictError(`host folder ${folder} already belongs to workspace '${existing?.workspaceId ?? "?"}'; use another path`, {
          field: "backend.path",
        });
      ctx.logger?.info("adopted an existing local workspace folder", { workspaceId: identity.workspaceId, folder });
      return this.#describe(folder, await this.#withClaim(folder, existing));
    }
    ctx.logger?.info("created a local workspace folder", { workspaceId: identity.workspaceId, folder });
    return this.#describe(folder, metadata);
  }

  async find(workspaceId: string, ctx: DriverContext = {}): Promise<BackendDescription | null> {
    const folder = this.folderFor(workspaceId);
    // A record whose folder is gone describes a lost workspace: "not found" (create recreates it, keeping the record's owner).
    if (!(await this.#checkFolder(folder, workspaceId))) return null;
    const metadata = await this.#readMetadata(folder, ctx.logger);
    if (!metadata || metadata.workspaceId !== workspaceId) return null;
    return this.#describe(folder, await this.#withClaim(folder, metadata));
  }

  /**
   * Records the owner of an unowned workspace (a warm-pool member handed to a user) in a write-once
   * claim beside the folder; the same owner again is a no-op, another user a ConflictError.
   */
  async claimOwner(workspaceId: string, owner: { userId: string; agentId?: string | undefined }): Promise<void> {
    const found = await this.find(workspaceId);
    if (!found) throw new NotFoundError(`local workspace '${workspaceId}' not found`, { field: "workspaceId" });
    if (found.userId !== undefined) {
      if (found.userId !== owner.userId) throw ownerConflict(workspaceId);
      return;
    }
    const { claims, name } = this.#stores(this.folderFor(workspaceId));
    await recordClaim(claims, name, workspaceId, owner);
  }

  /** Workspaces with a metadata record in this driver's basedir (or the one folder of a `path` spec). */
  async list(selector: ListSelector = {}, ctx: DriverContext = {}): Promise<BackendDescription[]> {
    const ids: string[] = [];
    if (this.#path !== undefined) {
      const metadata = await this.#readMetadata(this.#path, ctx.logger).catch(() => null);
      if (metadata) ids.push(metadata.workspaceId);
    } else {
      // Record names are workspace ids (folders are `<basedir>/<id>`); anything else is not ours.
      for (const name of await recordNames(path.join(this.#basedir, RECORDS_DIR, "owners"))) if (WorkspaceIdSchema.safeParse(name).success) ids.push(name);
    }
    const out: BackendDescription[] = [];
    for (const id of ids) {
      const found = await this.find(id, ctx).catch((e: unknown) => {
        ctx.logger?.warn("skipped an unreadable local workspace record while listing", { workspaceId: id, error: String(e) });
        return null;
      });
      if (found && matchesSelector(found, selector)) out.push(found);
    }
    return out;
  }

  async pause(workspaceId: string): Promise<void> {
    this.folderFor(workspaceId);
  }

  async resume(workspaceId: string): Promise<void> {
    this.folderFor(workspaceId);
  }

  async destroy(workspaceId: string, options: DestroyOptions = {}, ctx: DriverContext = {}): Promise<void> {
    if (options.leftover) return this.#destroyLeftover(workspaceId, options, ctx);
    const found = await this.find(workspaceId);
    if (!found) return;
    const folder = this.folderFor(workspaceId);
    if (options.deleteData) await fs.rm(folder, { recursive: true, force: true });
    else await fs.rm(path.join(folder, METADATA_FILE), { force: true });
    // The claim first: a crash in between leaves a record without a claim, i.e. an unowned but
    // findable workspace only if it had no owner at creation; never a claim adopted by a new record.
    const { records, claims, name } = this.#stores(folder);
    await claims.remove(name);
    await records.remove(name);
    // Leave no empty record folders behind (they are recreated on the next create).
    await claims.prune();
    await records.prune();
    await fs.rmdir(path.dirname(records.dir)).catch(() => undefined);
    ctx.logger?.info("destroyed a local workspace", { workspaceId, folder, deletedData: Boolean(options.deleteData) });
  }

  /**
   * A folder an earlier destroy kept (it removed the record, left the files): deleted with
   * deleteData unless a record (or a pre-record `.agentws.json`) says a workspace uses it now,
   * which is a ConflictError. A record that cannot be read fails too: never delete on a guess.
   */
  async #destroyLeftover(workspaceId: string, options: DestroyOptions, ctx: DriverContext): Promise<void> {
    if (!options.deleteData) return;
    const folder = this.folderFor(workspaceId);
    if (!(await this.#checkFolder(folder, workspaceId))) return;
    const { records, claims, name } = this.#stores(folder);
    const record = await records.read(name);
    const legacy = await fs.lstat(path.join(folder, METADATA_FILE)).catch(() => null);
    if (record !== null || legacy) {
      const owner = (record as { workspaceId?: unknown } | null)?.workspaceId;
      throw new ConflictError(
        `host folder ${folder} is in use by ${typeof owner === "string" ? `workspace '${owner}'` : "a workspace"} (record ${record !== null ? records.file(name) : path.join(folder, METADATA_FILE)}); it is not deleted`,
        { field: "backend.basedir", details: { folder } },
      );
    }
    await fs.rm(folder, { recursive: true, force: true });
    await claims.remove(name);
    await claims.prune();
    await records.prune();
    await fs.rmdir(path.dirname(records.dir)).catch(() => undefined);
    ctx.logger?.info("deleted a local workspace folder left behind by an earlier destroy", { workspaceId, folder });
  }

  async updateTags(workspaceId: string, tags: Record<string, string>): Promise<void> {
    const folder = this.folderFor(workspaceId);
    const metadata = await this.#readMetadata(folder);
    if (!metadata || metadata.workspaceId !== workspaceId) throw new NotFoundError(`local workspace '${workspaceId}' not found`, { field: "workspaceId" });
    const { records, name } = this.#stores(folder);
    await records.replace(name, { ...metadata, tags: { ...tags } });
  }

  async connect(workspaceId: string): Promise<Sandbox> {
    if (!(await this.find(workspaceId)))
      throw new NotFoundError(`local workspace '${workspaceId}' (no record ${metadataRecordPath(this.folderFor(workspaceId))}); create it first not found`, {
        field: "workspaceId",
      });
    return new LocalSandbox(this.folderFor(workspaceId));
  }

  /** A per-id folder under basedir must be a real folder, not a symlink leading elsewhere. Whether it exists. */
  async #checkFolder(folder: string, workspaceId: string): Promise<boolean> {
    if (this.#path) return (await fs.stat(folder).catch(() => null))?.isDirectory() ?? false;
    const info = await fs.lstat(folder).catch(() => null);
    if (info?.isSymbolicLink())
      throw new PathEscapeError(`path '${folder}' (workspace '${workspaceId}') is a symlink; refusing to use it as a workspace folder`);
    if (info && !info.isDirectory()) throw new ConflictError(`${folder} exists and is not a folder`, { field: "workspaceId" });
    return info !== null;
  }

  /**
   * The folder's metadata record. Migration from the in-tree `.agentws.json` of earlier versions:
   * read only when the host-side record is missing, copied out once (create-exclusive), then
   * deleted, so nothing in the tree is ever trusted again. A file the agent had already rewritten
   * before the upgrade cannot be told from an honest one; the migration is logged (warn) so an
   * operator can check it, and running it before agents start (any find, e.g. `pulumi refresh`) closes that window.
   */
  async #readMetadata(folder: string, logger?: Logger): Promise<Metadata | null> {
    const { records, name } = this.#stores(folder);
    const json = await records.read(name);
    if (json !== null) return parseMetadata(json, records.file(name));
    const legacyFile = path.join(folder, METADATA_FILE);
    const legacy = await readJsonFile(legacyFile);
    if (legacy === null) return null;
    const metadata = parseMetadata(legacy, legacyFile);
    if (!(await records.create(name, metadata))) {
      // A racing reader migrated it first: theirs is the record.
      const theirs = await records.read(name);
      return theirs === null ? null : parseMetadata(theirs, records.file(name));
    }
    await fs.rm(legacyFile, { force: true });
    logger?.warn("moved a local workspace's metadata out of its folder (written by an earlier version)", {
      workspaceId: metadata.workspaceId,
      record: records.file(name),
      userId: metadata.userId ?? "(none)",
    });
    return metadata;
  }

  /** The metadata with the owner: the creator recorded in it, else the warm-pool claim, if any. */
  async #withClaim(folder: string, m: Metadata): Promise<Metadata> {
    if (m.userId !== undefined) return m;
    const { claims, name } = this.#stores(folder);
    const claim = await readClaim(claims, name, m.workspaceId);
    return claim ? { ...m, userId: claim.userId, agentId: m.agentId ?? claim.agentId } : m;
  }

  #describe(folder: string, m: Metadata): BackendDescription {
    return {
      workspaceId: m.workspaceId,
      kind: "local",
      state: "running",
      userId: m.userId,
      agentId: m.agentId,
      managedBy: m.managedBy,
      tags: m.tags,
      location: { hostPath: folder },
    };
  }
}

function parseMetadata(json: unknown, file: string): Metadata {
  const parsed = MetadataSchema.safeParse(json);
  if (!parsed.success) throw fromZodError(file, parsed.error);
  return parsed.data;
}
