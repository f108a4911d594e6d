import { ConflictError, ExecFailedError, InvalidArgumentError, RateLimitedError, TimeoutError, UnauthenticatedError } from "../../errors.js";
import { UnavailableError, WorkspaceError, parseRetryAfter, type WorkspaceErrorCode, NotFoundError } from "../../errors.js";

/**
 * The one table from the Docker engine's answers to the error family: HTTP status → code. Errors
 * about the workspace's own container (paused, stopped, gone) get their recovery hint first; the
 * rest fall to the table. The driver and the sandbox both map through it.
 */
export const DOCKER_STATUS_CODES: Readonly<Record<number, WorkspaceErrorCode>> = {
  400: "invalid_argument",
  401: "unauthenticated",
  403: "unauthenticated",
  404: "not_found",
  409: "conflict",
  429: "rate_limited",
  500: "exec_failed",
  502: "unavailable",
  503: "unavailable",
  504: "timeout",
};

/** Socket errors meaning the engine cannot be reached at all. */
const UNREACHABLE = new Set(["ENOENT", "ECONNREFUSED", "EACCES", "ECONNRESET", "EPIPE"]);

export function dockerMessage(e: unknown): string {
  const json = (e as { json?: { message?: unknown } } | undefined)?.json;
  const text = typeof json?.message === "string" ? json.message : e instanceof Error ? e.message : String(e);
  return text.slice(0, 2000);
}

/** A dockerode error (or a socket error) as a WorkspaceError whose message starts with `what`. */
export function dockerError(e: unknown, what: string, context: "container" | "engine" = "container"): unknown {
  if (e instanceof WorkspaceError) return e;
  const status = (e as { statusCode?: unknown } | undefined)?.statusCode;
  const msg = dockerMessage(e);
  const errno = (e as NodeJS.ErrnoException | undefined)?.code;
  if (typeof errno === "string" && UNREACHABLE.has(errno))
    return new UnavailableError(`${what}: cannot reach the Docker engine (${errno}); start it (scripts/dockerd.sh start) and set DOCKER_HOST or socketPath`, {
      cause: e,
    });
  if (typeof status !== "number") return new ExecFailedError(`${what}: ${msg}`, { cause: e });
  if (context === "container") {
    if (status === 409 && /paused/i.test(msg))
      return new UnavailableError(`${what}: the workspace container is paused; initialize the workspace to resume it`, { cause: e });
    if (status === 409 && /not running/i.test(msg))
      return new UnavailableError(`${what}: the workspace container is stopped; initialize the workspace to start it`, { cause: e });
    if (status === 404) return new UnavailableError(`${what}: the workspace container is gone; initialize the workspace to recreate it`, { cause: e });
  }
  const options = { cause: e, details: { statusCode: status } };
  switch (DOCKER_STATUS_CODES[status] ?? (status >= 500 ? "unavailable" : "exec_failed")) {
    case "invalid_argument":
      return new InvalidArgumentError(msg, { ...options, field: what });
    case "unauthenticated":
      return new UnauthenticatedError(`${what}: the engine or registry refused the credentials (${status}): ${msg}`, options);
    case "not_found":
      return new NotFoundError(`${what}: ${msg}`, options);
    case "conflict":
      return new ConflictError(`${what}: ${msg}`, options);
    case "rate_limited": {
      const header = (e as { headers?: Record<string, string | undefined> } | undefined)?.headers?.["retry-after"];
      return new RateLimitedError(`${what}: rate limited by the engine or registry: ${msg}`, { ...options, retryAfterMs: parseRetryAfter(header) });
    }
    case "unavailable":
      return new UnavailableError(`${what}: ${msg}`, options);
    case "timeout":
      return new TimeoutError(`${what}: ${msg}`, options);
    default:
      return new ExecFailedError(`${what}: ${msg}`, options);
  }
}
