// Size: one bounded streaming archive reader (zip and tar.gz) whose limits must be checked together.
import { createReadStream, mkdirSync, writeFileSync, promises as fs } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import path from "node:path";
import { Transform, type Readable } from "node:stream";
import { createGunzip, crc32 } from "node:zlib";
import { Inflate } from "fflate";
import * as tar from "tar-stream";
import { InvalidArgumentError, PathEscapeError, TooLargeError, WorkspaceError, InternalError } from "../errors.js";

/**
 * Skill archives are unpacked on the host, in Node, into a fresh folder: never by a program inside
 * the sandbox, in one pass over a spooled copy of the input into a private temporary folder.
 * Every member is checked before its bytes are read: traversal names, absolute names, links and
 * devices are refused, the entry count is capped, and declared sizes are totalled against the
 * limit (for zip all at once from the central directory); real bytes are counted while writing,
 * so a header that lies about sizes cannot go past the limit either, and a gzip stream is cut
 * off once it inflates past the limit (plus tar framing), whatever its members say.
 */
export type ArchiveFormat = "zip" | "tar" | "tar.gz";

export const DEFAULT_MAX_EXTRACTED_BYTES = 500 * 1024 * 1024;
/** Inode bombs (many empty files) are not caught by a byte limit; a skill is a handful of files. */
export const MAX_ARCHIVE_ENTRIES = 10_000;
/** Tar headers, padding and long-name records the tar stream may hold beyond its content bytes. */
export const TAR_FRAMING_BYTES = 64 * 1024 * 1024;
/** Tar stream bytes no member explains (beyond 2 KiB of long-name records per member) before it is cut off. */
export const TAR_UNACCOUNTED_BYTES = 8 * 1024 * 1024;
/** Members up to this size are written in one synchronous call. */
const SMALL_MEMBER_BYTES = 64 * 1024;
/** A zip central directory larger than this is refused before it is read (10,000 entries need ~1 MiB). */
const MAX_ZIP_DIRECTORY_BYTES = 16 * 1024 * 1024;

interface PlannedEntry {
  /** Safe relative POSIX path, or null for entries that only name the root. */
  rel: string | null;
  kind: "file" | "dir";
  size: number;
  executable: boolean;
}

/** The raw input may be somewhat larger than its content (headers, padding, stored entries). */
export function inputLimitFor(maxExtractedBytes: number): number {
  return maxExtractedBytes * 2 + 1024 * 1024;
}

/** Writes the incoming bytes to `file`, refusing more than `limit` bytes. */
export async function spoolInput(data: Uint8Array | AsyncIterable<Uint8Array>, file: string, limit: number): Promise<void> {
  const fh = await fs.open(file, "wx", 0o600);
  try {
    let total = 0;
    const chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array> = data instanceof Uint8Array ? [data] : data;
    for await (const chunk of chunks) {
      if (!(chunk instanceof Uint8Array)) throw new InvalidArgumentError("archive chunks must be Uint8Array", { field: "data" });
      total += chunk.byteLength;
      if (total > limit)
        throw new TooLargeError(`the archive is larger than ${limit} bytes (twice maxExtractedBytes plus 1 MiB); raise maxExtractedBytes if this is intended`);
      await fh.write(chunk);
    }
  } finally {
    await fh.close();
  }
}

/**
 * Unpacks the spooled archive `file` into the existing empty folder `dest`. A refused archive
 * leaves `dest` empty: members written before the fault was found are removed again.
 */
export async function extractArchive(file: string, format: ArchiveFormat, dest: string, maxExtractedBytes: number): Promise<void> {
  if (format !== "zip" && format !== "tar" && format !== "tar.gz")
    throw new InvalidArgumentError(`'${String(format)}' is not an archive format; use "zip", "tar" or "tar.gz"`, { field: "format" });
  try {
    if (format === "zip") await extractZip(file, dest, maxExtractedBytes);
    else await extractTar(file, dest, maxExtractedBytes);
  } catch (e) {
    const written = await fs.readdir(dest).catch(() => []);
    await Promise.all(written.map((name) => fs.rm(path.join(dest, name), { recursive: true, force: true })));
    throw e;
  }
}

