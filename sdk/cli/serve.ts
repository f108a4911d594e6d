import { resolve } from "node:path";
import { InvalidArgumentError } from "../errors.js";
import { consoleLogger } from "../logger.js";
import { EgressPolicySchema, type EgressPolicy } from "../util/egress.js";
import { edgeIdProblem } from "../util/identity-id.js";
import { readStackOutputs } from "../manager/fleet-source.js";
import { newToken, openSessionStore, parseScopes, serveFleet, type ConnectionLimits, type ServiceLimits } from "../service/index.js";
import { TOKEN_NAME } from "../service/auth.js";
import { tokenView } from "../service/routes/tokens.js";

const DEFAULT_STORE = "~/.agent-workspaces/service/sessions.db";

/**
 * `agentws serve`: the HTTP service over the stack's fleet (one backend's manager; declared
 * workspaces are reattached), sessions in SQLite (or PostgreSQL with a postgres:// --store), JSON
 * logs on stderr. SIGINT/SIGTERM shut it down gracefully: in-flight requests finish, then every
 * workspace is closed.
 */
export interface ServeCommandOptions {
  stack?: string | undefined;
  cwd?: string | undefined;
  /** False for `--no-stack`. */
  useStack?: boolean | undefined;
  backend?: string | undefined;
  basedir?: string | undefined;
  store?: string | undefined;
  tokens?: string | undefined;
  port?: number | undefined;
  host?: string | undefined;
  egressAllow?: string[] | undefined;
  egressAllowPrivate?: boolean | undefined;
  allowedHost?: string[] | undefined;
  allowedOrigin?: string[] | undefined;
  /** Connection flags by name (connectionFlags), as given. */
  connections?: Record<string, string | undefined> | undefined;
  /** Quota and rate flags by name (LIMIT_FLAGS), as given. */
  limits?: Record<string, string | undefined> | undefined;
}

