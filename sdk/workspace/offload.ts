// Size: the offloader plus the reference-parity message serialization it must match byte for byte;
// the planned split is offloader / message-copy / base64.
import { createHash, randomUUID } from "node:crypto";
import path from "node:path";
import { InvalidArgumentError, isWorkspaceError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { Sandbox } from "../sandbox.js";

/**
 * Offloading: big context and tool results go to `sessions/<session>/`, base64 payloads to
 * `data/<sha256 of the base64 text><ext>`. Shapes and key order follow the reference's JSON
 * (snake_case fields, as they are written to disk).
 */
export interface UrlSource {
  type: "url";
  url: string;
  media_type: string;
}
export interface Base64Source {
  type: "base64";
  data: string;
  media_type: string;
}
export interface TextBlock {
  type: "text";
  text: string;
  id?: string;
  created_at?: string;
  finished_at?: string | null;
}
export interface DataBlock {
  type: "data";
  id?: string;
  source: UrlSource | Base64Source;
  name?: string | null;
  created_at?: string;
  finished_at?: string | null;
}
/** Any other block (tool_use, tool_result, thinking, hint…) passes through untouched. */
export interface OtherBlock {
  type: string;
  [key: string]: unknown;
}
export type ContentBlock = TextBlock | DataBlock | OtherBlock;

export interface Message {
  name?: string;
  content: string | ContentBlock[];
  role: string;
  id?: string;
  metadata?: Record<string, unknown> | null;
  created_at?: string;
  usage?: unknown;
  finished_at?: string | null;
  finished_reason?: string | null;
  structured_output?: unknown;
  error?: unknown;
}

export interface ToolResult {
  /** The tool call id; names the file. */
  id: string;
  name?: string;
  output: string | ContentBlock[];
  state?: string;
}

const MESSAGE_KEYS = ["name", "content", "role", "id", "metadata", "created_at", "usage", "finished_at", "finished_reason", "structured_output", "error"];
const TEXT_KEYS = ["type", "text", "id", "created_at", "finished_at"];
const DATA_KEYS = ["type", "id", "source", "name", "created_at", "finished_at"];
const SOURCE_KEYS = ["type", "url", "data", "media_type"];

/**
 * Python's `mimetypes.guess_extension` for the media types agents send (CPython 3.11 table);
 * anything else is `.bin`. Parameters (`; charset=…`) are ignored.
 */
const EXTENSIONS: Record<string, string> = {
  "text/plain": ".txt",
  "text/markdown": ".md",
  "text/html": ".html",
  "text/csv": ".csv",
  "text/css": ".css",
  "image/png": ".png",
  "image/jpeg": ".jpg",
  "image/webp": ".webp",
  "image/gif": ".gif",
  "image/bmp": ".bmp",
  "image/svg+xml": ".svg",
  "application/pdf": ".pdf",
  "application/json": ".json",
  "application/zip": ".zip",
  "audio/mpeg": ".mp3",
  "video/mp4": ".mp4",
};

export function extensionFor(mediaType: string): string {
  return EXTENSIONS[mediaType.split(";")[0]!.trim().toLowerCase()] ?? ".bin";
}

const SAFE_ID = /^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$/;

/**
 * Session and tool-result ids become one path segment. An id made only of `[A-Za-z0-9_.-]`
 * (not starting with `.`, at most 128 chars) is used as is; any other id has every other
 * character replaced by `_`, a leading `.` replaced, is cut to 64 chars, and gets `-` plus the
 * first 12 hex digits of its SHA-256, so two different unsafe ids never share a folder.
 */
export function sanitizeId(id: string, field: string): string {
  if (typeof id !== "string" || id === "") throw new InvalidArgumentError("must be a non-empty string", { field });
  if (SAFE_ID.test(id)) return id;
  const cleaned = id
    .replace(/[^A-Za-z0-9_.-]/g, "_")
    .replace(/^\./, "_")
    .slice(0, 64);
  return `${cleaned}-${createHash("sha256").update(id, "utf8").digest("hex").slice(0, 12)}`;
}

export class Offloader {
  readonly #sandbox: Sandbox;
  readonly #logger: Logger;
  /** Serialises name picking per session folder in this process; `exclusive` writes cover other processes. */
  readonly #naming = new Map<string, Promise<void>>();

  constructor(sandbox: Sandbox, logger: Logger) {
    this.#sandbox = sandbox;
    this.#logger = logger;
  }

  /**
   * Appends the messages to `sessions/<session>/context.jsonl`, one compact JSON line each, in a
   * single append (concurrent calls never lose lines). Base64 data blocks are moved to `data/`
   * first, at any depth of the content (the input is not mutated).
   */
  async offloadContext(sessionId: string, messages: Message[]): Promise<string> {
    const sid = sanitizeId(sessionId, "sessionId");
    if (!Array.isArray(messages)) throw new InvalidArgumentError("must be an array of messages", { field: "messages" });
    const rel = `sessions/${sid}/context.jsonl`;
    // Copy every message first (the input is never changed), so a bad message fails the call
    // before anything is stored. A hand-written copy of plain data, about 4x quicker than
    // structuredClone here, which also refuses what JSON cannot carry.
    const copies: Array<Record<string, unknown>> = new Array(messages.length);
    // A plain loop, not every()/map(): those skip holes in a sparse array.
    for (let i = 0; i < messages.length; i++) {
      const message = messages[i];
      if (!isMessageObject(message)) throw new InvalidArgumentError("must be a message object", { field: `messages[${i}]` });
      copies[i] = plainCopy(message, `messages[${i}]`) as Record<string, unknown>;
    }
    const lines: string[] = [];
    for (const copy of copies) {
      if (Array.isArray(copy.content)) {
        // Find the inline payloads in one synchronous walk, then move them one by one, in order.
        const slots: Slot[] = [];
        collectInlineData(copy, "content", slots);
        for (const { container, key } of slots) container[key] = await this.offloadData(container[key] as DataBlock);
      }
      lines.push(JSON.stringify(orderMessage(copy)));
    }
    if (lines.length > 0) await this.#sandbox.appendFile(rel, `${lines.join("\n")}\n`);
    return this.#agentPath(rel);
  }

  /**
   * Writes the tool output as flat text to `sessions/<session>/tool_result-<id>.txt`, or
   * `tool_result-<id>(1).txt`, `(2)`… when taken. Names are claimed with create-exclusive writes.
   */
  async offloadToolResult(sessionId: string, result: ToolResult): Promise<string> {
    const sid = sanitizeId(sessionId, "sessionId");
    if (result === null || typeof result !== "object") throw new InvalidArgumentError("must be a tool result object", { field: "result" });
    const tid = sanitizeId(result.id, "result.id");
    const body = await this.#renderToolOutput(result.output);
    const dir = `sessions/${sid}`;
    const rel = await this.#serialPerFolder(dir, () => this.#claim(dir, `tool_result-${tid}`, body));
    this.#logger.debug("offloaded a tool result", { path: rel, chars: body.length });
    return this.#agentPath(rel);
  }

  /**
   * Stores a base64 data block under `data/` (once per content) and returns a new block pointing at
   * `workspace:///data/<hash><ext>`. Blocks that already carry a URL are returned unchanged.
   */
  async offloadData(block: DataBlock): Promise<DataBlock> {
    if (block === null || typeof block !== "object" || block.type !== "data" || typeof block.source !== "object" || block.source === null)
      throw new InvalidArgumentError("must be a data block ({type: 'data', source: {...}})", { field: "block" });
    const source = block.source;
    if (source.type !== "base64") return block;
    if (typeof source.data !== "string") throw new InvalidArgumentError("must be a base64 string", { field: "block.source.data" });
    if (typeof source.media_type !== "string" || source.media_type === "")
      throw new InvalidArgumentError("must be a media type, e.g. 'image/png'", { field: "block.source.media_type" });
    const compact = checkBase64(source.data);
    const file = `${createHash("sha256").update(source.data, "utf8").digest("hex")}${extensionFor(source.media_type)}`;
    const rel = `data/${file}`;
    // Same text, same file: a repeated payload costs a stat, not a decode.
    if (!(await this.#sandbox.stat(rel))) {
      try {
        await this.#sandbox.writeFile(rel, Buffer.from(compact, "base64"), { exclusive: true });
      } catch (e) {
        // A concurrent offload of the same content got there first: same bytes, nothing to do.
        if (!isWorkspaceError(e, "conflict")) throw e;
      }
    }
    return {
      type: "data",
      id: block.id ?? newId(),
      source: { type: "url", url: `workspace:///data/${file}`, media_type: source.media_type },
      name: block.name ?? null,
      created_at: pythonNow(),
      finished_at: block.finished_at ?? null,
    };
  }

  /** Deletes `sessions/<session>/`. */
  async purgeSession(sessionId: string): Promise<void> {
    if (!sessionId) return;
    await this.#sandbox.remove(`sessions/${sanitizeId(sessionId, "sessionId")}`);
  }

  // ------------------------------------------------------------------ internals

  async #claim(dir: string, stem: string, body: string): Promise<string> {
    for (let n = 0; n < 100_000; n++) {
      const rel = `${dir}/${stem}${n === 0 ? "" : `(${n})`}.txt`;
      // The first name is usually free: try it directly. After a collision, stat first so taken
      // names cost a stat rather than a whole write.
      if (n > 0 && (await this.#sandbox.stat(rel))) continue;
      try {
        // The name is claimed by this very create: a sandbox that can create in place skips the temp file.
        if (this.#sandbox.createFile) await this.#sandbox.createFile(rel, body);
        else await this.#sandbox.writeFile(rel, body, { exclusive: true });
        return rel;
      } catch (e) {
        if (!isWorkspaceError(e, "conflict")) throw e;
      }
    }
    throw new InvalidArgumentError(`too many tool results named '${stem}' in ${dir}`, { field: "result.id" });
  }

  async #serialPerFolder<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#naming.get(key) ?? Promise.resolve();
    let release!: () => void;
    const tail = previous.then(() => new Promise<void>((resolve) => (release = resolve)));
    this.#naming.set(key, tail);
    await previous;
    try {
      return await fn();
    } finally {
      release();
      if (this.#naming.get(key) === tail) this.#naming.delete(key);
    }
  }

  async #renderToolOutput(output: ToolResult["output"]): Promise<string> {
    if (typeof output === "string") return output;
    if (!Array.isArray(output)) throw new InvalidArgumentError("must be a string or an array of blocks", { field: "result.output" });
    let body = "";
    for (const block of output) {
      if (isText(block)) body += block.text;
      else if (isData(block)) {
        const stored = block.source.type === "base64" ? await this.offloadData(block) : block;
        const url = stored.source.type === "url" ? stored.source.url : "";
        body += `<data url='${url}' name='${stored.name ?? "None"}' media_type='${stored.source.media_type}'/>`;
      }
    }
    return body;
  }

  #agentPath(rel: string): string {
    return path.posix.join(this.#sandbox.workdir, rel);
  }
}

function isMessageObject(message: unknown): boolean {
  return message !== null && typeof message === "object" && !Array.isArray(message);
}

/** A place holding a base64 data block inside a copied message: `container[key]`. */
interface Slot {
  container: Record<string, unknown>;
  key: string;
}

/**
 * Base64 data blocks anywhere inside `container[key]` (e.g. in a tool_result block's output),
 * depth first in order; `metadata` is not searched and a data block is not searched inside.
 */
function collectInlineData(container: Record<string, unknown>, key: string, slots: Slot[]): void {
  const value = container[key];
  if (value === null || typeof value !== "object") return;
  if (Array.isArray(value)) {
    // Arrays are walked by index: an index is a key like any other for the assignment later.
    const arr = value as unknown as Record<string, unknown>;
    for (let i = 0; i < value.length; i++) collectInlineData(arr, String(i), slots);
    return;
  }
  if (isData(value) && value.source.type === "base64") {
    slots.push({ container, key });
    return;
  }
  for (const k of Object.keys(value)) if (k !== "metadata") collectInlineData(value as Record<string, unknown>, k, slots);
}

function isText(b: unknown): b is TextBlock {
  return typeof b === "object" && b !== null && (b as TextBlock).type === "text" && typeof (b as TextBlock).text === "string";
}

function isData(b: unknown): b is DataBlock {
  const source = (b as DataBlock | null)?.source;
  return typeof b === "object" && b !== null && (b as DataBlock).type === "data" && typeof source === "object" && source !== null;
}

/** 1 for the standard base64 alphabet (A-Z a-z 0-9 + /), by char code. */
const BASE64_ALPHABET = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") BASE64_ALPHABET[c.charCodeAt(0)] = 1;

/** JavaScript's `\s`: WhiteSpace and LineTerminator code points. */
function isSpace(c: number): boolean {
  return (
    c === 32 ||
    (c >= 9 && c <= 13) ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/**
 * Standard base64, whitespace allowed, padding optional. Anything else is an error, not silently
 * dropped. Returns the text without whitespace, ready to decode. One pass over the char codes:
 * several times faster than the equivalent regex on payload-sized text.
 */
export function checkBase64(text: string): string {
  let digits = 0;
  let padding = 0;
  let spaces = false;
  let ok = true;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 128 && BASE64_ALPHABET[c] === 1) {
      // A digit after padding: '=' may only end the text.
      if (padding > 0) {
        ok = false;
        break;
      }
      digits++;
    } else if (c === 61) {
      if (++padding > 2) {
        ok = false;
        break;
      }
    } else if (isSpace(c)) {
      spaces = true;
    } else {
      ok = false;
      break;
    }
  }
  if (!ok || digits % 4 === 1) throw new InvalidArgumentError("is not valid base64 (standard alphabet A-Z a-z 0-9 + /)", { field: "block.source.data" });
  return spaces ? text.replace(/\s+/g, "") : text;
}

/** Known keys first in the reference's order, then any others as given. Undefined keys are dropped. */
function ordered(obj: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of keys) if (obj[k] !== undefined) out[k] = obj[k];
  for (const k of Object.keys(obj)) if (!(k in out) && obj[k] !== undefined) out[k] = obj[k];
  return out;
}

/**
 * The reference writes `Msg.model_dump_json()`: every field, with pydantic's defaults for the ones
 * the caller left out (a fresh id and timestamp, `{}` metadata, nulls). Lines carry the same keys here.
 */
const MESSAGE_DEFAULTS: Record<string, () => unknown> = {
  id: newId,
  metadata: () => ({}),
  created_at: pythonNow,
  usage: () => null,
  finished_at: () => null,
  finished_reason: () => null,
  structured_output: () => null,
  error: () => null,
};
const BLOCK_DEFAULTS: Record<string, () => unknown> = { id: newId, created_at: pythonNow, finished_at: () => null };
const DATA_DEFAULTS: Record<string, () => unknown> = { ...BLOCK_DEFAULTS, name: () => null };
type Defaults = Array<[string, () => unknown]>;
const MESSAGE_DEFAULT_LIST: Defaults = Object.entries(MESSAGE_DEFAULTS);
const BLOCK_DEFAULT_LIST: Defaults = Object.entries(BLOCK_DEFAULTS);
const DATA_DEFAULT_LIST: Defaults = Object.entries(DATA_DEFAULTS);

function withDefaults(obj: Record<string, unknown>, defaults: Defaults): Record<string, unknown> {
  for (const [k, make] of defaults) if (obj[k] === undefined) obj[k] = make();
  return obj;
}

/**
 * A deep copy of JSON data as JSON.stringify would see it (toJSON applied, own enumerable keys),
 * refusing what JSON would silently drop or choke on: functions, symbols, bigints and cycles.
 */
function plainCopy(root: unknown, field: string): unknown {
  const ancestors: object[] = [];
  // Class instances are fine (copied like JSON.stringify sees them); what JSON cannot carry is not.
  const refuse = (what: string) => new InvalidArgumentError(`must be plain JSON data: ${what}`, { field });
  const copy = (v: unknown): unknown => {
    if (v === null || typeof v !== "object") {
      if (typeof v === "function" || typeof v === "symbol" || typeof v === "bigint") throw refuse(`found a ${typeof v}`);
      return v;
    }
    if (typeof (v as { toJSON?: unknown }).toJSON === "function") return copy((v as { toJSON: () => unknown }).toJSON());
    if (ancestors.includes(v)) throw refuse("it contains a cycle");
    ancestors.push(v);
    let out: unknown;
    if (Array.isArray(v)) {
      const arr = new Array<unknown>(v.length);
      for (let i = 0; i < v.length; i++) arr[i] = copy(v[i]);
      out = arr;
    } else {
      const obj: Record<string, unknown> = {};
      for (const k in v) if (Object.hasOwn(v, k)) obj[k] = copy((v as Record<string, unknown>)[k]);
      out = obj;
    }
    ancestors.pop();
    return out;
  };
  try {
    return copy(root);
  } catch (e) {
    if (e instanceof RangeError) throw refuse("it is nested too deeply");
    throw e;
  }
}

function newId(): string {
  return randomUUID().replace(/-/g, "");
}

/** `datetime.now().isoformat()`: local time, no zone, microseconds (the reference's timestamp factory). */
function pythonNow(): string {
  const d = new Date();
  const p = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}000`;
}

function orderBlock(block: unknown): unknown {
  if (isText(block)) return ordered(withDefaults(block as unknown as Record<string, unknown>, BLOCK_DEFAULT_LIST), TEXT_KEYS);
  if (isData(block)) {
    const b = ordered(withDefaults(block as unknown as Record<string, unknown>, DATA_DEFAULT_LIST), DATA_KEYS);
    b.source = ordered(block.source as unknown as Record<string, unknown>, SOURCE_KEYS);
    return b;
  }
  return block;
}

function orderMessage(message: Record<string, unknown>): Record<string, unknown> {
  const out = ordered(withDefaults(message, MESSAGE_DEFAULT_LIST), MESSAGE_KEYS);
  if (Array.isArray(out.content)) out.content = out.content.map(orderBlock);
  return out;
}