/** A member name made safe, or an error naming it. Returns null for names that are only the root ("./"). */
export function safeMemberPath(name: string): string | null {
  const unsafe = (why: string) => new PathEscapeError(`path '${name}' is an unsafe archive member: ${why}`, { field: "archive" });
  if (name.includes("\0")) throw unsafe("contains a NUL byte");
  if (name.includes("\\")) throw unsafe("contains a backslash");
  if (name.startsWith("/") || /^[A-Za-z]:/.test(name)) throw unsafe("is an absolute path");
  const segments = name.split("/");
  if (segments.includes("..")) throw unsafe("contains '..'");
  const kept = segments.filter((s) => s !== "" && s !== ".");
  return kept.length === 0 ? null : kept.join("/");
}

function tooManyEntries(count: number | string): TooLargeError {
  return new TooLargeError(`the archive has ${count} entries, over the limit of ${MAX_ARCHIVE_ENTRIES} (MAX_ARCHIVE_ENTRIES)`);
}

function checkTotals(entries: PlannedEntry[], limit: number): void {
  if (entries.length > MAX_ARCHIVE_ENTRIES) throw tooManyEntries(entries.length);
  const total = entries.reduce((n, e) => n + e.size, 0);
  if (total > limit) throw tooLarge(total, limit);
}

function tooLarge(total: number, limit: number): TooLargeError {
  return new TooLargeError(`the archive expands to ${total} bytes, over the limit of ${limit} bytes (maxExtractedBytes)`);
}

/** Tracks real bytes written across the whole archive. */
class Budget {
  used = 0;
  constructor(readonly limit: number) {}
  take(n: number): void {
    this.used += n;
    if (this.used > this.limit) throw tooLarge(this.used, this.limit);
  }
}

/** Creates the member's parent folders once per folder (`made` remembers them), returns its path. */
function prepareParent(dest: string, rel: string, made: Set<string>): string {
  const target = path.join(dest, ...rel.split("/"));
  const parent = path.dirname(target);
  if (!made.has(parent)) {
    // Synchronous like the small writes it precedes: a few µs on a local disk.
    mkdirSync(parent, { recursive: true });
    made.add(parent);
  }
  return target;
}

function fsFailure(e: unknown, rel: string): unknown {
  if (e instanceof WorkspaceError) return e;
  const code = (e as NodeJS.ErrnoException)?.code;
  if (code === "ENOTDIR" || code === "EISDIR" || code === "EEXIST")
    return new InvalidArgumentError(`member '${rel}' clashes with another member of the same path`, { field: "archive", cause: e });
  return e;
}

// ---------------------------------------------------------------- zip

interface ZipEntry extends PlannedEntry {
  name: string;
  method: number;
  compressedSize: number;
  crc: number;
  localOffset: number;
}

const EOCD_SIG = 0x06054b50;
const CDIR_SIG = 0x02014b50;
const LOCAL_SIG = 0x04034b50;

async function readAt(fh: FileHandle, position: number, length: number): Promise<Buffer> {
  const buf = Buffer.alloc(length);
  const { bytesRead } = await fh.read(buf, 0, length, position);
  if (bytesRead !== length) throw badZip("it is truncated");
  return buf;
}

function badZip(why: string): InvalidArgumentError {
  return new InvalidArgumentError(`not a readable zip archive: ${why}`, { field: "archive" });
}

function decodeName(raw: Buffer, utf8Flag: boolean): string {
  if (utf8Flag) return raw.toString("utf8");
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(raw);
  } catch {
    return raw.toString("latin1");
  }
}

