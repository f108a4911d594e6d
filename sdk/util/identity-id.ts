import { InvalidArgumentError } from "../errors.js";

export type IdentityField = "userId" | "agentId" | "sessionId";

/**
 * A user, agent or session id must be a string with at least one non-blank character. An empty
 * id used to mean "no owner" and skipped the owner check, so any caller could read any workspace
 * with it; the reference's empty-user fallback (`blake2b("::a1")`) is refused for the same reason.
 */
export function checkIdentityId(value: unknown, field: IdentityField): string {
  if (typeof value !== "string") throw new InvalidArgumentError("must be a string", { field });
  if (!isNonBlank(value)) throw new InvalidArgumentError("must not be empty or blank", { field });
  return value;
}

/** Has a non-whitespace character. On the manager's hot path: a printable ASCII first character decides it without a regex. */
export function isNonBlank(value: string): boolean {
  const c = value.charCodeAt(0);
  return (c > 32 && c < 127) || NON_BLANK.test(value);
}
const NON_BLANK = /\S/;

/** Bytes an edge id may have: a skill partition folder is named after the agent (sdk/workspace/skill-index.ts). */
export const MAX_EDGE_ID_BYTES = 200;
// eslint-disable-next-line no-control-regex -- C0 controls and DEL: PostgreSQL refuses NUL in text, the others end up in logs and labels.
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Has a C0 control character or DEL (NUL included). */
export function hasControlChar(value: string): boolean {
  return CONTROL.test(value);
}

/**
 * The one rule for ids a caller hands the service (a token's user, a session's agent), checked at
 * the edge so that every later part accepts what was stored: checkIdentityId's, plus at most 200
 * UTF-8 bytes, no control character, no '/' or '\' and no leading '.' (an agent id names a folder),
 * and for a user no '::' and no trailing ':' (assignWorkspaceId's separator). The SDK's own entry
 * points keep the reference's looser rule (checkIdentityId). Returns why `value` is refused, or
 * undefined when it is fine.
 */
export function edgeIdProblem(value: unknown, field: IdentityField): string | undefined {
  if (typeof value !== "string") return "must be a string";
  if (!isNonBlank(value)) return "must not be empty or blank";
  if (Buffer.byteLength(value, "utf8") > MAX_EDGE_ID_BYTES) return `must be at most ${MAX_EDGE_ID_BYTES} bytes (UTF-8)`;
  if (hasControlChar(value)) return "must not contain control characters (NUL, newline, ...)";
  if (value.startsWith(".") || /[\\/]/.test(value)) return "must not start with '.' or contain '/' or '\\'";
  if (field === "userId" && (value.includes("::") || value.endsWith(":"))) return "must not contain '::' or end with ':'";
  return undefined;
}

/** edgeIdProblem as a check: the id, or an InvalidArgumentError naming the field. */
export function checkEdgeId(value: unknown, field: IdentityField): string {
  const problem = edgeIdProblem(value, field);
  if (problem !== undefined) throw new InvalidArgumentError(problem, { field });
  return value as string;
}
