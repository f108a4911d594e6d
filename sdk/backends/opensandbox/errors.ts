import { NotFoundError, RateLimitedError, UnauthenticatedError, UnavailableError, WorkspaceError, parseRetryAfter } from "../../errors.js";
import { ProvisionFailedError } from "../../errors.js";
import { isObject } from "../../util/records.js";

/** What the SDK's SandboxApiException carries (duck-typed: a second copy of the SDK must not break instanceof). */
interface ApiFailure {
  statusCode?: number;
  error?: { code?: string; message?: string };
  rawBody?: unknown;
  message?: string;
}

/** The server's error code of an SDK failure ("" when it has none). */
export function apiCode(e: unknown): string {
  return String((e as ApiFailure)?.error?.code ?? "");
}

export function apiStatus(e: unknown): number | undefined {
  const s = (e as ApiFailure)?.statusCode;
  return typeof s === "number" && s > 0 ? s : undefined;
}

/** True for a "the sandbox is not there" answer (404, or the server's SANDBOX_NOT_FOUND codes). */
export function isSandboxGone(e: unknown): boolean {
  return apiStatus(e) === 404 || /SANDBOX_NOT_FOUND/.test(apiCode(e));
}

/** Seconds the server asked us to wait, when its body says so (the SDK keeps the body, not the headers). */
function retryAfterMs(e: unknown): number | undefined {
  const body = (e as ApiFailure)?.rawBody;
  if (!isObject(body)) return undefined;
  const v = body.retry_after ?? body.retryAfter ?? body.retry_after_seconds;
  return typeof v === "number" || typeof v === "string" ? parseRetryAfter(String(v)) : undefined;
}

/**
 * An SDK or network failure as a WorkspaceError naming what we were doing. Messages carry the
 * server's code and message (never a request's headers, so never the API key).
 */
export function openSandboxError(e: unknown, what: string): WorkspaceError {
  if (e instanceof WorkspaceError) return e;
  const status = apiStatus(e);
  const code = apiCode(e);
  const detail = String((e as ApiFailure)?.error?.message ?? (e as Error)?.message ?? e).slice(0, 400);
  const message = `OpenSandbox: could not ${what}: ${code ? `${code}: ` : ""}${detail}`;
  if (status === 429 || /QUOTA|RATE_LIMIT|TOO_MANY/i.test(code)) return new RateLimitedError(message, { cause: e, retryAfterMs: retryAfterMs(e) });
  if (status === 401 || status === 403 || /API_KEY/.test(code))
    return new UnauthenticatedError(`${message} (check apiKey / OPEN_SANDBOX_API_KEY)`, { cause: e });
  if (isSandboxGone(e)) return new NotFoundError(`${message} not found`, { cause: e });
  if (status === undefined || status >= 500 || status === 409) return new UnavailableError(message, { cause: e });
  return new ProvisionFailedError(message, { cause: e });
}
