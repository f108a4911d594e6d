import { constants as fsc, promises as fs } from "node:fs";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { z } from "zod";
import { ConflictError, fromZodError, InternalError, InvalidArgumentError, UnavailableError } from "../errors.js";
import { WorkspaceIdSchema } from "../contract/schema.js";

/**
 * Host-side records about workspaces (who owns one, what it is), kept beside the workspace folders
 * under a backend's basedir, never inside a folder an agent can write: `<dir>/<name>.json`, mode
 * 0600 in 0700 folders. Reads are bounded, never follow a final symlink and never block on a
 * special file; a record that exists but cannot be read is an error, never "missing" (identity
 * checks fail closed).
 */
export class HostRecordStore {
  constructor(readonly dir: string) {}

  file(name: string): string {
    // A workspace id, a hashed id, or the base name of a folder the operator chose: one path component.
    if (name === "" || name === "." || name === ".." || /[/\0]/.test(name) || name.length > 240) throw new InternalError(`bad record name '${name}'`);
    return path.join(this.dir, `${name}.json`);
  }

  /** The parsed JSON of a record; null only when there is none. */
  async read(name: string): Promise<unknown> {
    return readJsonFile(this.file(name));
  }

  /** Writes a record unless one exists (decided atomically with link()); false when one does. */
  async create(name: string, value: unknown): Promise<boolean> {
    const file = this.file(name);
    const tmp = await this.#stage(file, value);
    try {
      await fs.link(tmp, file);
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "EEXIST") return false;
      throw e;
    } finally {
      await fs.rm(tmp, { force: true });
    }
  }

  /** Replaces a record atomically (temp file + rename). */
  async replace(name: string, value: unknown): Promise<void> {
    const file = this.file(name);
    const tmp = await this.#stage(file, value);
    try {
      await fs.rename(tmp, file);
    } catch (e) {
      await fs.rm(tmp, { force: true });
      throw e;
    }
  }

  async remove(name: string): Promise<void> {
    await fs.rm(this.file(name), { force: true });
  }

  /** Removes the store's folder when it is empty (a destroy tidying up); a racing writer recreates it. */
  async prune(): Promise<void> {
    await fs.rmdir(this.dir).catch(() => undefined);
  }

  async #stage(file: string, value: unknown): Promise<string> {
    const tmp = `${file}.tmp-${randomBytes(6).toString("hex")}`;
    const text = `${JSON.stringify(value, null, 2)}\n`;
    // Twice: a racing prune() may remove the folder between the mkdir and the write.
    for (let attempt = 0; ; attempt++) {
      await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
      try {
        await fs.writeFile(tmp, text, { flag: "wx", mode: 0o600 });
        return tmp;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "ENOENT" || attempt > 0) throw e;
      }
    }
  }
}

/** Records are small; anything bigger is not one of ours. */
export const MAX_RECORD_BYTES = 64 * 1024;

/**
 * Reads and parses a JSON file without following a final symlink or blocking on a FIFO, at most
 * MAX_RECORD_BYTES. null when the file does not exist; any other problem is a WorkspaceError naming it.
 */
export async function readJsonFile(file: string): Promise<unknown> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    if (code === "ELOOP") throw new InvalidArgumentError(`${file} is a symlink, not a record; delete it`);
    throw new UnavailableError(`${file} cannot be read (${code ?? String(e)})`, { cause: e });
  }
  let text: string;
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new InvalidArgumentError(`${file} is not a regular file; delete it to let the workspace be re-created`);
    if (info.size > MAX_RECORD_BYTES) throw new InvalidArgumentError(`${file} is over ${MAX_RECORD_BYTES} bytes; it is not a record of ours`);
    const buffer = Buffer.alloc(MAX_RECORD_BYTES + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length > MAX_RECORD_BYTES) throw new InvalidArgumentError(`${file} is over ${MAX_RECORD_BYTES} bytes; it is not a record of ours`);
    }
    text = buffer.toString("utf8", 0, length);
  } finally {
    await handle.close();
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new InvalidArgumentError(`${file} is not valid JSON; fix or delete it`);
  }
}

/** Who claimed an unowned workspace (a warm-pool member handed to a user). Written once, never replaced. */
export const OwnerClaimSchema = z.object({
  version: z.literal(1),
  workspaceId: WorkspaceIdSchema,
  userId: z.string().min(1),
  agentId: z.string().optional(),
  claimedAt: z.string(),
});
export type OwnerClaim = z.infer<typeof OwnerClaimSchema>;

/** The claim on a workspace, or null when nobody claimed it. A claim that cannot be read, or names another id, throws. */
export async function readClaim(store: HostRecordStore, name: string, workspaceId: string): Promise<OwnerClaim | null> {
  const json = await store.read(name);
  if (json === null) return null;
  const parsed = OwnerClaimSchema.safeParse(json);
  if (!parsed.success) throw fromZodError(store.file(name), parsed.error);
  if (parsed.data.workspaceId !== workspaceId)
    throw new InvalidArgumentError(`${store.file(name)} records workspace '${parsed.data.workspaceId}', not '${workspaceId}'; fix or delete it`, {
      field: store.file(name),
      fieldPrefix: false,
    });
  return parsed.data;
}

/** Records `owner` as the claimer of `workspaceId` once; the same owner again is a no-op, another is a ConflictError. */
export async function recordClaim(
  store: HostRecordStore,
  name: string,
  workspaceId: string,
  owner: { userId: string; agentId?: string | undefined },
): Promise<OwnerClaim> {
  const claim: OwnerClaim = {
    version: 1,
    workspaceId,
    userId: owner.userId,
    ...(owner.agentId !== undefined ? { agentId: owner.agentId } : {}),
    claimedAt: new Date().toISOString(),
  };
  if (await store.create(name, claim)) return claim;
  const existing = await readClaim(store, name, workspaceId);
  if (!existing) throw new UnavailableError(`the claim on workspace '${workspaceId}' vanished while it was being recorded; try again`);
  if (existing.userId !== owner.userId) throw ownerConflict(workspaceId);
  return existing;
}

export function ownerConflict(workspaceId: string): ConflictError {
  return new ConflictError(`workspace '${workspaceId}' belongs to another user; workspace ids are never shared between users`, {
    field: "userId",
    details: { workspaceId },
  });
}
