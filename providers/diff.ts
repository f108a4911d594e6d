import { changePolicyOf } from "../sdk/contract/registry.js";
import type { ChangeEffect, ChangePolicy, PolicyWorkspace } from "../sdk/contract/schema.js";
import { BackendSpecSchema } from "../sdk/contract/registry.js";
import { SECRET_MASK, WorkspaceSpecSchema, maskSecretFields } from "../sdk/contract/fleet.js";
import { ProviderOptionsSchema, UNKNOWN, normalizeHostPaths } from "./inputs.js";
import { isObject } from "../sdk/util/records.js";

/**
 * The provider's diff as a pure function of old outputs and new (checked) inputs, classified by
 * what the backend's driver can really do (its ChangePolicy, declared beside its schema): a change
 * applies in place, re-creates the backend object under its name, or replaces the workspace.
 * Identity fields replace; seeds, TTL and provider options update in place; provider code
 * (`__provider`) and output-only fields never count. It also says what a change costs the files.
 */
export type ChangeKind = "add" | "delete" | "update";
export type { ChangeEffect } from "../sdk/contract/schema.js";

export interface FieldChange {
  /** Dotted path, e.g. `backend.baseImage` or `tags.team`. */
  path: string;
  kind: ChangeKind;
  /** True when this change replaces the workspace (effect "replace"). */
  replace: boolean;
  effect: ChangeEffect;
  /** Old and new values for display (JSON, cut short); secret-bearing values read "[secret]". */
  from?: string;
  to?: string;
}

/** What a change does to the workspace's files: kept in place, deleted, or left behind in the old folder. */
export type DataOutcome = "kept" | "deleted" | "left-behind";

export interface WorkspaceDiff {
  changes: boolean;
  /** Top-level property paths forcing a replacement, sorted (`backend.baseImage`, `workspaceId`). */
  replaces: string[];
  /** Every changed leaf, sorted by path. */
  fields: FieldChange[];
  /** The replacement shares the old object's name or files: delete the old one first. */
  deleteBeforeReplace: boolean;
  /** The strongest effect of the changes ("none" without changes). */
  effect: ChangeEffect | "none";
  data: DataOutcome;
}

export interface DiffOptions {
  /** Replace the workspace even when nothing changed (`agentws up --replace <id>`). */
  forceReplace?: boolean;
}

/** The pseudo-field a requested replacement is reported under. */
export const FORCED_REPLACE = "(--replace)";

/** Identity fields: a different value is a different workspace. */
const IDENTITY = new Set(["workspaceId", "userId", "agentId"]);
/** Fields applied in place (seeds re-applied, TTL read by the manager, provider options). */
const IN_PLACE = new Set(["skillPaths", "defaultMcps", "ttlSeconds", "deleteData", "credentials"]);
/**
 * Only inputs are compared: outputs the provider computes (location, state, ...), `__provider`,
 * and fields an older provider version wrote are not the user's to change.
 */
const INPUT_KEYS = new Set([...Object.keys(WorkspaceSpecSchema.shape), ...Object.keys(ProviderOptionsSchema.shape)]);
/** Leaves whose values are compared but never descended into or shown (secret material). */
const OPAQUE = new Set(["credentials"]);
const RANK: Record<ChangeEffect | "none", number> = { none: 0, update: 1, recreate: 2, replace: 3 };
const MAX_VALUE_CHARS = 80;

export function diffWorkspace(rawOlds: Record<string, unknown>, rawNews: Record<string, unknown>, options: DiffOptions = {}): WorkspaceDiff {
  const olds: Record<string, unknown> = { ...rawOlds, backend: normalizeBackend(rawOlds.backend) };
  // Both sides read with today's defaults and path spellings: an option left out and its default
  // spelled out, or `~/ws/` and `/home/me/ws`, are the same.
  const news: Record<string, unknown> = "backend" in rawNews ? { ...rawNews, backend: normalizeBackend(rawNews.backend) } : rawNews;
  const oldKind = kindOf(olds.backend);
  const newKind = kindOf(news.backend);
  const kindChanged = oldKind !== newKind;
  const policy = changePolicyOf(newKind ?? oldKind);
  const shownOld = maskSecretFields(olds);
  const shownNew = maskSecretFields(news);
  const fields: FieldChange[] = [];
  const keys = new Set([...Object.keys(olds), ...Object.keys(news)]);
  for (const key of [...keys].sort()) {
    if (!INPUT_KEYS.has(key)) continue;
    if (OPAQUE.has(key)) {
      const change = compareLeaf(olds[key], news[key]);
      if (change)
        fields.push(
          withValues({ path: key, kind: change, replace: false, effect: "update" }, change, JSON.stringify(SECRET_MASK), JSON.stringify(SECRET_MASK)),
        );
      continue;
    }
    // A kind change replaces the whole backend: reported once, as backend.kind, not per old option.
    if (key === "backend" && kindChanged) {
      fields.push(withValues({ path: "backend.kind", kind: "update", replace: true, effect: "replace" }, "update", show(oldKind), show(newKind)));
      continue;
    }
    collect(key, olds[key], news[key], shownOld[key], shownNew[key], (path) => effectOf(path, policy), fields);
  }
  // A container found stopped by refresh is started again by the next up.
  if (olds.state === "stopped" && fields.every((f) => f.path !== "state"))
    fields.push({ path: "state", kind: "update", replace: false, effect: "update", from: '"stopped"', to: '"running"' });
  if (options.forceReplace) fields.push({ path: FORCED_REPLACE, kind: "update", replace: true, effect: "replace" });
  fields.sort((a, b) => a.path.localeCompare(b.path));
  const effect = fields.reduce<ChangeEffect | "none">((e, f) => (RANK[f.effect] > RANK[e] ? f.effect : e), "none");
  const replaces = [...new Set(fields.filter((f) => f.replace).map((f) => f.path))].sort();
  const consequence = consequenceOf(effect, olds, news);
  return { changes: fields.length > 0, replaces, fields, deleteBeforeReplace: effect === "replace" && consequence.deleteFirst, effect, data: consequence.data };
}

