import { cursorAt, pageBounds, type FileInfo, type ListPage, type ListPageOptions, type Sandbox, type TreeEntry } from "../sandbox.js";
import { type WalkTreeOptions, type WalkTreeResult } from "../sandbox.js";

/**
 * One page of a workspace folder through any Sandbox: its own `listPage` (bounded work per call)
 * where it has one, else a page cut from a full `list` (backends without the runner).
 */
export async function listDirectoryPage(sandbox: Pick<Sandbox, "list" | "listPage">, rel: string, options: ListPageOptions = {}): Promise<ListPage> {
  if (sandbox.listPage) return sandbox.listPage(rel, options);
  return pageOfEntries(await sandbox.list(rel), options);
}

/** The page `options` asks for out of a full listing (the fallback of backends that list in one go). */
export function pageOfEntries(all: FileInfo[], options: ListPageOptions = {}): ListPage {
  const { offset, limit } = pageBounds(options);
  const entries = all.slice(offset, offset + limit);
  return offset + limit < all.length ? { entries, nextCursor: cursorAt(offset + limit) } : { entries };
}

/** Every entry below `rel` through any Sandbox: its own `walkTree` where it has one, else `walkTreeByList`. */
export function walkDirectoryTree(sandbox: Pick<Sandbox, "list" | "walkTree">, rel: string, options: WalkTreeOptions): Promise<WalkTreeResult> {
  if (sandbox.walkTree) return sandbox.walkTree(rel, options);
  return walkTreeByList(sandbox, rel, options);
}

/**
 * walkTree's answer made of one `list` per folder (backends without the runner): each call resolves
 * its path again, so depth costs more here, but entries and time are bounded the same way.
 */
export async function walkTreeByList(sandbox: Pick<Sandbox, "list">, rel: string, options: WalkTreeOptions): Promise<WalkTreeResult> {
  const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
  const skip = new Set(options.skipDirs ?? []);
  const entries: TreeEntry[] = [];
  const pending: Array<[number, string]> = [[-1, rel]];
  let truncated = false;
  for (let first = true; pending.length > 0; first = false) {
    const [parent, dir] = pending.pop()!;
    let listed: FileInfo[];
    try {
      listed = await sandbox.list(dir);
    } catch (e) {
      // The walked folder itself must exist; a folder gone since it was listed is skipped.
      if (first) throw e;
      continue;
    }
    for (const e of listed) {
      if (entries.length >= options.maxEntries || Date.now() > deadline) {
        truncated = true;
        break;
      }
      const file = e.type === "file";
      entries.push({ parent, name: e.name, type: e.type, size: file ? e.size : 0, mtimeMs: file ? e.mtimeMs : 0 });
      if (e.type === "dir" && !skip.has(e.name)) pending.push([entries.length - 1, dir === "" ? e.name : `${dir}/${e.name}`]);
    }
    if (truncated) break;
  }
  return { entries, truncated };
}
