/**
 * One error family for the whole SDK. Callers switch on `code`; humans read `message`.
 * Messages never carry secrets: pass sensitive context in `details` only after redaction.
 */
export type WorkspaceErrorCode =
  | "invalid_argument"
  | "not_found"
  | "conflict"
  | "path_escape"
  | "unavailable"
  | "timeout"
  | "too_large"
  | "closed"
  | "exec_failed"
  | "provision_failed"
  | "mcp_error"
  | "rate_limited"
  | "unauthenticated"
  | "forbidden"
  | "unsupported"
  | "internal";

/** Codes where the same call may succeed later unchanged (the manager's "transient" errors). */
const RETRYABLE: ReadonlySet<WorkspaceErrorCode> = new Set(["unavailable", "timeout", "rate_limited"]);

export interface WorkspaceErrorOptions {
  cause?: unknown;
  /** Name of the field at fault (`path`, `query.limit`, ...), for `invalid_argument` / `path_escape` / `not_found`; never the caller's value. */
  field?: string;
  details?: Record<string, unknown>;
  /** Overrides the code's default retry classification (see WorkspaceError.retryable). */
  retryable?: boolean;
}

export class WorkspaceError extends Error {
  readonly code: WorkspaceErrorCode;
  readonly field: string | undefined;
  readonly details: Record<string, unknown> | undefined;
  /** True when retrying the same call later may succeed: by default unavailable, timeout and rate_limited. */
  readonly retryable: boolean;

  constructor(code: WorkspaceErrorCode, message: string, options: WorkspaceErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.field = options.field;
    this.details = options.details;
    this.retryable = options.retryable ?? RETRYABLE.has(code);
  }
}

export interface InvalidArgumentOptions extends WorkspaceErrorOptions {
  /** False when the message already names the field its own way: no `${field}: ` prefix. Default true. */
  fieldPrefix?: boolean;
}

/** A bad argument. With `field`, the message reads `${field}: ${message}` (unless `fieldPrefix: false`). */
export class InvalidArgumentError extends WorkspaceError {
  constructor(message: string, options: InvalidArgumentOptions = {}) {
    const { fieldPrefix = true, ...rest } = options;
    super("invalid_argument", rest.field !== undefined && fieldPrefix ? `${rest.field}: ${message}` : message, rest);
  }
}

export class PathEscapeError extends WorkspaceError {
  /** The caller's path goes in the message only: `field` names the field at fault ("path" unless given), never the caller's value. */
  constructor(message: string, options: WorkspaceErrorOptions = {}) {
    super("path_escape", message, { ...options, field: options.field ?? "path" });
  }
}

export class NotFoundError extends WorkspaceError {
  constructor(message: string, options: WorkspaceErrorOptions = {}) {
    super("not_found", message, options);
  }
}

export class ConflictError extends WorkspaceError {
  constructor(message: string, options: WorkspaceErrorOptions = {}) {
    super("conflict", message, options);
  }
}

export class UnavailableError extends WorkspaceError {
  constructor(message: string, options: WorkspaceErrorOptions = {}) {
    super("unavailable", message, options);
  }
}

export class TimeoutError extends WorkspaceError {
  constructor(message: string, options: WorkspaceErrorOptions = {}) {
    super("timeout", message, options);
  }
}

export class TooLargeError extends WorkspaceError {
  constructor(message: string, options: WorkspaceErrorOptions = {}) {
    super("too_large", message, options);
  }
}

/** An operation on a workspace (or manager) that was already closed. */
export class ClosedError extends WorkspaceError {
  constructor(message: string, options: WorkspaceErrorOptions = {}) {
    super("closed", message, options);
  }
}

/** A command or backend call failed to run (not a non-zero exit, which is a result). */
export class ExecFailedError extends WorkspaceError {
  constructor(message: string, options: WorkspaceErrorOptions = {}) {
    super("exec_failed", message, options);
  }
}

/** The backend object could not be created or prepared (image build, package install, provider step). */
export class ProvisionFailedError extends WorkspaceError {
  constructor(message: string, options: WorkspaceErrorOptions = {}) {
    super("provision_failed", message, options);
  }
}

/** An MCP server failed: it would not start, crashed, or answered with an error. */
export class McpError extends WorkspaceError {
  constructor(message: string, options: WorkspaceErrorOptions = {}) {
    super("mcp_error", message, options);
  }
}

