/**
 * Compares two workspace trees (ours vs the reference) file by file, and two lists of step
 * results. Every difference gets a key ("<kind>:<target>") that deliberate-differences.ts can
 * accept with a reason; the rest are failures.
 *
 * Normalisations applied before comparing (each is a necessary difference, not a tolerated one):
 * - `.index`: `skills_dir_mtime` is the folder's mtime float at write time; two trees written
 *   moments apart cannot share it, so only its presence and type are compared.
 * - `context.jsonl` and call results: values each side makes up (uuid4-hex ids, "now" timestamps,
 *   e.g. the fresh `created_at` of a data block moved to data/) are compared by shape only.
 */
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { FIXED_TIME } from "./fixtures.js";
import type { StepResult } from "./scenario.js";

export type DiffKind = "only-ours" | "only-reference" | "content" | "result";
export interface Difference {
  key: string;
  kind: DiffKind;
  target: string;
  detail: string;
}

interface Entry {
  type: "file" | "dir";
  abs: string;
}

async function walk(root: string, rel = "", out = new Map<string, Entry>()): Promise<Map<string, Entry>> {
  const dir = path.join(root, rel);
  for (const d of await readdir(dir, { withFileTypes: true })) {
    const r = rel ? `${rel}/${d.name}` : d.name;
    if (d.isDirectory()) {
      out.set(r, { type: "dir", abs: path.join(root, r) });
      await walk(root, r, out);
    } else out.set(r, { type: "file", abs: path.join(root, r) });
  }
  return out;
}

/** First place two JSON values differ, as "path: a != b" (key order counts, as on disk). */
export function firstJsonDiff(a: unknown, b: unknown, at = "$"): string | undefined {
  if (a === b) return undefined;
  const show = (v: unknown) => {
    const s = JSON.stringify(v) ?? String(v);
    return s.length > 120 ? `${s.slice(0, 117)}...` : s;
  };
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") return `${at}: ours ${show(a)} | reference ${show(b)}`;
  if (Array.isArray(a) !== Array.isArray(b)) return `${at}: ours ${show(a)} | reference ${show(b)}`;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (i >= a.length) return `${at}[${i}]: missing in ours, reference ${show(b[i])}`;
      if (i >= b.length) return `${at}[${i}]: ours ${show(a[i])}, missing in reference`;
      const d = firstJsonDiff(a[i], b[i], `${at}[${i}]`);
      if (d) return d;
    }
    return undefined;
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const ak = Object.keys(ao);
  const bk = Object.keys(bo);
  for (const k of bk) if (!(k in ao)) return `${at}.${k}: missing in ours, reference ${show(bo[k])}`;
  for (const k of ak) if (!(k in bo)) return `${at}.${k}: ours ${show(ao[k])}, missing in reference`;
  for (const k of bk) {
    const d = firstJsonDiff(ao[k], bo[k], `${at}.${k}`);
    if (d) return d;
  }
  if (ak.join("\0") !== bk.join("\0")) return `${at}: key order ours [${ak.join(",")}] | reference [${bk.join(",")}]`;
  return undefined;
}

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

function normaliseIndex(v: unknown): unknown {
  if (v && typeof v === "object" && !Array.isArray(v)) {
    const o = { ...(v as Record<string, unknown>) };
    if (typeof o.skills_dir_mtime === "number") o.skills_dir_mtime = "<mtime>";
    return o;
  }
  return v;
}

const TIME_RE = /^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?$/;
const RANDOM_ID_RE = /^[0-9a-f]{32}$/;

/**
 * Replaces values each side makes up itself: uuid4-hex ids (the scenario never uses that shape)
 * and "now" timestamps (the scenario only uses FIXED_TIME, which must survive unchanged).
 */
export function normaliseGenerated(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normaliseGenerated);
  if (!v || typeof v !== "object") return v;
  const o: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (k === "id" && typeof x === "string" && RANDOM_ID_RE.test(x)) o[k] = "<random id>";
    else if ((k === "created_at" || k === "finished_at") && typeof x === "string" && x !== FIXED_TIME && TIME_RE.test(x)) o[k] = "<fresh timestamp>";
    else o[k] = normaliseGenerated(x);
  }
  return o;
}

