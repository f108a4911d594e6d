import { ConflictError, ExecFailedError, InvalidArgumentError, NotFoundError, RateLimitedError, TimeoutError } from "../../errors.js";
import { UnauthenticatedError, UnavailableError, WorkspaceError, parseRetryAfter } from "../../errors.js";

/** Socket errors meaning the API cannot be reached at all. */
const UNREACHABLE = new Set(["ECONNREFUSED", "ECONNRESET", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ETIMEDOUT", "EPIPE"]);

/** What of an SDK error may travel in a WorkspaceError: never the request (its headers hold the API key). */
export interface DaytonaFailure {
  statusCode?: number | undefined;
  message: string;
  retryAfterMs?: number | undefined;
}

export function daytonaFailure(e: unknown): DaytonaFailure {
  const err = e as { statusCode?: unknown; message?: unknown; headers?: unknown; code?: unknown; cause?: { code?: unknown } } | undefined;
  const statusCode = typeof err?.statusCode === "number" ? err.statusCode : undefined;
  const raw = typeof err?.message === "string" ? err.message : String(e);
  const headers = err?.headers as { get?: (k: string) => unknown; [k: string]: unknown } | undefined;
  const after = typeof headers?.get === "function" ? headers.get("retry-after") : headers?.["retry-after"];
  const code = typeof err?.code === "string" ? err.code : typeof err?.cause?.code === "string" ? err.cause.code : undefined;
  return {
    statusCode,
    message: `${raw.replace(/Bearer\s+\S+/gi, "Bearer [redacted]").slice(0, 1000)}${code && !raw.includes(code) ? ` (${code})` : ""}`,
    retryAfterMs: parseRetryAfter(typeof after === "string" ? after : undefined),
  };
}

/** True when the SDK's error is Daytona's "no such sandbox / file". */
export function isNotFound(e: unknown): boolean {
  return daytonaFailure(e).statusCode === 404 || (e as { name?: string } | undefined)?.name === "DaytonaNotFoundError";
}

/** Quota answers (403 / 429 naming a limit): what to do about them. */
const QUOTA = /quota|limit exceeded|maximum allowed|concurren/i;

/**
 * An SDK error as a WorkspaceError whose message starts with `what`. The SDK retries connection
 * failures itself (twice, idempotent calls); what reaches here is final. The raw error is not kept
 * as `cause`: its request config carries the Authorization header.
 */
export function daytonaError(e: unknown, what: string): WorkspaceError {
  if (e instanceof WorkspaceError) return e;
  const f = daytonaFailure(e);
  const details = { statusCode: f.statusCode, message: f.message };
  const code = (e as { code?: unknown; cause?: { code?: unknown } } | undefined)?.code ?? (e as { cause?: { code?: unknown } } | undefined)?.cause?.code;
  if (f.statusCode === undefined) {
    if ((e as { name?: string } | undefined)?.name === "DaytonaTimeoutError") return new TimeoutError(`${what}: ${f.message}`, { details });
    if (typeof code === "string" && UNREACHABLE.has(code))
      return new UnavailableError(`${what}: cannot reach the Daytona API (${code}); check apiUrl and the network`, { details });
    return new ExecFailedError(`${what}: ${f.message}`, { details });
  }
  const s = f.statusCode;
  if (QUOTA.test(f.message) && (s === 403 || s === 429))
    return new RateLimitedError(
      `${what}: Daytona refused for quota (${s}): ${f.message}. Stop, archive or delete idle sandboxes (agentws gc lists unowned ones), lower autoStopInterval, or raise the organization's limits`,
      { details: { ...details, quota: true }, retryAfterMs: f.retryAfterMs, retryable: false },
    );
  if (s === 429)
    return new RateLimitedError(
      `${what}: rate limited by Daytona (429)${f.retryAfterMs !== undefined ? `; retry after ${Math.ceil(f.retryAfterMs / 1000)} s` : ""}`,
      { details, retryAfterMs: f.retryAfterMs },
    );
  if (s === 401 || s === 403)
    return new UnauthenticatedError(`${what}: Daytona refused the API key (${s}); check apiKey / DAYTONA_API_KEY and its organization`, { details });
  if (s === 404) return new NotFoundError(`${what} not found`, { details });
  if (s === 409) return new ConflictError(`${what}: ${f.message}`, { details });
  if (s === 400 || s === 422) return new InvalidArgumentError(`${what}: ${f.message}`, { field: "backend", details });
  if (s === 408 || s === 504) return new TimeoutError(`${what}: ${f.message}`, { details });
  if (s >= 500) return new UnavailableError(`${what}: Daytona answered ${s}: ${f.message}`, { details });
  return new ExecFailedError(`${what}: ${f.message}`, { details });
}
