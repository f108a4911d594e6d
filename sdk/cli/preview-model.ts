import { consequenceOf, diffWorkspace, type ChangeEffect, type DataOutcome } from "../../providers/diff.js";

/**
 * A preview reduced to what a reviewer needs: one row per workspace with its owner, what happens
 * to its backend object and its files, and each changed field with its old and new value (secret
 * values masked). Built from `pulumi preview --json` or from Automation API engine events.
 */
export type WorkspaceOp = "create" | "update" | "recreate" | "replace" | "rename" | "delete";

export interface FieldRow {
  path: string;
  replace: boolean;
  effect?: ChangeEffect;
  from?: string;
  to?: string;
}

export interface WorkspaceChange {
  op: WorkspaceOp;
  /** Workspace id, or the resource name when the id is not known yet. */
  workspaceId: string;
  kind: string;
  userId?: string;
  agentId?: string;
  /** A rename: the id it had (its old workspace is deleted, a new one created). */
  previousId?: string;
  /** What happens to the workspace's files (updates, re-creations, replaces, renames and deletes). */
  data?: DataOutcome;
  /** Changed field paths, sorted; replacements flagged. Secret-bearing values masked. */
  fields: FieldRow[];
}

export interface PreviewModel {
  changes: WorkspaceChange[];
  unchanged: number;
  /** "resources" when `unchanged` counts every unchanged resource (`preview --json` lists no same steps). */
  unchangedUnit?: "workspaces" | "resources";
  /** Non-workspace resources that change (components, other resources), by operation. */
  other: Record<string, number>;
  /** Those resources by name and type, to say what they are. */
  otherResources?: { op: string; type: string; name: string }[];
  errors: string[];
}

export const WORKSPACE_TYPE_TOKEN = "pulumi-nodejs:dynamic/agentws:Workspace";
const SECRET_SIG = "4dabf18193072939515e22adb298388d";

/** One step as both `pulumi preview --json` and engine events describe it. */
export interface StepLike {
  op: string;
  urn: string;
  type?: string;
  oldInputs?: Record<string, unknown> | undefined;
  newInputs?: Record<string, unknown> | undefined;
  oldOutputs?: Record<string, unknown> | undefined;
  replaceKeys?: string[] | undefined;
  /** Top-level keys the engine saw change (secret values included, which we cannot compare). */
  diffKeys?: string[] | undefined;
}

const REPLACE_OPS = new Set(["replace", "create-replacement", "delete-replaced", "discard-replaced"]);
const SKIP_OPS = new Set(["same", "read", "refresh", "read-replacement", "import", "import-replacement"]);