function parseJsonLines(b: Buffer): unknown[] | string {
  const text = b.toString("utf8");
  if (text.length && !text.endsWith("\n")) return "does not end with a newline";
  const out: unknown[] = [];
  for (const [i, line] of text.split("\n").slice(0, -1).entries()) {
    try {
      out.push(JSON.parse(line));
    } catch {
      return `line ${i + 1} is not JSON`;
    }
  }
  return out;
}

async function compareFile(rel: string, ours: Buffer, ref: Buffer): Promise<string | undefined> {
  const base = path.posix.basename(rel);
  if (base === ".index" || base === ".mcp") {
    let a: unknown, b: unknown;
    try {
      a = JSON.parse(ours.toString("utf8"));
    } catch {
      return "ours is not JSON";
    }
    b = JSON.parse(ref.toString("utf8"));
    if (base === ".index") [a, b] = [normaliseIndex(a), normaliseIndex(b)];
    const d = firstJsonDiff(a, b);
    if (d) return d;
    // Same data: the bytes should match too (2-space indent, non-ASCII kept), bar the mtime float.
    if (base === ".mcp" && !ours.equals(ref)) return "same JSON, different bytes (formatting)";
    return undefined;
  }
  if (base === "context.jsonl") {
    const a = parseJsonLines(ours);
    const b = parseJsonLines(ref);
    if (typeof a === "string") return `ours ${a}`;
    if (typeof b === "string") return `reference ${b}`;
    if (a.length !== b.length) return `ours has ${a.length} lines, reference ${b.length}`;
    // Every distinct way the lines differ (not just the first), so one fix does not hide another.
    const seen = new Set<string>();
    a.forEach((line, i) => {
      const d = firstJsonDiff(normaliseGenerated(line), normaliseGenerated(b[i]), `line ${i + 1}`);
      if (d) seen.add(d.replace(/^line \d+/, "line N"));
    });
    return seen.size ? [...seen].slice(0, 6).join("; ") : undefined;
  }
  if (ours.equals(ref)) return undefined;
  return `bytes differ: ours ${ours.length} B sha256 ${sha(ours).slice(0, 12)} | reference ${ref.length} B sha256 ${sha(ref).slice(0, 12)}`;
}

export async function compareTrees(oursRoot: string, refRoot: string): Promise<{ differences: Difference[]; files: number }> {
  const [a, b] = await Promise.all([walk(oursRoot), walk(refRoot)]);
  const differences: Difference[] = [];
  const push = (kind: DiffKind, target: string, detail: string) => differences.push({ key: `${kind}:${target}`, kind, target, detail });
  for (const [rel, e] of a) if (!b.has(rel)) push("only-ours", rel, `${e.type} only in ours`);
  for (const [rel, e] of b) if (!a.has(rel)) push("only-reference", rel, `${e.type} only in the reference`);
  let files = 0;
  for (const [rel, ea] of a) {
    const eb = b.get(rel);
    if (!eb) continue;
    if (ea.type !== eb.type) {
      push("content", rel, `ours is a ${ea.type}, reference a ${eb.type}`);
      continue;
    }
    if (ea.type === "dir") continue;
    files++;
    const d = await compareFile(rel, await readFile(ea.abs), await readFile(eb.abs));
    if (d) push("content", rel, d);
  }
  return { differences, files };
}

/** Step results: values compared as JSON; failures compared as "it failed" (wording is ours). */
export function compareResults(steps: { call: string }[], ours: StepResult[], ref: StepResult[]): Difference[] {
  const out: Difference[] = [];
  steps.forEach((s, i) => {
    const a = ours[i];
    const b = ref[i];
    const target = `#${i} ${s.call}`;
    const push = (detail: string) => out.push({ key: `result:${target}`, kind: "result", target, detail });
    if (!a || !b) return push("missing result");
    if (a.ok !== b.ok)
      return push(
        a.ok
          ? `ours succeeded (${JSON.stringify(a.value)?.slice(0, 200)}), reference failed: ${(b as { error: string }).error}`
          : `ours failed: ${(a as { error: string }).error}; reference returned ${JSON.stringify((b as { value: unknown }).value)?.slice(0, 200)}`,
      );
    if (a.ok && b.ok) {
      const d = firstJsonDiff(normaliseGenerated(a.value), normaliseGenerated(b.value));
      if (d) push(d);
    }
  });
  return out;
}
