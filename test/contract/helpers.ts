import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { strToU8, zipSync, type Zippable } from "fflate";
import * as tar from "tar-stream";
import { expect } from "vitest";
import { isWorkspaceError, type WorkspaceError, type WorkspaceErrorCode } from "../../sdk/errors.js";
import type { Workspace } from "../../sdk/workspace/workspace.js";

export const FIXTURE_SKILLS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/skills");
export const skillPath = (name: string): string => path.join(FIXTURE_SKILLS, name);

export async function readText(ws: Workspace, rel: string): Promise<string> {
  return (await ws.getBackend().readFile(rel)).toString("utf8");
}

export async function exists(ws: Workspace, rel: string): Promise<boolean> {
  return (await ws.getBackend().stat(rel)) !== null;
}

export async function names(ws: Workspace, rel: string): Promise<string[]> {
  return (await ws.getBackend().list(rel)).map((e) => e.name).sort();
}

/** Expects a WorkspaceError with `code`, and a message matching `pattern` when given. */
export async function expectCode(promise: Promise<unknown>, code: WorkspaceErrorCode, pattern?: RegExp): Promise<Error> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e as Error & { code?: string },
  );
  expect(err, `expected a '${code}' error`).toBeInstanceOf(Error);
  expect((err as { code?: string }).code, (err as Error).message).toBe(code);
  if (pattern) expect((err as Error).message).toMatch(pattern);
  return err as Error;
}

/** The WorkspaceError a promise rejects with; fails the test on success or on any other error. */
export async function rejection(p: Promise<unknown>): Promise<WorkspaceError> {
  try {
    await p;
  } catch (e) {
    if (isWorkspaceError(e)) return e;
    throw new Error(`expected a WorkspaceError, got ${String(e)}`);
  }
  throw new Error("expected a rejection");
}

/** A host temp folder for test inputs (skill folders built on the fly); removed by the caller. */
export async function hostTemp(prefix = "agentws-test-"): Promise<string> {
  return fs.mkdtemp(path.join(os.tmpdir(), prefix));
}

/** Writes a skill folder on the host: SKILL.md from name/description/body plus extra files. */
export async function writeSkill(dir: string, fm: { name?: string; description?: string } | string, files: Record<string, string> = {}): Promise<string> {
  await fs.mkdir(dir, { recursive: true });
  const text =
    typeof fm === "string"
      ? fm
      : `---\n${fm.name !== undefined ? `name: ${JSON.stringify(fm.name)}\n` : ""}${fm.description !== undefined ? `description: ${JSON.stringify(fm.description)}\n` : ""}---\nBody of ${fm.name}.\n`;
  await fs.writeFile(path.join(dir, "SKILL.md"), text);
  for (const [rel, content] of Object.entries(files)) {
    await fs.mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
    await fs.writeFile(path.join(dir, rel), content);
  }
  return dir;
}

export function skillMd(name: string, description: string, body = "Body."): string {
  return `---\nname: ${JSON.stringify(name)}\ndescription: ${JSON.stringify(description)}\n---\n${body}\n`;
}

// ------------------------------------------------------------------ archives

export interface ZipMember {
  data: string | Uint8Array;
  /** Unix mode including the file type bits, e.g. 0o120777 for a symlink. */
  mode?: number;
}

export function zipOf(members: Record<string, string | ZipMember>): Uint8Array {
  const input: Zippable = {};
  for (const [name, m] of Object.entries(members)) {
    const member = typeof m === "string" ? { data: m } : m;
    const data = typeof member.data === "string" ? strToU8(member.data) : member.data;
    input[name] = member.mode === undefined ? data : [data, { os: 3, attrs: (member.mode << 16) >>> 0 }];
  }
  return zipSync(input, { level: 6 });
}

export interface TarMember {
  name: string;
  type?: "file" | "directory" | "symlink" | "link" | "fifo";
  data?: string;
  linkname?: string;
  mode?: number;
}

export async function tarOf(members: TarMember[], gzip = false): Promise<Uint8Array> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  const done = new Promise<void>((resolve, reject) => {
    pack.on("data", (c: unknown) => void chunks.push(c as Buffer));
    pack.on("end", () => resolve());
    pack.on("error", reject);
  });
  for (const m of members) {
    const type = m.type ?? "file";
    const header = { name: m.name, type, mode: m.mode ?? (type === "directory" ? 0o755 : 0o644), ...(m.linkname ? { linkname: m.linkname } : {}) };
    if (type === "file") pack.entry(header, m.data ?? "");
    else pack.entry(header);
  }
  pack.finalize();
  await done;
  const buf = Buffer.concat(chunks);
  return gzip ? gzipSync(buf) : buf;
}

/** Yields the bytes in small chunks, like an HTTP upload. */
export async function* chunked(data: Uint8Array, size = 1000): AsyncIterable<Uint8Array> {
  for (let i = 0; i < data.length; i += size) yield data.subarray(i, i + size);
}