export function buildModel(steps: StepLike[], diagnostics: { severity?: string; message?: string }[] = [], unchangedResources?: number): PreviewModel {
  const byUrn = new Map<string, StepLike[]>();
  for (const s of steps) byUrn.set(s.urn, [...(byUrn.get(s.urn) ?? []), s]);
  const model: PreviewModel = { changes: [], unchanged: 0, other: {}, otherResources: [], errors: [] };
  for (const [urn, group] of byUrn) {
    const ops = new Set(group.map((s) => s.op));
    const op: WorkspaceOp | "same" | undefined = [...ops].some((o) => REPLACE_OPS.has(o))
      ? "replace"
      : ops.has("create")
        ? "create"
        : ops.has("delete")
          ? "delete"
          : ops.has("update")
            ? "update"
            : [...ops].every((o) => SKIP_OPS.has(o))
              ? "same"
              : undefined;
    const type = group[0]?.type ?? typeFromUrn(urn);
    if (type !== WORKSPACE_TYPE_TOKEN) {
      if (op && op !== "same" && type !== "pulumi:pulumi:Stack") {
        model.other[op] = (model.other[op] ?? 0) + 1;
        model.otherResources!.push({ op, type, name: nameFromUrn(urn) });
      }
      continue;
    }
    if (!op || op === "same") {
      model.unchanged++;
      continue;
    }
    const oldOutputs = group.find((s) => s.oldOutputs)?.oldOutputs;
    const oldInputs = group.find((s) => s.oldInputs)?.oldInputs ?? oldOutputs;
    const merged = {
      // The state the last refresh saw (a stopped container) is an output, not an input.
      oldInputs: oldInputs && oldOutputs?.state !== undefined ? { ...oldInputs, state: oldOutputs.state } : oldInputs,
      newInputs: group.find((s) => s.newInputs)?.newInputs,
      replaceKeys: group.flatMap((s) => s.replaceKeys ?? []),
      diffKeys: group.flatMap((s) => s.diffKeys ?? []),
    };
    const subject = merged.newInputs ?? merged.oldInputs;
    const change: WorkspaceChange = {
      op,
      workspaceId: str(merged.newInputs?.workspaceId) ?? str(merged.oldInputs?.workspaceId) ?? nameFromUrn(urn),
      kind: kindOf(merged.newInputs) ?? kindOf(merged.oldInputs) ?? "?",
      ...owners(subject),
      fields: [],
    };
    if (op === "update" || op === "replace") {
      const olds = redactSecrets(merged.oldInputs ?? {}) as Record<string, unknown>;
      const news = redactSecrets(merged.newInputs ?? {}) as Record<string, unknown>;
      const d = diffWorkspace(olds, news, { forceReplace: op === "replace" && merged.replaceKeys.some((k) => k.startsWith("(")) });
      change.fields = fieldsOf(d.fields, olds, news, merged.replaceKeys, merged.diffKeys);
      // The engine's verdict decides the operation; the diff says what it does to the object and the files.
      change.op = op === "replace" ? "replace" : d.effect === "recreate" ? "recreate" : "update";
      change.data = op === "replace" && d.effect !== "replace" ? consequenceOf("replace", olds, news).data : d.data;
    }
    if (op === "delete") change.data = deletedData(merged.oldInputs ?? {});
    model.changes.push(change);
  }
  pairRenames(model);
  // `pulumi preview --json` omits unchanged resources' steps; count them from its summary instead.
  if (unchangedResources !== undefined && model.unchanged === 0 && unchangedResources > 0) {
    model.unchanged = unchangedResources;
    model.unchangedUnit = "resources";
  }
  for (const d of diagnostics) if (d.severity === "error" && d.message) model.errors.push(d.message.trim());
  model.changes.sort((a, b) => ORDER.indexOf(a.op) - ORDER.indexOf(b.op) || a.workspaceId.localeCompare(b.workspaceId));
  return model;
}

export const ORDER: WorkspaceOp[] = ["create", "update", "recreate", "replace", "rename", "delete"];

/** What deleting a workspace does to its files: gone with deleteData, or when they live in the object itself. */
function deletedData(olds: Record<string, unknown>): DataOutcome {
  return olds.deleteData === true || consequenceOf("recreate", olds, olds).data === "deleted" ? "deleted" : "kept";
}

/**
 * A create and a delete of workspaces with the same owner (user and agent) and backend kind is one
 * workspace renamed (its id changed): one row, old id → new id, with what happens to the old files.
 */
function pairRenames(model: PreviewModel): void {
  const creates = model.changes.filter((c) => c.op === "create");
  const deletes = model.changes.filter((c) => c.op === "delete");
  for (const created of creates) {
    const i = deletes.findIndex((d) => d.kind === created.kind && d.userId === created.userId && d.agentId === created.agentId && d.userId !== undefined);
    if (i < 0) continue;
    const [gone] = deletes.splice(i, 1);
    model.changes = model.changes.filter((c) => c !== gone);
    created.op = "rename";
    created.previousId = gone!.workspaceId;
    created.data = gone!.data === "deleted" ? "deleted" : "left-behind";
    created.fields = [
      { path: "workspaceId", replace: true, effect: "replace", from: JSON.stringify(gone!.workspaceId), to: JSON.stringify(created.workspaceId) },
    ];
  }
}

function owners(inputs: Record<string, unknown> | undefined): { userId?: string; agentId?: string } {
  const userId = str(inputs?.userId);
  const agentId = str(inputs?.agentId);
  return { ...(userId ? { userId } : {}), ...(agentId ? { agentId } : {}) };
}