async function readZipDirectory(fh: FileHandle, size: number): Promise<ZipEntry[]> {
  if (size < 22) throw badZip("it is too short");
  const tailLen = Math.min(size, 22 + 0xffff);
  const tail = await readAt(fh, size - tailLen, tailLen);
  let eocd = -1;
  for (let i = tail.length - 22; i >= 0; i--)
    if (tail.readUInt32LE(i) === EOCD_SIG) {
      eocd = i;
      break;
    }
  if (eocd < 0) throw badZip("no end-of-central-directory record");
  const count = tail.readUInt16LE(eocd + 10);
  const cdSize = tail.readUInt32LE(eocd + 12);
  const cdOffset = tail.readUInt32LE(eocd + 16);
  if (count === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) throw badZip("zip64 archives are not supported");
  if (count > MAX_ARCHIVE_ENTRIES) throw tooManyEntries(count);
  if (cdOffset + cdSize > size) throw badZip("its central directory lies outside the file");
  if (cdSize > MAX_ZIP_DIRECTORY_BYTES)
    throw new TooLargeError(`the archive's central directory is ${cdSize} bytes, over the limit of ${MAX_ZIP_DIRECTORY_BYTES}`);
  const cd = await readAt(fh, cdOffset, cdSize);

  const entries: ZipEntry[] = [];
  let p = 0;
  for (let i = 0; i < count; i++) {
    if (p + 46 > cd.length || cd.readUInt32LE(p) !== CDIR_SIG) throw badZip("a central directory entry is malformed");
    const madeBy = cd.readUInt16LE(p + 4);
    const flags = cd.readUInt16LE(p + 8);
    const method = cd.readUInt16LE(p + 10);
    const crc = cd.readUInt32LE(p + 16);
    const compressedSize = cd.readUInt32LE(p + 20);
    const size = cd.readUInt32LE(p + 24);
    const nameLen = cd.readUInt16LE(p + 28);
    const extraLen = cd.readUInt16LE(p + 30);
    const commentLen = cd.readUInt16LE(p + 32);
    const external = cd.readUInt32LE(p + 38);
    const localOffset = cd.readUInt32LE(p + 42);
    if (p + 46 + nameLen > cd.length) throw badZip("a central directory entry is malformed");
    const name = decodeName(cd.subarray(p + 46, p + 46 + nameLen), (flags & 0x800) !== 0);
    p += 46 + nameLen + extraLen + commentLen;

    const unixMode = madeBy >> 8 === 3 ? external >>> 16 : 0;
    const fileType = unixMode & 0o170000;
    if (fileType === 0o120000) throw new InvalidArgumentError(`member '${name}' is a symlink; archives with links are refused`, { field: "archive" });
    if (fileType !== 0 && fileType !== 0o100000 && fileType !== 0o040000)
      throw new InvalidArgumentError(`member '${name}' is a special file; only files and folders are allowed`, { field: "archive" });
    if (flags & 0x1) throw new InvalidArgumentError(`member '${name}' is encrypted`, { field: "archive" });
    if (compressedSize === 0xffffffff || size === 0xffffffff || localOffset === 0xffffffff) throw badZip("zip64 archives are not supported");
    const isDir = name.endsWith("/") || fileType === 0o040000 || (external & 0x10) !== 0;
    if (!isDir && method !== 0 && method !== 8)
      throw new InvalidArgumentError(`member '${name}' uses compression method ${method}; only stored and deflate are supported`, { field: "archive" });
    entries.push({
      name,
      rel: safeMemberPath(name),
      kind: isDir ? "dir" : "file",
      size: isDir ? 0 : size,
      executable: (unixMode & 0o111) !== 0,
      method,
      compressedSize,
      crc,
      localOffset,
    });
  }
  return entries;
}

async function extractZip(file: string, dest: string, limit: number): Promise<void> {
  const fh = await fs.open(file, "r");
  try {
    const { size } = await fh.stat();
    const entries = await readZipDirectory(fh, size);
    checkTotals(entries, limit);
    const budget = new Budget(limit);
    const made = new Set<string>();
    for (const entry of entries) {
      const rel = entry.rel;
      if (rel === null) continue;
      try {
        if (entry.kind === "dir") await fs.mkdir(path.join(dest, ...rel.split("/")), { recursive: true });
        else await writeZipEntry(fh, size, { ...entry, rel }, prepareParent(dest, rel, made), budget);
      } catch (e) {
        throw fsFailure(e, rel);
      }
    }
  } finally {
    await fh.close();
  }
}

