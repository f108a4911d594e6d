import { blake2b } from "@noble/hashes/blake2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";
import { z } from "zod";
import { joinField } from "../sdk/errors.js";
import { WorkspaceSpecSchema, type WorkspaceSpec } from "../sdk/contract/fleet.js";
import { changePolicyOf } from "../sdk/contract/registry.js";
import { normalizeHostPath } from "../sdk/contract/schema.js";

/**
 * The inputs of one WorkspaceResource as the provider sees them (plain JSON, after check).
 * `spec` fields sit at the top level so `pulumi preview --diff` names them directly.
 */
export const UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

/** Provider-only inputs that are not part of the shared WorkspaceSpec. */
export const ProviderOptionsSchema = z.strictObject({
  /** On delete also remove the workspace's persistent files (host folder, volume, PVC). */
  deleteData: z.boolean().optional(),
  /** Backend credentials (API keys, kubeconfig); always a Pulumi secret, never echoed. */
  credentials: z.record(z.string().min(1), z.string()).optional(),
});

export type ProviderOptions = z.infer<typeof ProviderOptionsSchema>;
export type WorkspaceInputs = WorkspaceSpec & ProviderOptions & { workspaceId: string };

export interface CheckFailure {
  property: string;
  reason: string;
}

const PROVIDER_KEYS = new Set(Object.keys(ProviderOptionsSchema.shape));
const RESERVED = "__provider";

/** PER_AGENT / PER_USER ids exactly as the reference computes them (BLAKE2b, 8-byte digest). */
export function defaultWorkspaceId(userId: string | undefined, agentId: string | undefined): string {
  const key = agentId === undefined ? `user::${userId ?? ""}` : `${userId ?? ""}::${agentId}`;
  return bytesToHex(blake2b(utf8ToBytes(key), { dkLen: 8 }));
}

/** True when a value (or anything inside it) is still unknown, as in a preview before creation. */
export function containsUnknown(value: unknown): boolean {
  if (value === UNKNOWN) return true;
  if (Array.isArray(value)) return value.some(containsUnknown);
  if (value && typeof value === "object") return Object.values(value).some(containsUnknown);
  return false;
}

/** Drops undefined fields recursively: Pulumi's Struct conversion throws on them. */
export function plain<T>(value: T): T {
  if (Array.isArray(value)) return value.map(plain) as T;
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = plain(v);
    return out as T;
  }
  return value;
}

/**
 * Validates resource inputs with the shared zod schemas. Every wrong field is reported by
 * its dotted name; values are never quoted (they may be secrets). Unknown values pass
 * through untouched so a preview can still run.
 */
export function checkInputs(news: Record<string, unknown>): { inputs: Record<string, unknown>; failures: CheckFailure[] } {
  const { [RESERVED]: provider, ...raw } = news;
  const specPart: Record<string, unknown> = {};
  const optionPart: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(raw)) {
    if (v === undefined || v === null) continue;
    (PROVIDER_KEYS.has(k) ? optionPart : specPart)[k] = v;
  }
  if (containsUnknown(raw)) return { inputs: withProvider(plain(raw), provider), failures: [] };

  const failures: CheckFailure[] = [];
  const spec = WorkspaceSpecSchema.safeParse(specPart);
  if (!spec.success) failures.push(...spec.error.issues.map((i) => toFailure(i, specPart)));
  const options = ProviderOptionsSchema.safeParse(optionPart);
  if (!options.success) failures.push(...options.error.issues.map((i) => toFailure(i, optionPart)));
  if (!spec.success || !options.success) return { inputs: withProvider(plain(raw), provider), failures };

  const s = spec.data;
  if (s.workspaceId === undefined && s.userId === undefined && s.agentId === undefined)
    return {
      inputs: withProvider(plain(raw), provider),
      failures: [{ property: "workspaceId", reason: "workspaceId: give an explicit workspaceId, or a userId and/or agentId to derive it from" }],
    };
  const workspaceId = s.workspaceId ?? defaultWorkspaceId(s.userId, s.agentId);
  // Host paths reach state in one spelling, so a trailing slash or `~` is never a change.
  const backend = normalizeHostPaths(s.backend as Record<string, unknown>);
  return { inputs: withProvider(plain({ ...s, backend, ...options.data, workspaceId }), provider), failures: [] };
}

/** The spec with its backend policy's host-path fields (strings or lists of them) normalised. */
export function normalizeHostPaths(backend: Record<string, unknown>): Record<string, unknown> {
  const out = { ...backend };
  for (const field of changePolicyOf(backend.kind).hostPaths ?? []) {
    const v = out[field];
    if (typeof v === "string") out[field] = normalizeHostPath(v);
    else if (Array.isArray(v)) out[field] = v.map((p: unknown) => (typeof p === "string" ? normalizeHostPath(p) : p));
  }
  return out;
}

function withProvider(inputs: Record<string, unknown>, provider: unknown): Record<string, unknown> {
  return provider === undefined ? inputs : { ...inputs, [RESERVED]: provider };
}

/** One failure per zod issue, named by field (under `root`); unknown keys are named individually. */
export function issueToFailure(issue: z.core.$ZodIssue, root = ""): CheckFailure {
  return toFailure({ ...issue, path: root ? [root, ...issue.path] : issue.path } as z.core.$ZodIssue, undefined);
}

function toFailure(issue: z.core.$ZodIssue, _input: unknown): CheckFailure {
  if (issue.code === "unrecognized_keys") {
    const names = issue.keys.map((k) => joinField("", [...issue.path, k]));
    return {
      property: names[0] ?? joinField("", issue.path),
      reason: `${names.join(", ")}: unknown field(s); check the spelling against the WorkspaceSpec schema`,
    };
  }
  if (issue.code === "invalid_union" && issue.path.at(-1) === "kind") {
    const field = joinField("", issue.path);
    const options = "options" in issue && Array.isArray(issue.options) ? `; expected one of ${issue.options.join(", ")}` : "";
    return { property: field, reason: `${field}: unknown backend kind${options}` };
  }
  const field = joinField("", issue.path);
  return { property: field || "(root)", reason: `${field || "(root)"}: ${issue.message}` };
}
