import { BackendSpecSchema } from "../sdk/backends/spec.js";
import { WorkspaceSpecSchema } from "../sdk/fleet.js";
import { ProviderOptionsSchema, UNKNOWN } from "./inputs.js";
import { isObject } from "../sdk/util/records.js";

/**
 * The provider's diff as a pure function of old outputs and new (checked) inputs.
 * Identity and backend fields replace the workspace; tags, seeds, TTL and provider options
 * update it in place; provider code (`__provider`) and output-only fields never count.
 */
export type ChangeKind = "add" | "delete" | "update";

export interface FieldChange {
  /** Dotted path, e.g. `backend.baseImage` or `tags.team`. */
  path: string;
  kind: ChangeKind;
  replace: boolean;
}

export interface WorkspaceDiff {
  changes: boolean;
  /** Top-level property paths forcing a replacement, sorted (`backend.baseImage`, `workspaceId`). */
  replaces: string[];
  /** Every changed leaf, sorted by path. Values are never included: they may be secrets. */
  fields: FieldChange[];
  /** Same workspace id means the new one would adopt the old backend object: delete first. */
  deleteBeforeReplace: boolean;
}

/** Identity fields: a different value is a different workspace. */
const IDENTITY = new Set(["workspaceId", "userId", "agentId"]);
/** Fields applied in place (tags re-stamped, seeds re-applied, TTL read by the manager). */
const IN_PLACE = new Set(["tags", "skillPaths", "defaultMcps", "ttlSeconds", "deleteData", "credentials"]);
/**
 * Only inputs are compared: outputs the provider computes (location, state, ...), `__provider`,
 * and fields an older provider version wrote are not the user's to change.
 */
const INPUT_KEYS = new Set([...Object.keys(WorkspaceSpecSchema.shape), ...Object.keys(ProviderOptionsSchema.shape)]);
/** Leaves whose values are compared but never descended into (secret material). */
const OPAQUE = new Set(["credentials"]);

export function diffWorkspace(rawOlds: Record<string, unknown>, rawNews: Record<string, unknown>): WorkspaceDiff {
  const olds: Record<string, unknown> = { ...rawOlds, backend: normalizeOldBackend(rawOlds.backend) };
  // Both sides read with today's defaults: an option left out and its default spelled out are the same
  // (checked inputs already carry them; this keeps the comparison symmetric whatever the caller passes).
  const news: Record<string, unknown> = "backend" in rawNews ? { ...rawNews, backend: normalizeOldBackend(rawNews.backend) } : rawNews;
  const fields: FieldChange[] = [];
  const keys = new Set([...Object.keys(olds), ...Object.keys(news)]);
  for (const key of [...keys].sort()) {
    if (!INPUT_KEYS.has(key)) continue;
    const replace = IDENTITY.has(key) || key === "backend" || !IN_PLACE.has(key);
    if (OPAQUE.has(key)) {
      const change = compareLeaf(olds[key], news[key]);
      if (change) fields.push({ path: key, kind: change, replace });
      continue;
    }
    collect(key, olds[key], news[key], replace, fields);
  }
  // A backend kind change replaces the whole backend; report it once, not per option.
  const oldKind = kindOf(olds.backend);
  const newKind = kindOf(news.backend);
  const kindChanged = oldKind !== newKind;
  const replaceSet = new Set<string>();
  for (const f of fields) if (f.replace) replaceSet.add(kindChanged && f.path.startsWith("backend.") ? "backend.kind" : f.path);
  const replaces = [...replaceSet].sort();
  return {
    changes: fields.length > 0,
    replaces,
    fields,
    deleteBeforeReplace: replaces.length > 0 && !replaces.includes("workspaceId"),
  };
}

/**
 * Reads a stored backend spec with today's schema: fields this version no longer knows are
 * dropped and fields it added get their defaults, so upgrading the package never reads as a
 * change (let alone a replacement). A spec today's schema cannot read is compared as stored.
 */
function normalizeOldBackend(backend: unknown): unknown {
  if (!isObject(backend) || containsUnknownDeep(backend)) return backend;
  let candidate: Record<string, unknown> = backend;
  for (let attempt = 0; attempt < 2; attempt++) {
    const r = BackendSpecSchema.safeParse(candidate);
    if (r.success) return r.data;
    const unknownKeys = new Set(r.error.issues.flatMap((i) => (i.code === "unrecognized_keys" && i.path.length === 0 ? i.keys : [])));
    if (!unknownKeys.size) return backend;
    candidate = Object.fromEntries(Object.entries(candidate).filter(([k]) => !unknownKeys.has(k)));
  }
  return backend;
}

function kindOf(backend: unknown): unknown {
  return backend && typeof backend === "object" ? (backend as Record<string, unknown>).kind : undefined;
}

function collect(path: string, a: unknown, b: unknown, replace: boolean, out: FieldChange[]): void {
  if (isObject(a) && isObject(b)) {
    for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) collect(`${path}.${k}`, a[k], b[k], replace, out);
    return;
  }
  const change = compareLeaf(a, b);
  if (change) out.push({ path, kind: change, replace });
}

function compareLeaf(a: unknown, b: unknown): ChangeKind | undefined {
  const aMissing = a === undefined || a === null;
  const bMissing = b === undefined || b === null;
  if (aMissing && bMissing) return undefined;
  if (aMissing) return "add";
  if (bMissing) return "delete";
  if (b === UNKNOWN || containsUnknownDeep(b)) return "update";
  return stableJson(a) === stableJson(b) ? undefined : "update";
}

function containsUnknownDeep(v: unknown): boolean {
  if (v === UNKNOWN) return true;
  if (Array.isArray(v)) return v.some(containsUnknownDeep);
  if (isObject(v)) return Object.values(v).some(containsUnknownDeep);
  return false;
}


/** JSON with sorted keys, so key order never reads as a change. */
export function stableJson(v: unknown): string {
  return JSON.stringify(v, (_k, value: unknown) =>
    isObject(value) ? Object.fromEntries(Object.keys(value).sort().map((k) => [k, value[k]])) : value,
  );
}
