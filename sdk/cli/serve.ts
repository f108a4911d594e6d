import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { InvalidArgumentError } from "../errors.js";
import { consoleLogger } from "../logger.js";
import { EgressPolicySchema, type EgressPolicy } from "../util/egress.js";
import { readStackOutputs } from "../manager/fleet-source.js";
import { newToken, openSessionStore, serveFleet, type ConnectionLimits } from "../service/index.js";

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
      "max-connections": { type: "string" },
      "headers-timeout": { type: "string" },
      "keep-alive-timeout": { type: "string" },
      "min-body-rate": { type: "string" },
    },
  });
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
    connections: connectionFlags(values),
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

/** Connection limits from `--max-connections N`, `--headers-timeout SECONDS`, `--keep-alive-timeout SECONDS`, `--min-body-rate BYTES_PER_SECOND` (checked by startService). */
export function connectionFlags(values: Record<string, unknown>): Partial<ConnectionLimits> {
  const num = (flag: string, scale = 1): number | undefined => {
    const v = values[flag];
    if (typeof v !== "string") return undefined;
    if (!/^\d+(\.\d+)?$/.test(v)) throw new InvalidArgumentError(`--${flag}`, "must be a non-negative number");
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
