import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { ConflictError, NotFoundError, PathEscapeError, WorkspaceError, fromZodError } from "../../errors.js";
import { expandHome } from "../../paths.js";
import type { Sandbox } from "../../sandbox.js";
import type { BackendDescription, Driver, DriverContext, WorkspaceIdentity } from "../driver.js";
import { LocalBackendSchema, WorkspaceIdSchema, parseWorkspaceId, type LocalBackendSpec } from "../spec.js";
import type { FileLeases } from "../lease.js";
import { localLeases } from "./lease.js";
import { LocalSandbox } from "./sandbox.js";

/** Metadata stamped in each workspace folder so `find` can reattach and tell whose it is. */
export const METADATA_FILE = ".agentws.json";

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
 * single-workspace spec). The folder's `.agentws.json` is the backend object: `find` reads it,
 * `destroy` removes it (and with `deleteData` the whole folder; folders without our metadata are
 * never deleted). A folder is always "running": pause and resume are no-ops.
 */
export class LocalDriver implements Driver {
  readonly kind = "local";
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
    const claimed = await writeMetadata(folder, metadata, { exclusive: true });
    if (!claimed) {
      const existing = await this.#readMetadata(folder);
      if (!existing || existing.workspaceId !== identity.workspaceId)
        throw new ConflictError(`host folder ${folder} already belongs to workspace '${existing?.workspaceId ?? "?"}'; use another path`, { field: "backend.path" });
      ctx.logger?.info("adopted an existing local workspace folder", { workspaceId: identity.workspaceId, folder });
      return this.#describe(folder, existing);
    }
    ctx.logger?.info("created a local workspace folder", { workspaceId: identity.workspaceId, folder });
    return this.#describe(folder, metadata);
  }

  async find(workspaceId: string): Promise<BackendDescription | null> {
    const folder = this.folderFor(workspaceId);
    await this.#checkFolder(folder, workspaceId);
    const metadata = await this.#readMetadata(folder);
    if (!metadata || metadata.workspaceId !== workspaceId) return null;
    return this.#describe(folder, metadata);
  }

  async pause(workspaceId: string): Promise<void> {
    this.folderFor(workspaceId);
  }

  async resume(workspaceId: string): Promise<void> {
    this.folderFor(workspaceId);
  }

  async destroy(workspaceId: string, options: { deleteData?: boolean } = {}, ctx: DriverContext = {}): Promise<void> {
    const found = await this.find(workspaceId);
    if (!found) return;
    const folder = this.folderFor(workspaceId);
    if (options.deleteData) await fs.rm(folder, { recursive: true, force: true });
    else await fs.rm(path.join(folder, METADATA_FILE), { force: true });
    ctx.logger?.info("destroyed a local workspace", { workspaceId, folder, deletedData: Boolean(options.deleteData) });
  }

  async updateTags(workspaceId: string, tags: Record<string, string>): Promise<void> {
    const folder = this.folderFor(workspaceId);
    const metadata = await this.#readMetadata(folder);
    if (!metadata || metadata.workspaceId !== workspaceId) throw new NotFoundError(`local workspace '${workspaceId}'`, { field: "workspaceId" });
    await writeMetadata(folder, { ...metadata, tags: { ...tags } }, { exclusive: false });
  }

  async connect(workspaceId: string): Promise<Sandbox> {
    if (!(await this.find(workspaceId)))
      throw new NotFoundError(`local workspace '${workspaceId}' (no ${METADATA_FILE} in ${this.folderFor(workspaceId)}); create it first`, { field: "workspaceId" });
    return new LocalSandbox(this.folderFor(workspaceId));
  }

  /** A per-id folder under basedir must be a real folder, not a symlink leading elsewhere. */
  async #checkFolder(folder: string, workspaceId: string): Promise<void> {
    if (this.#path) return;
    const info = await fs.lstat(folder).catch(() => null);
    if (info?.isSymbolicLink()) throw new PathEscapeError(folder, `(workspace '${workspaceId}') is a symlink; refusing to use it as a workspace folder`);
    if (info && !info.isDirectory()) throw new ConflictError(`${folder} exists and is not a folder`, { field: "workspaceId" });
  }

  async #readMetadata(folder: string): Promise<Metadata | null> {
    const file = path.join(folder, METADATA_FILE);
    let text: string;
    try {
      const info = await fs.lstat(file);
      if (!info.isFile()) throw new WorkspaceError("invalid_argument", `${file} is not a regular file; delete it to let the workspace be re-created`, { field: file });
      text = await fs.readFile(file, "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException)?.code === "ENOENT" || (e as NodeJS.ErrnoException)?.code === "ENOTDIR") return null;
      throw e;
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new WorkspaceError("invalid_argument", `${file} is not valid JSON; fix or delete it`, { field: file });
    }
    const parsed = MetadataSchema.safeParse(json);
    if (!parsed.success) throw fromZodError(file, parsed.error);
    return parsed.data;
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

/** Atomic write; with `exclusive`, returns false instead of replacing an existing file. */
async function writeMetadata(folder: string, metadata: Metadata, { exclusive }: { exclusive: boolean }): Promise<boolean> {
  const file = path.join(folder, METADATA_FILE);
  const tmp = `${file}.tmp-${randomBytes(6).toString("hex")}`;
  await fs.writeFile(tmp, `${JSON.stringify(metadata, null, 2)}\n`, { flag: "wx", mode: 0o644 });
  try {
    if (!exclusive) {
      await fs.rename(tmp, file);
      return true;
    }
    await fs.link(tmp, file);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException)?.code === "EEXIST") return false;
    throw e;
  } finally {
    await fs.rm(tmp, { force: true });
  }
}

