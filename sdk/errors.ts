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
  | "internal";

export interface WorkspaceErrorOptions {
  cause?: unknown;
  /** Field or path at fault, for `invalid_argument` / `path_escape` / `not_found`. */
  field?: string;
  details?: Record<string, unknown>;
}

export class WorkspaceError extends Error {
  readonly code: WorkspaceErrorCode;
  readonly field: string | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: WorkspaceErrorCode, message: string, options: WorkspaceErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.field = options.field;
    this.details = options.details;
  }
}

export class InvalidArgumentError extends WorkspaceError {
  constructor(field: string, message: string, options: Omit<WorkspaceErrorOptions, "field"> = {}) {
    super("invalid_argument", `${field}: ${message}`, { ...options, field });
  }
}

export class PathEscapeError extends WorkspaceError {
  constructor(path: string, reason: string, options: Omit<WorkspaceErrorOptions, "field"> = {}) {
    super("path_escape", `path '${path}' ${reason}`, { ...options, field: path });
  }
}

export class NotFoundError extends WorkspaceError {
  constructor(what: string, options: WorkspaceErrorOptions = {}) {
    super("not_found", `${what} not found`, options);
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

export function isWorkspaceError(e: unknown, code?: WorkspaceErrorCode): e is WorkspaceError {
  return e instanceof WorkspaceError && (code === undefined || e.code === code);
}

/** Turns a zod error into an InvalidArgumentError naming the first bad field (prefixed by `root`). */
export function fromZodError(
  root: string,
  error: { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }> },
): InvalidArgumentError {
  const issues = error.issues.map((i) => ({ field: joinField(root, i.path), message: i.message }));
  const first = issues[0] ?? { field: root, message: "invalid value" };
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more: ${issues.slice(1).map((i) => i.field).join(", ")})` : "";
  return new InvalidArgumentError(first.field, `${first.message}${more}`, { details: { issues } });
}

export function joinField(root: string, path: ReadonlyArray<PropertyKey>): string {
  let out = root;
  for (const p of path) out += typeof p === "number" ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out || "(root)";
}
