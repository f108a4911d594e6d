import { mkdtempSync, rmSync, promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { constants as zc, crc32, deflateRawSync, gzipSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import { LocalWorkspace } from "../../sdk/backends/local/index.js";
import type { Workspace } from "../../sdk/workspace/workspace.js";

/**
 * Attack: a caller uploads a small skill archive that inflates to gigabytes, or holds a huge number
 * of entries. The install must fail with a clear error as soon as the limit is crossed (one pass,
 * no full inflation), and nothing may land in the workspace. Each bomb is a few MB, built here by
 * repeating compressed blocks of zeros (never holding the inflated bytes).
 */
const base = mkdtempSync(path.join(os.tmpdir(), "agentws-sec-archive-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));

const GiB = 1024 ** 3;
const CHUNK = 64 * 1024 * 1024;
const skillText = "---\nname: bomb\ndescription: an archive bomb\n---\nbody\n";

/** A ustar header; `size` may exceed what any buffer here holds. */
function tarHeader(name: string, size: number, type = "0"): Buffer {
  const h = Buffer.alloc(512);
  h.write(name, 0, 100, "utf8");
  h.write("0000644\0", 100, "ascii");
  h.write("0000000\0", 108, "ascii");
  h.write("0000000\0", 116, "ascii");
  h.write(`${size.toString(8).padStart(11, "0")}\0`, 124, "ascii");
  h.write(
    `${Math.floor(Date.now() / 1000)
      .toString(8)
      .padStart(11, "0")}\0`,
    136,
    "ascii",
  );
  h.write("        ", 148, "ascii");
  h.write(type, 156, "ascii");
  h.write("ustar\0", 257, "ascii");
  h.write("00", 263, "ascii");
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148, "ascii");
  return h;
}

function tarFile(name: string, data: string): Buffer {
  const body = Buffer.from(data);
  return Buffer.concat([tarHeader(name, body.length), body, Buffer.alloc((512 - (body.length % 512)) % 512)]);
}

/** gzip members of 64 MiB of zeros each (a multi-member gzip stream is one stream to gunzip). */
function* gzipZeros(total: number): Generator<Uint8Array> {
  const member = gzipSync(Buffer.alloc(CHUNK));
  for (let n = 0; n < total; n += CHUNK) yield member;
}

async function* stream(parts: Iterable<Uint8Array>): AsyncIterable<Uint8Array> {
  for (const p of parts) yield p;
}

function* declaredHugeMember(): Generator<Uint8Array> {
  yield gzipSync(Buffer.concat([tarFile("skill/SKILL.md", skillText), tarHeader("skill/big.bin", 5 * GiB)]));
  yield* gzipZeros(5 * GiB);
  yield gzipSync(Buffer.alloc(1024));
}

function* zerosAfterTheEnd(): Generator<Uint8Array> {
  yield gzipSync(Buffer.concat([tarFile("skill/SKILL.md", skillText), Buffer.alloc(1024)]));
  yield* gzipZeros(5 * GiB);
}

function* manyTarEntries(n: number): Generator<Uint8Array> {
  const parts = [tarFile("skill/SKILL.md", skillText)];
  for (let i = 0; i < n; i++) parts.push(tarHeader(`skill/f${i}`, 0));
  parts.push(Buffer.alloc(1024));
  yield gzipSync(Buffer.concat(parts));
}

/** A zip of stored empty members (plus SKILL.md); `n` up to 65,534 (0xffff marks zip64). */
function manyZipEntries(n: number): Buffer {
  const locals: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  const add = (name: string, data: Buffer) => {
    const nameBuf = Buffer.from(name);
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(nameBuf.length, 26);
    const cd = Buffer.alloc(46);
    cd.writeUInt32LE(0x02014b50, 0);
    cd.writeUInt16LE(20, 4);
    cd.writeUInt16LE(20, 6);
    cd.writeUInt32LE(crc, 16);
    cd.writeUInt32LE(data.length, 20);
    cd.writeUInt32LE(data.length, 24);
    cd.writeUInt16LE(nameBuf.length, 28);
    cd.writeUInt32LE(offset, 42);
    locals.push(local, nameBuf, data);
    central.push(cd, nameBuf);
    offset += 30 + nameBuf.length + data.length;
  };
  add("SKILL.md", Buffer.from(skillText));
  for (let i = 1; i < n; i++) add(`f${i}`, Buffer.alloc(0));
  const cdBuf = Buffer.concat(central);
  const eocd = Buffer.alloc(22);
  eocd.writeUInt32LE(0x06054b50, 0);
  eocd.writeUInt16LE(n, 8);
  eocd.writeUInt16LE(n, 10);
  eocd.writeUInt32LE(cdBuf.length, 12);
  eocd.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cdBuf, eocd]);
}

/** One deflated member that declares 1 MiB and inflates to 4 GiB (non-final deflate blocks repeated). */
function* lyingZipMember(): Generator<Uint8Array> {
  const block = deflateRawSync(Buffer.alloc(CHUNK), { finishFlush: zc.Z_SYNC_FLUSH });
  const repeats = (4 * GiB) / CHUNK;
  const compressedSize = block.length * repeats + 2;
  const name = Buffer.from("SKILL.md");
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt16LE(20, 4);
  local.writeUInt16LE(8, 8);
  local.writeUInt32LE(1024 * 1024, 22);
  local.writeUInt32LE(compressedSize, 18);
  local.writeUInt16LE(name.length, 26);
  yield local;
  yield name;
  for (let i = 0; i < repeats; i++) yield block;
  yield Buffer.from([0x03, 0x00]);
  const cd = Buffer.alloc(46);
  cd.writeUInt32LE(0x02014b50, 0);
  cd.writeUInt16LE(20, 4);
  cd.writeUInt16LE(20, 6);
  cd.writeUInt16LE(8, 10);
  cd.writeUInt32LE(compressedSize, 20);
  cd.writeUInt32LE(1024 * 1024, 24);
  cd.writeUInt16LE(name.length, 28);
  yield cd;
  yield name;
  const eocd = Buffer.alloc(22);
  eocd.writeUInt32LE(0x06054b50, 0);
  eocd.writeUInt16LE(1, 8);
  eocd.writeUInt16LE(1, 10);
  eocd.writeUInt32LE(46 + name.length, 12);
  eocd.writeUInt32LE(30 + name.length + compressedSize, 16);
  yield eocd;
}

/** Every name under the workspace root, recursively (to prove nothing was left behind). */
async function tree(root: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fs.readdir(root, { withFileTypes: true, recursive: true })) out.push(path.relative(root, path.join(e.parentPath, e.name)));
  return out.sort();
}