/** What an operation of this effect does to the files, and whether the old object must go first. */
export function consequenceOf(
  effect: ChangeEffect | "none",
  olds: Record<string, unknown>,
  news: Record<string, unknown>,
): { data: DataOutcome; deleteFirst: boolean } {
  if (effect === "none" || effect === "update") return { data: "kept", deleteFirst: false };
  const oldHomes = homesOf(olds);
  const newHomes = homesOf(news);
  // Files that live in the backend object go with it.
  if (oldHomes.data === undefined) return { data: "deleted", deleteFirst: oldHomes.object === newHomes.object };
  if (effect === "recreate") return { data: "kept", deleteFirst: true };
  const sameData = oldHomes.data === newHomes.data;
  const deleteFirst = oldHomes.object === newHomes.object || sameData;
  // The old object is deleted with the deleteData it was created with.
  if (olds.deleteData === true) return { data: "deleted", deleteFirst };
  return { data: sameData ? "kept" : "left-behind", deleteFirst };
}

function homesOf(props: Record<string, unknown>): { data: string | undefined; object: string } {
  const backend = isObject(props.backend) ? props.backend : {};
  const kind = String(backend.kind);
  const policy = changePolicyOf(kind);
  const ws: PolicyWorkspace = { workspaceId: String(props.workspaceId), userId: typeof props.userId === "string" ? props.userId : undefined };
  return { data: policy.dataHome?.(backend, ws), object: `${kind}:${policy.objectHome?.(backend, ws) ?? ws.workspaceId}` };
}

function effectOf(path: string, policy: ChangePolicy): ChangeEffect {
  const [top, field] = path.split(".");
  if (IDENTITY.has(top!)) return "replace";
  if (top === "backend") return field === undefined ? "replace" : (policy.fields[field] ?? "replace");
  if (top === "tags") return policy.tags ?? "update";
  return IN_PLACE.has(top!) ? "update" : "replace";
}

/**
 * Reads a backend spec with today's schema and its policy's path spelling: fields this version no
 * longer knows are dropped and fields it added get their defaults, so upgrading the package never
 * reads as a change (let alone a replacement). A spec today's schema cannot read is compared as given.
 */
function normalizeBackend(backend: unknown): unknown {
  if (!isObject(backend) || containsUnknownDeep(backend)) return backend;
  let candidate: Record<string, unknown> = backend;
  for (let attempt = 0; attempt < 2; attempt++) {
    const r = BackendSpecSchema.safeParse(candidate);
    if (r.success) return normalizeHostPaths(r.data as Record<string, unknown>);
    const unknownKeys = new Set(r.error.issues.flatMap((i) => (i.code === "unrecognized_keys" && i.path.length === 0 ? i.keys : [])));
    if (!unknownKeys.size) return backend;
    candidate = Object.fromEntries(Object.entries(candidate).filter(([k]) => !unknownKeys.has(k)));
  }
  return backend;
}

function kindOf(backend: unknown): string | undefined {
  return isObject(backend) && typeof backend.kind === "string" ? backend.kind : undefined;
}

function collect(path: string, a: unknown, b: unknown, shownA: unknown, shownB: unknown, effect: (path: string) => ChangeEffect, out: FieldChange[]): void {
  if (isObject(a) && isObject(b)) {
    const sa = isObject(shownA) ? shownA : {};
    const sb = isObject(shownB) ? shownB : {};
    for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) collect(`${path}.${k}`, a[k], b[k], sa[k], sb[k], effect, out);
    return;
  }
  const change = compareLeaf(a, b);
  if (!change) return;
  const e = effect(path);
  out.push(withValues({ path, kind: change, replace: e === "replace", effect: e }, change, show(shownA), show(shownB)));
}

function withValues(f: FieldChange, kind: ChangeKind, from: string | undefined, to: string | undefined): FieldChange {
  return { ...f, ...(kind !== "add" && from !== undefined ? { from } : {}), ...(kind !== "delete" && to !== undefined ? { to } : {}) };
}

/** A value as a reviewer reads it: JSON, cut short; unknown preview values read "(known after apply)". */
function show(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (containsUnknownDeep(v)) return "(known after apply)";
  const text = JSON.stringify(v) ?? String(v);
  return text.length > MAX_VALUE_CHARS ? `${text.slice(0, MAX_VALUE_CHARS - 1)}…` : text;
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
    isObject(value)
      ? Object.fromEntries(
          Object.keys(value)
            .sort()
            .map((k) => [k, value[k]]),
        )
      : value,
  );
}