export async function serveCommand(values: ServeCommandOptions): Promise<number> {
  const err = (line: string) => process.stderr.write(`${line}\n`);
  const limits = serviceLimits(values.limits ?? {});
  const egress = egressPolicy(values.egressAllow ?? [], values.egressAllowPrivate ?? false);
  const stackName = values.stack ?? process.env.AGENTWS_STACK ?? "local";
  let fleet;
  if (values.useStack !== false) {
    try {
      fleet = await readStackOutputs({ stackName, workDir: resolve(values.cwd ?? process.cwd()) });
      err(`agentws serve: stack '${stackName}' declares ${Object.keys(fleet).length} workspace(s)`);
    } catch (e) {
      // A stack named on the command line must be there; the default one may not exist yet.
      if (values.stack !== undefined || process.env.AGENTWS_STACK !== undefined) throw e;
      err(
        `note: serving without a fleet (stack '${stackName}' could not be read: ${e instanceof Error ? e.message : String(e)}); run \`agentws up\` first to serve declared workspaces`,
      );
    }
  }
  const served = await serveFleet({
    fleet,
    backend: values.backend,
    basedir: values.basedir,
    store: values.store ?? process.env.AGENTWS_STORE ?? DEFAULT_STORE,
    tokensFile: values.tokens,
    port: values.port ?? parsePort(process.env.AGENTWS_PORT ?? "8787", "AGENTWS_PORT"),
    hostname: values.host ?? "127.0.0.1",
    downloadSecret: process.env.AGENTWS_DOWNLOAD_SECRET,
    egress,
    allowedHosts: listOption(values.allowedHost, process.env.AGENTWS_ALLOWED_HOSTS),
    allowedOrigins: listOption(values.allowedOrigin, process.env.AGENTWS_ALLOWED_ORIGINS),
    limits,
    connections: connectionFlags(values.connections ?? {}),
    logger: consoleLogger("info"),
  });
  err(`agentws serve: ${served.backend} workspaces at ${served.service.url} (OpenAPI: /openapi.json, metrics: /metrics); Ctrl-C stops`);
  if (!process.env.AGENTWS_DOWNLOAD_SECRET)
    err("note: AGENTWS_DOWNLOAD_SECRET is not set: download links work on this process only (set one shared secret on every replica)");
  await new Promise<void>((ok) => {
    const stop = () => ok();
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  err("agentws serve: shutting down (finishing in-flight requests, then closing workspaces)");
  await served.service.close();
  return 0;
}

/** `agentws serve` flags of the quotas and rate limits, their ServiceLimits field and environment variable; 0 turns one off. */
export const LIMIT_FLAGS = {
  "rate-limit": ["userRequestsPerSecond", "AGENTWS_RATE_LIMIT"],
  "rate-burst": ["userRequestBurst", "AGENTWS_RATE_BURST"],
  "global-rate-limit": ["globalRequestsPerSecond", "AGENTWS_GLOBAL_RATE_LIMIT"],
  "global-rate-burst": ["globalRequestBurst", "AGENTWS_GLOBAL_RATE_BURST"],
  "max-sessions-per-user": ["maxSessionsPerUser", "AGENTWS_MAX_SESSIONS_PER_USER"],
  "max-live-workspaces-per-user": ["maxLiveWorkspacesPerUser", "AGENTWS_MAX_LIVE_WORKSPACES_PER_USER"],
  "max-live-workspaces": ["maxLiveWorkspaces", "AGENTWS_MAX_LIVE_WORKSPACES"],
} as const satisfies Record<string, readonly [keyof ServiceLimits, string]>;

/** The limits given as flags (or their environment variables; a flag wins), checked so a typo stops the start. */
export function serviceLimits(flags: Record<string, string | undefined>, env: NodeJS.ProcessEnv = process.env): Partial<ServiceLimits> {
  const limits: Partial<ServiceLimits> = {};
  for (const [flag, [field, variable]] of Object.entries(LIMIT_FLAGS)) {
    const given = flags[flag] ?? env[variable];
    if (given === undefined || given === "") continue;
    const n = Number(given);
    if (!/^\d+(\.\d+)?$/.test(given.trim()) || !Number.isFinite(n))
      throw new InvalidArgumentError("must be a number, 0 or more (0 turns the limit off)", { field: `--${flag}` });
    limits[field] = n;
  }
  return limits;
}

/**
 * The service's egress policy from `--egress-allow ENTRY` (repeatable, or comma-separated), the
 * AGENTWS_EGRESS_ALLOW variable (comma-separated) and `--egress-allow-private` (or
 * AGENTWS_EGRESS_ALLOW_PRIVATE=1). Entries are checked here, so a typo stops the start.
 */
export function egressPolicy(flags: string[], allowPrivate: boolean, env: NodeJS.ProcessEnv = process.env): EgressPolicy {
  const allow = [...flags, env.AGENTWS_EGRESS_ALLOW ?? ""]
    .flatMap((s) => s.split(","))
    .map((s) => s.trim())
    .filter(Boolean);
  const parsed = EgressPolicySchema.safeParse({ allow, allowPrivate: allowPrivate || env.AGENTWS_EGRESS_ALLOW_PRIVATE === "1" });
  if (!parsed.success) throw new InvalidArgumentError(parsed.error.issues.map((i) => i.message).join("; "), { field: "--egress-allow" });
  return parsed.data;
}

export const CONNECTION_FLAGS = ["max-connections", "headers-timeout", "keep-alive-timeout", "min-body-rate"] as const;

/** Connection limits from `--max-connections N`, `--headers-timeout SECONDS`, `--keep-alive-timeout SECONDS`, `--min-body-rate BYTES_PER_SECOND` (checked by startService). */
export function connectionFlags(values: Record<string, unknown>): Partial<ConnectionLimits> {
  const num = (flag: string, scale = 1): number | undefined => {
    const v = values[flag];
    if (typeof v !== "string") return undefined;
    if (!/^\d+(\.\d+)?$/.test(v)) throw new InvalidArgumentError("must be a non-negative number", { field: `--${flag}` });
    return Math.round(Number(v) * scale);
  };
  const limits: Partial<ConnectionLimits> = {
    maxConnections: num("max-connections"),
    headersTimeoutMs: num("headers-timeout", 1000),
    keepAliveTimeoutMs: num("keep-alive-timeout", 1000),
    minBodyBytesPerSecond: num("min-body-rate"),
  };
  return Object.fromEntries(Object.entries(limits).filter(([, v]) => v !== undefined));
}

/** A repeatable (or comma-separated) flag plus a comma-separated variable; undefined when both are empty. */
function listOption(flags: string[] | undefined, env: string | undefined): string[] | undefined {
  const out = [...(flags ?? []), env ?? ""]
    .flatMap((s) => s.split(","))
    .map((s) => s.trim())
    .filter(Boolean);
  return out.length ? out : undefined;
}

export interface TokenCommandOptions {
  store?: string | undefined;
  scopes?: string | undefined;
  expires?: string | undefined;
  name?: string | undefined;
}

const storeOf = (values: TokenCommandOptions) => openSessionStore(values.store ?? process.env.AGENTWS_STORE ?? DEFAULT_STORE);

/** `agentws token create <user>`: a new bearer token, printed once; the store keeps only its hash. */
export async function tokenCreateCommand(user: string, values: TokenCommandOptions): Promise<number> {
  // Checked before the store is opened: a typo changes nothing.
  const scopes = parseScopes(values.scopes ?? "read,write", "--scopes");
  const expiresIn = parseDuration(values.expires ?? "never");
  if (values.name !== undefined && !TOKEN_NAME.test(values.name))
    throw new InvalidArgumentError("must be 1-128 characters, no control characters", { field: "--name" });
  // The service's own rule: a token for a user id it refuses would fail every request.
  const bad = edgeIdProblem(user, "userId");
  if (bad !== undefined) throw new InvalidArgumentError(`${JSON.stringify(user)} ${bad}`, { field: "userId" });
  const store = await storeOf(values);
  try {
    const now = Date.now();
    const { token, hash } = newToken();
    const t = await store.addTokenHash(user, hash, { scopes, name: values.name ?? null, expiresAt: expiresIn === null ? null : now + expiresIn, now });
    process.stdout.write(`${token}\n`);
    const until = t.expiresAt === null ? "never expires" : `expires ${new Date(t.expiresAt).toISOString()}`;
    process.stderr.write(
      `token ${t.tokenId} for '${user}' (scopes ${t.scopes.join(",")}; ${until}); only its hash is kept: save it now. Revoke: agentws token revoke ${t.tokenId}\n`,
    );
    return 0;
  } finally {
    await store.close();
  }
}

/** `agentws token list [<user>]`: live tokens as JSON (id, user, scopes, name, times; never a hash). */
export async function tokenListCommand(user: string | undefined, values: TokenCommandOptions): Promise<number> {
  const store = await storeOf(values);
  try {
    process.stdout.write(`${JSON.stringify({ tokens: (await store.listTokens(user, Date.now(), 10_000)).map(tokenView) }, null, 2)}\n`);
    return 0;
  } finally {
    await store.close();
  }
}

/** `agentws token revoke <tokenId>`: refused from the next request on, on every replica. */
export async function tokenRevokeCommand(tokenId: string, values: TokenCommandOptions): Promise<number> {
  const store = await storeOf(values);
  try {
    if (!(await store.revokeToken(tokenId, Date.now()))) {
      process.stderr.write(`no live token '${tokenId}'\n`);
      return 1;
    }
    process.stderr.write(`revoked ${tokenId}: it fails from the next request on\n`);
    return 0;
  } finally {
    await store.close();
  }
}

/** A TCP port, 0 (any free one) to 65535. */
export function parsePort(text: string, field = "--port"): number {
  const n = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(n >= 0 && n <= 65535)) throw new InvalidArgumentError(`must be a port number from 0 (any free port) to 65535, got '${text.slice(0, 20)}'`, { field });
  return n;
}

/** `30d`, `12h`, `90m`, `3600s`, `2w` → milliseconds; `never` → null. At least a minute, at most ten years. */
export function parseDuration(text: string): number | null {
  if (text === "never") return null;
  const m = /^(\d{1,9})([smhdw])$/.exec(text);
  const unit = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 }[m?.[2] ?? "s"]!;
  const seconds = m ? Number(m[1]) * unit : NaN;
  if (!(seconds >= 60 && seconds <= 10 * 366 * 86_400))
    throw new InvalidArgumentError("must be a duration like 30d, 12h, 90m or 2w (1 minute to 10 years), or 'never'", { field: "--expires" });
  return seconds * 1000;
}