function fieldsOf(
  diffFields: ReturnType<typeof diffWorkspace>["fields"],
  olds: Record<string, unknown>,
  news: Record<string, unknown>,
  replaceKeys: string[],
  diffKeys: string[],
): FieldRow[] {
  const replaces = new Set(replaceKeys);
  const fields: FieldRow[] = diffFields.map((f) => ({
    path: f.path,
    replace: f.replace || [...replaces].some((r) => f.path === r || f.path.startsWith(`${r}.`)),
    effect: f.effect,
    ...(f.from !== undefined ? { from: f.from } : {}),
    ...(f.to !== undefined ? { to: f.to } : {}),
  }));
  // The engine may name a replacement our diff cannot see (e.g. replaceOnChanges); keep it visible.
  for (const r of replaces)
    if (!fields.some((f) => f.path === r || f.path.startsWith(`${r}.`) || r.startsWith("backend."))) fields.push({ path: r, replace: true });
  // Secret values reach us masked, so only the engine can tell they changed.
  for (const k of diffKeys)
    if (k !== "__provider" && !fields.some((f) => f.path === k || f.path.startsWith(`${k}.`)))
      fields.push({ path: k, replace: replaces.has(k), from: '"[secret]"', to: '"[secret]"' });
  // Nothing visible changed, yet the provider reported a change: it can only be a masked secret.
  if (!fields.length) for (const path of maskedPaths(olds, news)) fields.push({ path, replace: false, from: '"[secret]"', to: '"[secret]"' });
  return fields.sort((a, b) => a.path.localeCompare(b.path));
}

/** Top-level fields holding a secret on either side. */
function maskedPaths(olds: Record<string, unknown>, news: Record<string, unknown>): string[] {
  const masked = (v: unknown) => JSON.stringify(redactSecrets(v) ?? null).includes('"[secret]"');
  return [...new Set([...Object.keys(olds), ...Object.keys(news)])].filter((k) => k !== "__provider" && (masked(olds[k]) || masked(news[k]))).sort();
}

/** Secret values (wire form or the engine's "[secret]" mask) compare as equal opaque tokens. */
export function redactSecrets(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(redactSecrets);
  if (v && typeof v === "object") {
    if (SECRET_SIG in v) return "[secret]";
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, redactSecrets(x)]));
  }
  return v;
}

function kindOf(inputs: Record<string, unknown> | undefined): string | undefined {
  const b = inputs?.backend;
  return b && typeof b === "object" ? str((b as Record<string, unknown>).kind) : undefined;
}

function str(v: unknown): string | undefined {
  return typeof v === "string" && v !== "[secret]" ? v : undefined;
}

function typeFromUrn(urn: string): string {
  const parts = urn.split("::");
  const t = parts[2] ?? "";
  return t.split("$").at(-1) ?? t;
}

function nameFromUrn(urn: string): string {
  return urn.split("::").at(-1) ?? urn;
}

/** Steps from a `pulumi preview --json` document. */
export function stepsFromPreviewJson(doc: unknown): {
  steps: StepLike[];
  diagnostics: { severity?: string; message?: string }[];
  /** Unchanged resources per changeSummary, minus the stack itself. */
  unchangedResources?: number;
} {
  const d = (doc ?? {}) as { steps?: unknown[]; diagnostics?: { severity?: string; message?: string }[]; changeSummary?: Record<string, number> };
  const steps = (d.steps ?? []).map((raw) => {
    const s = raw as {
      op: string;
      urn: string;
      oldState?: { type?: string; inputs?: Record<string, unknown>; outputs?: Record<string, unknown> };
      newState?: { type?: string; inputs?: Record<string, unknown> };
      replaceReasons?: string[];
      diffReasons?: string[];
    };
    return {
      op: s.op,
      urn: s.urn,
      type: s.newState?.type ?? s.oldState?.type ?? typeFromUrn(s.urn),
      oldInputs: s.oldState?.inputs,
      oldOutputs: s.oldState?.outputs,
      newInputs: s.newState?.inputs,
      replaceKeys: s.replaceReasons,
      diffKeys: s.diffReasons,
    };
  });
  const same = d.changeSummary?.same;
  return { steps, diagnostics: d.diagnostics ?? [], ...(same !== undefined ? { unchangedResources: Math.max(0, same - 1) } : {}) };
}
