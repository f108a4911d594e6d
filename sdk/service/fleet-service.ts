import os from "node:os";
import path from "node:path";
import { InvalidArgumentError } from "../errors.js";
import { silentLogger, type Logger } from "../logger.js";
import type { FleetOutputs } from "../contract/fleet.js";
import type { WorkspaceManager } from "../manager/manager.js";
import { expandHome } from "../paths.js";
import { BACKEND_KINDS } from "../contract/registry.js";
import { loadManager } from "../backends/load.js";
import type { BackendKind } from "../contract/registry.js";
import type { EgressPolicy } from "../util/egress.js";
import type { Workspace } from "../workspace/workspace.js";
import { createApp } from "./app.js";
import type { ServiceLimits } from "./context.js";
import { anyTokenAuth, storeTokenAuth, tokenFileAuth } from "./auth.js";
import { startService, type ConnectionLimits, type RunningService } from "./server.js";
import { PostgresSessionStore } from "./stores/postgres.js";
import { SqliteSessionStore } from "./stores/sqlite.js";
import type { SessionStore } from "./stores/store.js";

export interface ServeFleetOptions {
  /** The stack's `workspaces` output (declared workspaces are reattached, never created twice). */
  fleet?: FleetOutputs | undefined;
  /** Which backend's manager serves sessions. Default the first registered kind (local). */
  backend?: string | undefined;
  /** The manager's basedir for workspaces it creates at runtime. Default ~/.agent-workspaces/<kind>-runtime. */
  basedir?: string | undefined;
  /** A SQLite file (default ~/.agent-workspaces/service/sessions.db) or a postgres:// URL. */
  store?: string | undefined;
  /** A token file `{ "users": { "<user>": ["sha256:..."] } }`, besides the tokens in the store. */
  tokensFile?: string | undefined;
  port?: number | undefined;
  hostname?: string | undefined;
  downloadSecret?: string | undefined;
  /** Idle seconds before a workspace is paused/closed. Default 900. */
  ttl?: number | undefined;
  /**
   * Where the service host may connect for HTTP MCP servers that sessions declare or agents write
   * into `.mcp`. Default: public addresses only (loopback, private, link-local and metadata
   * addresses refused); list internal MCP servers in `allow`.
   */
  egress?: EgressPolicy | undefined;
  /** Host names the MCP endpoint answers besides loopback ones (see CreateAppOptions.allowedHosts). */
  allowedHosts?: string[] | undefined;
  /** Browser origins allowed on the MCP endpoint besides its own. */
  allowedOrigins?: string[] | undefined;
  /** Body sizes, quotas and rate limits; unset ones keep their defaults (DEFAULT_LIMITS). */
  limits?: Partial<ServiceLimits> | undefined;
  /** Slow and idle clients, connection cap (see ConnectionLimits). */
  connections?: Partial<ConnectionLimits> | undefined;
  logger?: Logger | undefined;
}

export interface ServedFleet {
  service: RunningService;
  manager: WorkspaceManager<Workspace>;
  store: SessionStore;
  backend: string;
}

/** Opens a session store from a location: postgres:// URLs go to PostgreSQL, anything else is a SQLite file. */
export async function openSessionStore(location: string): Promise<SessionStore> {
  if (/^postgres(ql)?:\/\//.test(location)) return PostgresSessionStore.open(location);
  return new SqliteSessionStore(location === ":memory:" ? location : path.resolve(expandHome(location)));
}

/**
 * The service over one backend's manager holding a stack's fleet, listening on loopback by
 * default: what `agentws serve` and the main job run. Shutdown (service.close) finishes in-flight
 * requests, closes every workspace and then the store.
 */
export async function serveFleet(options: ServeFleetOptions = {}): Promise<ServedFleet> {
  const kind = (options.backend ?? BACKEND_KINDS[0]!) as BackendKind;
  if (!BACKEND_KINDS.includes(kind)) throw new InvalidArgumentError(`unknown backend '${kind}' (known: ${BACKEND_KINDS.join(", ")})`, { field: "backend" });
  const Manager = await loadManager(kind);
  const logger = options.logger ?? silentLogger;
  const basedir = path.resolve(expandHome(options.basedir ?? path.join(os.homedir(), ".agent-workspaces", `${kind}-runtime`)));
  const manager = new Manager({ basedir, ignoreOtherBackends: true, ttl: options.ttl ?? 900, logger, ...(options.egress ? { egress: options.egress } : {}) });
  if (options.fleet) manager.loadFleet(options.fleet);
  const store = await openSessionStore(options.store ?? path.join(os.homedir(), ".agent-workspaces", "service", "sessions.db"));
  try {
    const auth = options.tokensFile ? anyTokenAuth(tokenFileAuth(options.tokensFile), storeTokenAuth(store)) : storeTokenAuth(store);
    const { allowedHosts, allowedOrigins } = options;
    const { app, dispose } = createApp({
      workspaceManager: manager,
      sessionStore: store,
      auth,
      backend: kind,
      logger,
      downloadSecret: options.downloadSecret,
      limits: options.limits,
      ...(allowedHosts ? { allowedHosts } : {}),
      ...(allowedOrigins ? { allowedOrigins } : {}),
    });
    const service = await startService({
      app,
      port: options.port,
      hostname: options.hostname,
      logger,
      ...(options.connections ? { connections: options.connections } : {}),
      onClose: async () => {
        dispose();
        await manager[Symbol.asyncDispose]();
        await store.close();
      },
    });
    return { service, manager, store, backend: kind };
  } catch (e) {
    await manager[Symbol.asyncDispose]();
    await store.close();
    throw e;
  }
}
