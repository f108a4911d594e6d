import { promises as fs } from "node:fs";
import { TooLargeError } from "../errors.js";

/** The most backend objects one `Driver.list` call reads. */
export const MAX_LISTED = 10_000;

/**
 * Names of the `.json` records in a host folder (missing folder: none), in a stable order. Bounded by
 * MAX_LISTED entries read, so a folder flooded with files cannot stall a listing.
 */
export async function recordNames(dir: string): Promise<string[]> {
  let handle;
  try {
    handle = await fs.opendir(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw e;
  }
  const names: string[] = [];
  let seen = 0;
  try {
    for await (const entry of handle) {
      if (++seen > MAX_LISTED) throw new TooLargeError(`more than ${MAX_LISTED} entries in ${dir}; list refuses a partial answer`);
      if (entry.isFile() && entry.name.endsWith(".json")) names.push(entry.name.slice(0, -".json".length));
    }
  } finally {
    await handle.close().catch(() => undefined);
  }
  return names.sort();
}
