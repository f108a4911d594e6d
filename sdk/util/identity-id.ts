import { InvalidArgumentError } from "../errors.js";

/**
 * A user, agent or session id must be a string with at least one non-blank character. An empty
 * id used to mean "no owner" and skipped the owner check, so any caller could read any workspace
 * with it; the reference's empty-user fallback (`blake2b("::a1")`) is refused for the same reason.
 */
export function checkIdentityId(value: unknown, field: "userId" | "agentId" | "sessionId"): string {
  if (typeof value !== "string") throw new InvalidArgumentError(field, "must be a string");
  if (!isNonBlank(value)) throw new InvalidArgumentError(field, "must not be empty or blank");
  return value;
}

/** Has a non-whitespace character. On the manager's hot path: a printable ASCII first character decides it without a regex. */
export function isNonBlank(value: string): boolean {
  const c = value.charCodeAt(0);
  return (c > 32 && c < 127) || NON_BLANK.test(value);
}
const NON_BLANK = /\S/;
