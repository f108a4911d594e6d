import { RateLimitedError, WorkspaceError, type WorkspaceErrorCode } from "./errors.js";

/**
 * The error family at the service boundaries: an HTTP status and problem+json body for the HTTP
 * service, a JSON-RPC error for the MCP endpoint. One table each, so a new code is a compile error
 * until it is mapped. Bodies carry the message and field only: never `cause` or `details`, which may
 * hold backend output.
 */
export const HTTP_STATUS: Readonly<Record<WorkspaceErrorCode, number>> = {
  invalid_argument: 400,
  path_escape: 400,
  unauthenticated: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  closed: 409,
  too_large: 413,
  rate_limited: 429,
  internal: 500,
  exec_failed: 500,
  provision_failed: 502,
  mcp_error: 502,
  unsupported: 501,
  unavailable: 503,
  timeout: 504,
};

/** JSON-RPC error codes: the standard ones where they fit, else the server range -32000..-32099. */
export const MCP_ERROR_CODE: Readonly<Record<WorkspaceErrorCode, number>> = {
  invalid_argument: -32602,
  path_escape: -32602,
  too_large: -32602,
  unsupported: -32601,
  internal: -32603,
  not_found: -32002,
  conflict: -32003,
  closed: -32004,
  unavailable: -32005,
  timeout: -32006,
  rate_limited: -32007,
  unauthenticated: -32008,
  exec_failed: -32009,
  provision_failed: -32010,
  mcp_error: -32011,
  forbidden: -32012,
};

export function toHttpStatus(e: unknown): number {
  return e instanceof WorkspaceError ? HTTP_STATUS[e.code] : 500;
}

export interface Problem {
  type: string;
  title: WorkspaceErrorCode;
  status: number;
  detail: string;
  field?: string;
  retryable: boolean;
  retryAfterMs?: number;
  /** Which quota or rate limit refused a 429 (the service's limit names), when one did. */
  limit?: string;
}

/** An application/problem+json body (RFC 9457); anything outside the family is an opaque internal error. */
export function toProblem(e: unknown): Problem {
  if (!(e instanceof WorkspaceError)) return { type: "about:blank", title: "internal", status: 500, detail: "internal error", retryable: false };
  return {
    type: `urn:agent-workspaces:error:${e.code}`,
    title: e.code,
    status: HTTP_STATUS[e.code],
    detail: e.message,
    ...(e.field !== undefined ? { field: e.field } : {}),
    retryable: e.retryable,
    ...(e instanceof RateLimitedError && e.retryAfterMs !== undefined ? { retryAfterMs: e.retryAfterMs } : {}),
    ...(e instanceof RateLimitedError && typeof e.details?.limit === "string" ? { limit: e.details.limit } : {}),
  };
}

/** The Retry-After header (whole seconds, rounded up) for a rate-limited error, else undefined. */
export function retryAfterHeader(e: unknown): string | undefined {
  return e instanceof RateLimitedError && e.retryAfterMs !== undefined ? String(Math.ceil(e.retryAfterMs / 1000)) : undefined;
}

/** A JSON-RPC error object for the MCP endpoint. */
export function toMcpError(e: unknown): { code: number; message: string; data: { code: WorkspaceErrorCode; field?: string; retryable: boolean } } {
  if (!(e instanceof WorkspaceError)) return { code: MCP_ERROR_CODE.internal, message: "internal error", data: { code: "internal", retryable: false } };
  return {
    code: MCP_ERROR_CODE[e.code],
    message: e.message,
    data: { code: e.code, ...(e.field !== undefined ? { field: e.field } : {}), retryable: e.retryable },
  };
}