async function writeZipEntry(fh: FileHandle, archiveSize: number, entry: ZipEntry & { rel: string }, target: string, budget: Budget): Promise<void> {
  const header = await readAt(fh, entry.localOffset, 30);
  if (header.readUInt32LE(0) !== LOCAL_SIG) throw badZip(`the local header of '${entry.name}' is missing`);
  let position = entry.localOffset + 30 + header.readUInt16LE(26) + header.readUInt16LE(28);
  const end = position + entry.compressedSize;
  if (end > archiveSize) throw badZip(`the data of '${entry.name}' lies outside the file`);

  const out = await fs.open(target, "w", entry.executable ? 0o755 : 0o644);
  try {
    let written = 0;
    let crc = 0;
    const pending: Uint8Array[] = [];
    const inflate = entry.method === 8 ? new Inflate((chunk) => void pending.push(chunk)) : undefined;
    const flush = async (): Promise<void> => {
      for (const chunk of pending.splice(0)) {
        written += chunk.byteLength;
        // The declared size was checked against the limit; more real bytes than declared is a lie.
        if (written > entry.size) throw new TooLargeError(`member '${entry.name}' expands beyond its declared ${entry.size} bytes`);
        budget.take(chunk.byteLength);
        crc = crc32(chunk, crc);
        await out.write(chunk);
      }
    };
    while (position < end) {
      const length = Math.min(16 * 1024, end - position);
      const chunk = await readAt(fh, position, length);
      position += length;
      if (inflate) inflate.push(chunk, position === end);
      else pending.push(chunk);
      await flush();
    }
    if (written !== entry.size) throw badZip(`member '${entry.name}' holds ${written} bytes, not the declared ${entry.size}`);
    if (crc !== entry.crc) throw badZip(`member '${entry.name}' fails its CRC check`);
  } catch (e) {
    if (e instanceof Error && !(e instanceof WorkspaceError) && /invalid|unexpected/i.test(e.message))
      throw badZip(`member '${entry.name}' is corrupt (${e.message})`);
    throw e;
  } finally {
    await out.close();
  }
}

// ---------------------------------------------------------------- tar

async function isGzip(file: string): Promise<boolean> {
  const fh = await fs.open(file, "r");
  try {
    const buf = Buffer.alloc(2);
    const { bytesRead } = await fh.read(buf, 0, 2, 0);
    return bytesRead === 2 && buf[0] === 0x1f && buf[1] === 0x8b;
  } finally {
    await fh.close();
  }
}

/**
 * Bytes of the (inflated) tar stream, against what its members account for. A gzip stream can
 * carry gigabytes that belong to no member (zero blocks after the end of the archive, which tar
 * readers skip), so counting member bytes alone would inflate all of it: the stream is cut off
 * once it runs past the limit plus framing, or past what its members explain by more than
 * TAR_UNACCOUNTED_BYTES (long-name and pax records, the end marker, read-ahead).
 */
class TarStreamMeter extends Transform {
  seen = 0;
  accounted = 0;
  members = 0;
  constructor(readonly limit: number) {
    super();
  }
  /** A member header was read: its header block and padded body are explained bytes. */
  member(size: number): void {
    this.members++;
    this.accounted += 512 + Math.ceil(size / 512) * 512;
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: (e?: Error | null, data?: Buffer) => void): void {
    this.seen += chunk.byteLength;
    if (this.seen > this.limit + TAR_FRAMING_BYTES)
      return callback(
        new TooLargeError(
          `the archive inflates to more than ${this.limit + TAR_FRAMING_BYTES} bytes of tar stream (maxExtractedBytes plus ${TAR_FRAMING_BYTES} bytes of headers); refused`,
        ),
      );
    if (this.seen - this.accounted > TAR_UNACCOUNTED_BYTES + this.members * 2048)
      return callback(
        new TooLargeError(
          `the archive inflates to more than ${this.seen} bytes, of which ${this.seen - this.accounted} belong to no member (data after the end of the archive?); refused`,
        ),
      );
    callback(null, chunk);
  }
}

