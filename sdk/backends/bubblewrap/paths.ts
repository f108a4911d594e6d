import { blake2b } from "@noble/hashes/blake2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { PathEscapeError } from "../../errors.js";

/** 32 hex chars: BLAKE2b with a 16-byte digest, as the reference names per-workspace folders. */
export function hashedName(value: string): string {
  return bytesToHex(blake2b(utf8ToBytes(value), { dkLen: 16 }));
}

/** Where ephemeral (no basedir) bubblewrap workspaces live; removed on destroy. */
export function ephemeralBasedir(): string {
  return path.join(os.tmpdir(), "agentws-bubblewrap");
}

/** Creates `dir` and any missing parents with mode 0700 (mkdir's mode is masked by umask, so chmod). */
export async function mkdirPrivate(dir: string): Promise<void> {
  const missing: string[] = [];
  let cur = path.resolve(dir);
  while (!(await fs.lstat(cur).catch(() => null))) {
    missing.unshift(cur);
    const parent = path.dirname(cur);
    if (parent === cur) break;
    cur = parent;
  }
  for (const d of missing) {
    await fs.mkdir(d).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== "EEXIST") throw e;
    });
    await fs.chmod(d, 0o700);
  }
}

/** Throws unless `child` (after realpath) is `root` or inside it. Both must exist. */
export async function assertInside(root: string, child: string, what: string): Promise<string> {
  const realRoot = await fs.realpath(root);
  const real = await fs.realpath(child);
  if (real !== realRoot && !real.startsWith(realRoot + path.sep))
    throw new PathEscapeError(`path '${child}' (${what}) resolves to '${real}', outside basedir '${realRoot}'`);
  return real;
}
