import { promises as fs } from "node:fs";
import path from "node:path";
import { ConflictError, InvalidArgumentError } from "../errors.js";
import type { Driver } from "../contract/driver.js";
import { REPLICA_ID, checkReplicaId, type Leases } from "../contract/leases.js";
import { parseWorkspaceId } from "../contract/schema.js";

/** Lease files read per workspace at most: a flood of names in the folder cannot make a sweep unbounded. */
const MAX_LEASES_READ = 1024;
/** A lease expired this long ago belongs to a replica that died without releasing: removed by the next check. */
const REMOVE_EXPIRED_AFTER_MS = 10 * 60_000;

/**
 * Leases as empty files `<root>/<workspaceId>/<replicaId>` whose mtime is the lease's expiry.
 * `root` is a host folder every replica sharing the backend can reach and the sandboxed agent
 * cannot (a backend's state folder, outside the workspace tree). Renewal is one utimes (a create
 * the first time); the freshness check is one readdir plus an lstat per replica.
 * Clocks: expiry compares mtimes written by other processes with this one's clock, so replicas
 * on different hosts need clocks within a small fraction of their idle TTL.
 */
export class FileLeases implements Leases {
  readonly root: string;
  /** A folder in a shared place (the host's tmpdir) that must be this user's own, private, real folder. */
  readonly #owned: string | undefined;
  #ownedChecked: Promise<void> | undefined;

  constructor(root: string, options: { ownedFolder?: string } = {}) {
    this.root = path.resolve(root);
    this.#owned = options.ownedFolder === undefined ? undefined : path.resolve(options.ownedFolder);
  }

  /** Another local user could have planted the shared folder (or a symlink) first: refuse to use it then. */
  #checkOwned(): Promise<void> {
    const owned = this.#owned;
    if (owned === undefined) return Promise.resolve();
    this.#ownedChecked ??= (async () => {
      await fs.mkdir(owned, { recursive: true, mode: 0o700 });
      const st = await fs.lstat(owned);
      const uid = process.getuid?.();
      if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || (st.mode & 0o077) !== 0)
        throw new ConflictError(`lease folder '${owned}' is not a private folder of this user; remove it or give the backend a basedir`, { field: "leases" });
    })().catch((e: unknown) => {
      this.#ownedChecked = undefined;
      throw e;
    });
    return this.#ownedChecked;
  }

  #file(workspaceId: string, replicaId: string): string {
    return path.join(this.root, parseWorkspaceId(workspaceId), checkReplicaId(replicaId));
  }

  async renew(workspaceId: string, replicaId: string, ttlMs: number): Promise<void> {
    const file = this.#file(workspaceId, replicaId);
    if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw new InvalidArgumentError("must be a positive number of milliseconds", { field: "ttlMs" });
    await this.#checkOwned();
    const now = new Date();
    const expires = new Date(now.getTime() + ttlMs);
    try {
      await fs.utimes(file, now, expires);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
      await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
      // "w" on a name we own: a concurrent renew of the same replica writes the same empty file.
      await fs.writeFile(file, "", { mode: 0o600, flag: "w" });
      await fs.utimes(file, now, expires);
    }
  }

  async othersActive(workspaceId: string, replicaId: string): Promise<boolean> {
    const own = checkReplicaId(replicaId);
    const dir = path.join(this.root, parseWorkspaceId(workspaceId));
    await this.#checkOwned();
    let handle: Awaited<ReturnType<typeof fs.opendir>>;
    try {
      handle = await fs.opendir(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw e;
    }
    const now = Date.now();
    let read = 0;
    let active = false;
    try {
      for await (const entry of handle) {
        if (++read > MAX_LEASES_READ) break;
        if (entry.name === own || !REPLICA_ID.test(entry.name) || !entry.isFile()) continue;
        const st = await fs.lstat(path.join(dir, entry.name)).catch(() => null);
        if (!st?.isFile()) continue;
        if (st.mtimeMs > now) {
          active = true;
          break;
        }
        if (now - st.mtimeMs > REMOVE_EXPIRED_AFTER_MS) await fs.rm(path.join(dir, entry.name), { force: true }).catch(() => undefined);
      }
    } finally {
      // Breaking out of the loop closes the handle already; closing twice throws ERR_DIR_CLOSED.
      await handle.close().catch(() => undefined);
    }
    return active;
  }

  async release(workspaceId: string, replicaId: string): Promise<void> {
    await fs.rm(this.#file(workspaceId, replicaId), { force: true });
  }

  async holders(workspaceId: string): Promise<{ replicaId: string; expiresAt: number }[]> {
    const dir = path.join(this.root, parseWorkspaceId(workspaceId));
    await this.#checkOwned();
    const names = await fs.readdir(dir).catch((e: NodeJS.ErrnoException) => {
      if (e.code === "ENOENT") return [] as string[];
      throw e;
    });
    const now = Date.now();
    const out: { replicaId: string; expiresAt: number }[] = [];
    for (const name of names.slice(0, MAX_LEASES_READ)) {
      if (!REPLICA_ID.test(name)) continue;
      const st = await fs.lstat(path.join(dir, name)).catch(() => null);
      if (st?.isFile() && st.mtimeMs > now) out.push({ replicaId: name, expiresAt: st.mtimeMs });
    }
    return out.sort((a, b) => b.expiresAt - a.expiresAt);
  }
}

/** What a guarded pause did: paused, or left running because another replica holds a fresh lease. */
export type GuardedPauseOutcome = "paused" | "kept";

/**
 * Pauses unless another replica's lease is fresh, safe against a replica that starts using the
 * object meanwhile: leases are read right before pausing and again after it; a lease that appeared
 * in between gets the object resumed, so it ends running whenever any replica holds a fresh lease.
 * (A replica whose lease was stale when it started an operation is covered by its own transparent
 * resume, see resuming-sandbox.ts.)
 */
export async function pauseUnlessLeased(
  driver: Pick<Driver, "pause" | "resume" | "leases">,
  workspaceId: string,
  guard: { replicaId: string },
): Promise<GuardedPauseOutcome> {
  const leases = driver.leases;
  if (!leases) {
    await driver.pause(workspaceId);
    return "paused";
  }
  if (await leases.othersActive(workspaceId, guard.replicaId)) return "kept";
  await driver.pause(workspaceId);
  if (await leases.othersActive(workspaceId, guard.replicaId)) {
    await driver.resume(workspaceId);
    return "kept";
  }
  return "paused";
}
