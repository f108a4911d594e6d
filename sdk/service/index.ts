// agent-workspaces/service: the HTTP agent service over a workspace manager.
export { createApp, type CreateAppOptions, type ServiceApp } from "./app.js";
export { startService, DEFAULT_CONNECTION_LIMITS, type ConnectionLimits, type RunningService, type StartServiceOptions } from "./server.js";
export { hashToken, newToken, tokenFileAuth, hashedTokenAuth, storeTokenAuth, anyTokenAuth, parseScopes, requiredScope } from "./auth.js";
export { DEFAULT_SCOPES, type TokenAuth, type TokenFileEntry, type Principal } from "./auth.js";
export { DownloadTokens } from "./download-tokens.js";
export { ServiceMetrics } from "./metrics.js";
export { DEFAULT_LIMITS, type ServiceLimits } from "./context.js";
export { SqliteSessionStore } from "./stores/sqlite.js";
export { PostgresSessionStore } from "./stores/postgres.js";
export { SCOPES } from "./stores/store.js";
export type { SessionStore, SessionRecord, SessionPatch, ListOptions, Scope, TokenRecord, NewTokenOptions, CreateOptions } from "./stores/store.js";
export { serveFleet, openSessionStore, type ServeFleetOptions, type ServedFleet } from "./fleet-service.js";