/** The backend refused for load; `retryAfterMs` says when to try again where it said so. */
export class RateLimitedError extends WorkspaceError {
  readonly retryAfterMs: number | undefined;
  constructor(message: string, options: WorkspaceErrorOptions & { retryAfterMs?: number | undefined } = {}) {
    const { retryAfterMs, ...rest } = options;
    super("rate_limited", message, rest);
    this.retryAfterMs = retryAfterMs;
  }
}

/** Credentials are missing, wrong or expired (a 401); the message says which credential. */
export class UnauthenticatedError extends WorkspaceError {
  constructor(message: string, options: WorkspaceErrorOptions = {}) {
    super("unauthenticated", message, options);
  }
}

/** A policy refuses the call (e.g. the egress policy, for a connection to a non-public address): not retryable unchanged. */
export class ForbiddenError extends WorkspaceError {
  constructor(message: string, options: WorkspaceErrorOptions = {}) {
    super("forbidden", message, options);
  }
}

/** The backend does not have this capability (not a transient failure: do not retry). */
export class UnsupportedError extends WorkspaceError {
  constructor(message: string, options: WorkspaceErrorOptions = {}) {
    super("unsupported", message, options);
  }
}

/** A bug or an impossible state: never the caller's fault. */
export class InternalError extends WorkspaceError {
  constructor(message: string, options: WorkspaceErrorOptions = {}) {
    super("internal", message, options);
  }
}

/**
 * A Retry-After header value (seconds, or an HTTP date) as milliseconds from `now`; undefined when
 * absent or unreadable. Bounded: a date years away is capped at one hour.
 */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim().slice(0, 64);
  const cap = 3_600_000;
  if (/^\d{1,10}$/.test(text)) return Math.min(Number(text) * 1000, cap);
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.min(Math.max(0, at - now), cap);
}

/** The error class for each code: every code has one (so `new WorkspaceError(code, ...)` is never needed). */
export const ERROR_CLASS_FOR_CODE = {
  invalid_argument: InvalidArgumentError,
  not_found: NotFoundError,
  conflict: ConflictError,
  path_escape: PathEscapeError,
  unavailable: UnavailableError,
  timeout: TimeoutError,
  too_large: TooLargeError,
  closed: ClosedError,
  exec_failed: ExecFailedError,
  provision_failed: ProvisionFailedError,
  mcp_error: McpError,
  rate_limited: RateLimitedError,
  unauthenticated: UnauthenticatedError,
  forbidden: ForbiddenError,
  unsupported: UnsupportedError,
  internal: InternalError,
} as const satisfies Record<WorkspaceErrorCode, new (message: string, options?: WorkspaceErrorOptions) => WorkspaceError>;

/**
 * An error of the class for a code known only at run time (re-wrapping another error, say). The
 * message is used as given (no field prefix); a path_escape keeps its default field "path".
 */
export function errorForCode(code: WorkspaceErrorCode, message: string, options: WorkspaceErrorOptions = {}): WorkspaceError {
  if (code === "invalid_argument") return new InvalidArgumentError(message, { ...options, fieldPrefix: false });
  return new ERROR_CLASS_FOR_CODE[code](message, options);
}

export function isWorkspaceError(e: unknown, code?: WorkspaceErrorCode): e is WorkspaceError {
  return e instanceof WorkspaceError && (code === undefined || e.code === code);
}

/** Turns a zod error into an InvalidArgumentError naming the first bad field (prefixed by `root`). */
export function fromZodError(
  root: string,
  error: { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }> },
  options: { nameKeysOnly?: boolean } = {},
): InvalidArgumentError {
  const issues = error.issues.map((i) => ({ field: joinField(root, i.path, options), message: i.message }));
  const first = issues[0] ?? { field: root, message: "invalid value" };
  const more =
    issues.length > 1
      ? ` (and ${issues.length - 1} more: ${issues
          .slice(1)
          .map((i) => i.field)
          .join(", ")})`
      : "";
  return new InvalidArgumentError(`${first.message}${more}`, { field: first.field, details: { issues } });
}

export function joinField(root: string, path: ReadonlyArray<PropertyKey>, options: { nameKeysOnly?: boolean } = {}): string {
  let out = root;
  for (const p of path) {
    if (typeof p === "number") out += `[${p}]`;
    // A record's key is the caller's data: at a service edge it is named only when it looks like a name.
    else if (options.nameKeysOnly && (typeof p !== "string" || !NAME_SEGMENT.test(p))) out += "[*]";
    else out += out ? `.${String(p)}` : String(p);
  }
  return out || "(root)";
}
const NAME_SEGMENT = /^[A-Za-z_$][A-Za-z0-9_$-]{0,63}$/;