/** Runs `onEntry` for each tar member in order; the callback must consume the body. */
async function walkTar(
  file: string,
  gzip: boolean,
  limit: number,
  onEntry: (header: tar.Header, body: AsyncIterable<Uint8Array>) => Promise<void>,
): Promise<void> {
  const extract = tar.extract();
  const raw = createReadStream(file);
  const inflated = gzip ? raw.pipe(createGunzip()) : raw;
  const meter = new TarStreamMeter(limit);
  const source = inflated.pipe(meter);
  const fail = (e: unknown) => extract.destroy(e instanceof Error ? e : new InternalError(String(e)));
  const streams = new Set<Readable>([raw, inflated, source]);
  for (const s of streams) s.on("error", fail);
  source.pipe(extract as unknown as NodeJS.WritableStream);
  try {
    for await (const entry of extract) {
      meter.member(entry.header.size ?? 0);
      await onEntry(entry.header, entry as AsyncIterable<Uint8Array>);
    }
  } catch (e) {
    if (e instanceof WorkspaceError) throw e;
    throw new InvalidArgumentError(`not a readable tar archive: ${e instanceof Error ? e.message : String(e)}`, { field: "archive", cause: e });
  } finally {
    source.unpipe();
    for (const s of streams) s.destroy();
  }
}

async function drain(body: AsyncIterable<Uint8Array>): Promise<void> {
  for await (const _chunk of body);
}

function planTarEntry(header: tar.Header): PlannedEntry | undefined {
  const type: string = header.type ?? "file";
  if (type === "pax-global-header" || type === "pax-header" || type === "gnu-long-path" || type === "gnu-long-link-path") return undefined;
  if (type === "symlink" || type === "link")
    throw new InvalidArgumentError(`member '${header.name}' is a ${type === "link" ? "hard link" : "symlink"}; archives with links are refused`, {
      field: "archive",
    });
  if (type !== "file" && type !== "contiguous-file" && type !== "directory")
    throw new InvalidArgumentError(`member '${header.name}' is a ${type}; only files and folders are allowed`, { field: "archive" });
  const kind = type === "directory" ? "dir" : "file";
  return { rel: safeMemberPath(header.name), kind, size: kind === "file" ? (header.size ?? 0) : 0, executable: ((header.mode ?? 0) & 0o111) !== 0 };
}

/**
 * One pass: each header is checked (name, type, entry count, declared total against the limit)
 * before its body is read, and the body is written while its real bytes are counted. `dest` is a
 * private temporary folder that the caller removes on failure, so a refusal halfway leaves nothing.
 */
async function extractTar(file: string, dest: string, limit: number): Promise<void> {
  const gzip = await isGzip(file);
  let entries = 0;
  let declared = 0;
  const budget = new Budget(limit);
  const made = new Set<string>();
  await walkTar(file, gzip, limit, async (header, body) => {
    const entry = planTarEntry(header);
    if (!entry) return drain(body);
    if (++entries > MAX_ARCHIVE_ENTRIES) throw tooManyEntries(`more than ${MAX_ARCHIVE_ENTRIES}`);
    declared += entry.size;
    if (declared > limit) throw tooLarge(declared, limit);
    const rel = entry.rel;
    if (rel === null || entry.kind === "dir") {
      if (rel !== null) await fs.mkdir(path.join(dest, ...rel.split("/")), { recursive: true }).catch((e: unknown) => Promise.reject(fsFailure(e, rel)));
      return drain(body);
    }
    try {
      const target = prepareParent(dest, rel, made);
      const mode = entry.executable ? 0o755 : 0o644;
      if (entry.size <= SMALL_MEMBER_BYTES) {
        // Most skill files are small: one synchronous write each (µs) instead of three thread-pool round trips.
        const chunks: Uint8Array[] = [];
        for await (const chunk of body) {
          budget.take(chunk.byteLength);
          chunks.push(chunk);
        }
        writeFileSync(target, Buffer.concat(chunks), { mode, flag: "w" });
        return;
      }
      const out = await fs.open(target, "w", mode);
      try {
        for await (const chunk of body) {
          budget.take(chunk.byteLength);
          await out.write(chunk);
        }
      } finally {
        await out.close();
      }
    } catch (e) {
      throw fsFailure(e, rel);
    }
  });
}
