import { changePolicyOf } from "../sdk/contract/registry.js";
import { isObject } from "../sdk/util/records.js";
import { normalizeHostPaths, plain } from "./inputs.js";

/**
 * The fleet's data ledger, as plain data: where each workspace's files live now (`homes`, the
 * ledger's inputs) and the places earlier replaces and removals left files behind with deleteData
 * off (`leftovers`, accumulated in its outputs). No secrets: a home holds the workspace's id and
 * owner, the backend kind and only the spec fields that say where the files are (policy dataFields).
 */
export interface DataHome {
  /** `<kind>:<policy dataHome>`: two workspaces with one key share their files. */
  key: string;
  workspaceId: string;
  userId?: string;
  /** `kind` plus the policy's dataFields, host paths normalised: enough for the driver to find the files. */
  backend: Record<string, unknown>;
}

export interface LedgerInputs {
  /** The fleet's deleteData: a destroy of the ledger removes the leftovers only when it is on. */
  deleteData: boolean;
  homes: DataHome[];
}

export interface LedgerOutputs extends LedgerInputs {
  leftovers: DataHome[];
}

/** The data home of one workspace spec; undefined when its files live in the backend object (or its backend keeps no ledger). */
export function dataHomeOf(ws: { workspaceId: string; userId?: string | undefined; backend: unknown }): DataHome | undefined {
  if (!isObject(ws.backend) || typeof ws.backend.kind !== "string") return undefined;
  const kind = ws.backend.kind;
  const policy = changePolicyOf(kind);
  if (!policy.dataFields || !policy.dataHome) return undefined;
  const picked: Record<string, unknown> = { kind };
  for (const f of policy.dataFields) {
    const v = ws.backend[f];
    // A value not known as a plain string (an Output) would read as the default folder: not tracked.
    if (v !== undefined && typeof v !== "string") return undefined;
    if (v !== undefined) picked[f] = v;
  }
  const backend = normalizeHostPaths(picked);
  const home = policy.dataHome(backend as never, { workspaceId: ws.workspaceId, userId: ws.userId });
  if (home === undefined) return undefined;
  // A policy may join parts with NUL (bubblewrap): shown as "|" so state reads plainly.
  return plain({ key: `${kind}:${home.replace(/\0/g, "|")}`, workspaceId: ws.workspaceId, userId: ws.userId, backend });
}

/**
 * The leftovers after an update: the old ones, plus every old home that no new workspace has when
 * the old deleteData was off (its workspace is deleted keeping its files: removed from the fleet,
 * or replaced by one living elsewhere), minus any home a workspace of the fleet has again (moved
 * back: that workspace owns the files now). Sorted by key; state stays readable and stable.
 */
export function nextLeftovers(olds: Record<string, unknown>, newHomes: DataHome[]): DataHome[] {
  const live = new Set(newHomes.map((h) => h.key));
  const out = new Map<string, DataHome>();
  for (const h of homesIn(olds.leftovers)) out.set(h.key, h);
  if (olds.deleteData !== true) for (const h of homesIn(olds.homes)) if (!live.has(h.key)) out.set(h.key, h);
  for (const k of live) out.delete(k);
  return [...out.values()].sort((a, b) => a.key.localeCompare(b.key));
}

/** Homes read from state, tolerating anything an older version wrote (entries it cannot read are dropped). */
export function homesIn(value: unknown): DataHome[] {
  if (!Array.isArray(value)) return [];
  return value.filter(
    (h): h is DataHome =>
      isObject(h) && typeof h.key === "string" && typeof h.workspaceId === "string" && isObject(h.backend) && typeof h.backend.kind === "string",
  );
}

/** A leftover as an operator reads it: the workspace, its backend and where its files were. */
export function describeHome(h: DataHome): string {
  const where = Object.entries(h.backend)
    .filter(([k]) => k !== "kind")
    .map(([k, v]) => `${k} ${String(v)}`)
    .join(", ");
  return `workspace '${h.workspaceId}' (${String(h.backend.kind)}${where ? `, ${where}` : ""})`;
}
