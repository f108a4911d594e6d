import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { InvalidArgumentError } from "../errors.js";
import { consoleLogger } from "../logger.js";
import { EgressPolicySchema, type EgressPolicy } from "../util/egress.js";
import { readStackOutputs } from "../manager/fleet-source.js";
import { newToken, openSessionStore, serveFleet, type ServiceLimits } from "../service/index.js";

const DEFAULT_STORE = "~/.agent-workspaces/service/sessions.db";

/**
 * `agentws serve`: the HTTP service over the stack's fleet (one backend's manager; declared
 * workspaces are reattached), sessions in SQLite (or PostgreSQL with a postgres:// --store), JSON
 * logs on stderr. SIGINT/SIGTERM shut it down gracefully: in-flight requests finish, then every
 * workspace is closed.
 */
export async function serveCommand(argv: string[]): Promise<number> {
  const err = (line: string) => process.stderr.write(`${line}\n`);
  const { values } = parseArgs({
    args: argv,
    options: {
      stack: { type: "string", short: "s" },
      cwd: { type: "string" },
      backend: { type: "string" },
      basedir: { type: "string" },
      store: { type: "string" },
      tokens: { type: "string" },
      port: { type: "string" },
      host: { type: "string" },
      "no-stack": { type: "boolean" },
      "egress-allow": { type: "string", multiple: true },
      "egress-allow-private": { type: "boolean" },
      ...Object.fromEntries(Object.keys(LIMIT_FLAGS).map((flag) => [flag, { type: "string" as const }])),
    },
  });
  const limits = serviceLimits(values as Record<string, string | undefined>);
  const egress = egressPolicy(values["egress-allow"] ?? [], values["egress-allow-private"] ?? false);
  const stackName = values.stack ?? process.env.AGENTWS_STACK ?? "local";
  let fleet;
  if (!values["no-stack"]) {
    try {
      fleet = await readStackOutputs({ stackName, workDir: resolve(values.cwd ?? process.cwd()) });
    } catch (e) {
      err(`note: serving without a fleet (stack '${stackName}' could not be read: ${e instanceof Error ? e.message : String(e)}); run \`agentws up\` first to serve declared workspaces`);
    }
  }
  const served = await serveFleet({
    fleet,
    backend: values.backend,
    basedir: values.basedir,
    store: values.store ?? process.env.AGENTWS_STORE ?? DEFAULT_STORE,
    tokensFile: values.tokens,
    port: Number(values.port ?? process.env.AGENTWS_PORT ?? 8787),
    hostname: values.host ?? "127.0.0.1",
    downloadSecret: process.env.AGENTWS_DOWNLOAD_SECRET,
    egress,
    limits,
    logger: consoleLogger("info"),
  });
  err(`agentws serve: ${served.backend} workspaces at ${served.service.url} (OpenAPI: /openapi.json, metrics: /metrics); Ctrl-C stops`);
  if (!process.env.AGENTWS_DOWNLOAD_SECRET) err("note: AGENTWS_DOWNLOAD_SECRET is not set: download links work on this process only (set one shared secret on every replica)");
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
    if (!/^\d+(\.\d+)?$/.test(given.trim()) || !Number.isFinite(n)) throw new InvalidArgumentError(`--${flag}`, "must be a number, 0 or more (0 turns the limit off)");
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
  const allow = [...flags, env.AGENTWS_EGRESS_ALLOW ?? ""].flatMap((s) => s.split(",")).map((s) => s.trim()).filter(Boolean);
  const parsed = EgressPolicySchema.safeParse({ allow, allowPrivate: allowPrivate || env.AGENTWS_EGRESS_ALLOW_PRIVATE === "1" });
  if (!parsed.success) throw new InvalidArgumentError("--egress-allow", parsed.error.issues.map((i) => i.message).join("; "));
  return parsed.data;
}

/** `agentws token <user>`: a new bearer token for a user; the store keeps only its hash, the token is printed once. */
export async function tokenCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, allowPositionals: true, options: { store: { type: "string" } } });
  const user = positionals[0];
  if (!user) {
    process.stderr.write("usage: agentws token <userId> [--store FILE|postgres://...]\n");
    return 2;
  }
  const store = await openSessionStore(values.store ?? process.env.AGENTWS_STORE ?? DEFAULT_STORE);
  try {
    const { token, hash } = newToken();
    await store.addTokenHash(user, hash);
    process.stdout.write(`${token}\n`);
    process.stderr.write(`token for '${user}' stored as ${hash.slice(0, 15)}… (the token itself is not kept: save it now)\n`);
    return 0;
  } finally {
    await store.close();
  }
}
