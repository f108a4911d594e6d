import type * as E2B from "e2b";
import { InvalidArgumentError, NotFoundError, RateLimitedError, UnauthenticatedError, UnavailableError, WorkspaceError, InternalError } from "../../errors.js";
import { requirePeer, type PeerImporter } from "../../util/peer.js";
import type { E2BBackendSpec } from "./schema.js";

export type E2BModule = typeof E2B;

/** `e2b`, an optional peer dependency, loaded on first use (a missing install names `npm install e2b`). */
export const loadE2B = (importer?: PeerImporter): E2BModule => requirePeer<E2BModule>("e2b", "the e2b backend", importer);

/** What every SDK call gets: the credential and where E2B is. Never logged, never put in a description. */
export interface E2BConnection {
  apiKey: string;
  domain?: string;
  apiUrl?: string;
  sandboxUrl?: string;
  /** The SDK's own 429 retries (honouring Retry-After) before we report rate_limited. */
  retries: number;
}

export function connectionOf(spec: E2BBackendSpec): E2BConnection {
  const apiKey = spec.apiKey ?? process.env.E2B_API_KEY;
  if (!apiKey)
    throw new InvalidArgumentError("no E2B API key: set backend.apiKey (a secret) or the E2B_API_KEY environment variable", { field: "backend.apiKey" });
  return {
    apiKey,
    retries: 3,
    ...(spec.domain ? { domain: spec.domain } : {}),
    ...(spec.apiUrl ? { apiUrl: spec.apiUrl } : {}),
    ...(spec.sandboxUrl ? { sandboxUrl: spec.sandboxUrl } : {}),
  };
}

/** Where retry hints are missing (e2b 2.51 keeps Retry-After to its own retries): what we suggest. */
export const DEFAULT_RETRY_AFTER_MS = 5_000;

/**
 * An e2b SDK error as a WorkspaceError: 429 is rate_limited (quota messages say what to do), 401
 * unauthenticated, a gone sandbox or file not_found, and what says "not running now" (the edge's 502,
 * 503 busy, deadline on a dead sandbox, a 5xx) unavailable, which callers may retry or resume on.
 * Messages are the SDK's, which never carry the API key; the key is scrubbed anyway.
 */
export function e2bError(e: unknown, what: string, secret?: string): unknown {
  if (e instanceof WorkspaceError) return e;
  const err = e as { name?: string; message?: string; statusCode?: number; retryAfter?: number };
  const name = err?.name ?? "";
  let message = String(err?.message ?? e);
  if (secret && secret.length >= 4) message = message.split(secret).join("***");
  const text = `${what}: ${message.slice(0, 600)}`;
  if (name === "RateLimitError" || err?.statusCode === 429) {
    const quota = /concurrent|quota|limit of|maximum number/i.test(message);
    const hint = quota
      ? "the team's concurrent-sandbox quota is reached: pause or kill idle sandboxes (close idle workspaces), or raise the quota in the E2B dashboard"
      : "E2B is rate-limiting this team (after the SDK's own retries); retry later";
    const retryAfterMs = typeof err.retryAfter === "number" && err.retryAfter >= 0 ? err.retryAfter * 1000 : DEFAULT_RETRY_AFTER_MS;
    return new RateLimitedError(`${text} (${hint})`, { cause: e, retryAfterMs });
  }
  if (name === "AuthenticationError" || err?.statusCode === 401) return new UnauthenticatedError(`${text} (check backend.apiKey / E2B_API_KEY)`, { cause: e });
  if (name === "SandboxNotFoundError" || name === "FileNotFoundError" || name === "NotFoundError" || err?.statusCode === 404) {
    const gone = name === "SandboxNotFoundError" || /not running anymore/i.test(message);
    return new NotFoundError(
      `${gone ? `${text} (the e2b sandbox is gone: killed or expired; initialize the workspace again to recreate it)` : text} not found`,
      { cause: e },
    );
  }
  if (name === "InvalidArgumentError" || err?.statusCode === 400) return new InvalidArgumentError(text, { cause: e });
  if (
    name === "TimeoutError" ||
    name === "ServiceBusyError" ||
    (err?.statusCode ?? 0) >= 500 ||
    /fetch failed|ECONNREFUSED|ECONNRESET|socket hang up/i.test(message)
  )
    return new UnavailableError(text, { cause: e });
  return new InternalError(text, { cause: e });
}