let counter = 0;
async function withWorkspace(fn: (ws: Workspace, workdir: string) => Promise<void>): Promise<void> {
  const id = `ws${counter++}`;
  const workdir = path.join(base, id);
  const ws = new LocalWorkspace({ workspaceId: id, workdir });
  await ws.initialize();
  try {
    await ws.listSkills();
    const before = await tree(workdir);
    await fn(ws, workdir);
    expect(await tree(workdir)).toEqual(before);
    expect(await ws.listSkills()).toEqual([]);
  } finally {
    await ws.close();
  }
}

const clearly = (code: string, pattern: RegExp) => expect.objectContaining({ code, message: expect.stringMatching(pattern) });

// Each case is guarded by its timeout: before the fix these ran for minutes or were accepted.
describe("archive bombs", () => {
  it("tar.gz whose member declares 5 GiB: refused at its header, before inflating it", async () => {
    await withWorkspace(async (ws) => {
      await expect(ws.addSkillArchive(stream(declaredHugeMember()), { format: "tar.gz" })).rejects.toEqual(clearly("too_large", /maxExtractedBytes/));
    });
  }, 30_000);

  it("tar.gz with 5 GiB of zeros after the end of the archive: inflation stops at the limit", async () => {
    await withWorkspace(async (ws) => {
      await expect(ws.addSkillArchive(stream(zerosAfterTheEnd()), { format: "tar.gz" })).rejects.toEqual(clearly("too_large", /inflates|expands/));
    });
  }, 30_000);

  it("tar.gz with 99,999 entries: refused by the entry cap", async () => {
    await withWorkspace(async (ws) => {
      await expect(ws.addSkillArchive(stream(manyTarEntries(99_998)), { format: "tar.gz" })).rejects.toEqual(clearly("too_large", /entries/));
    });
    // Up to the cap, members are written before the count is known: 10,000 file creations, slow on a busy disk.
  }, 60_000);

  it("zip with 65,534 entries: refused by the entry cap before anything is extracted", async () => {
    await withWorkspace(async (ws) => {
      await expect(ws.addSkillArchive(manyZipEntries(65_534), { format: "zip" })).rejects.toEqual(clearly("too_large", /entries/));
    });
  }, 30_000);

  it("zip member that declares 1 MiB and inflates to 4 GiB: stops at its declared size", async () => {
    await withWorkspace(async (ws) => {
      await expect(ws.addSkillArchive(stream(lyingZipMember()), { format: "zip" })).rejects.toEqual(clearly("too_large", /declared/));
    });
  }, 30_000);
});
