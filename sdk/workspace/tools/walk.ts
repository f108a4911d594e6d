import { isWorkspaceError } from "../../errors.js";
import { listDirectoryPage } from "../../util/listing.js";
import { MAX_LIST_PAGE, type FileInfo, type Sandbox } from "../../sandbox.js";

/** Upper bound on directory entries one Glob/Grep walk visits, so a huge tree cannot stall a tool. */
export const MAX_WALK_ENTRIES = 200_000;

export function hasMagic(segment: string): boolean {
  return /[*?[]/.test(segment);
}

/** Lists a directory, or null when it is not one (missing, a file, unreadable). */
export async function listDir(sandbox: Sandbox, rel: string): Promise<FileInfo[] | null> {
  // Page by page: a folder of 200,000 entries never arrives (or is parsed) as one piece.
  const out: FileInfo[] = [];
  let cursor: string | undefined;
  try {
    do {
      const page = await listDirectoryPage(sandbox, rel, { limit: MAX_LIST_PAGE, ...(cursor ? { cursor } : {}) });
      out.push(...page.entries);
      cursor = page.nextCursor;
    } while (cursor !== undefined && out.length <= MAX_WALK_ENTRIES);
  } catch {
    return null;
  }
  return out;
}

export function join(dir: string, name: string): string {
  return dir === "" ? name : `${dir}/${name}`;
}

/** Whether rel is a directory (symlinks followed inside the root); a symlink leaving the root throws. */
export async function isDirectory(sandbox: Sandbox, rel: string): Promise<boolean> {
  try {
    // One entry is enough to know: a folder of 200,000 entries costs one small page, not a full listing.
    await listDirectoryPage(sandbox, rel, { limit: 1 });
    return true;
  } catch (e) {
    if (isWorkspaceError(e, "path_escape")) throw e;
    return false;
  }
}

/** Concurrency for directory listings and file reads: remote sandboxes pay a round trip per call. */
export const WALK_CONCURRENCY = 8;

/** A counting semaphore: `run(fn)` starts fn when fewer than `n` are running. */
export function limiter(n: number): <T>(fn: () => Promise<T>) => Promise<T> {
  let active = 0;
  const queue: Array<() => void> = [];
  return async (fn) => {
    if (active >= n) await new Promise<void>((resolve) => queue.push(resolve));
    active++;
    try {
      return await fn();
    } finally {
      active--;
      queue.shift()?.();
    }
  };
}
