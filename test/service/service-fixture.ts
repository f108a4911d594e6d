import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { LocalWorkspaceManager } from "../../sdk/backends/local/index.js";
import type { Logger } from "../../sdk/logger.js";
import {
  createApp,
  newToken,
  startService,
  SqliteSessionStore,
  type CreateAppOptions,
  type ServiceLimits,
  type SessionStore,
} from "../../sdk/service/index.js";
import type { EgressPolicy } from "../../sdk/util/egress.js";

export interface Running {
  url: string;
  root: string;
  basedir: string;
  manager: LocalWorkspaceManager;
  store: SessionStore;
  /** Bearer tokens by user. */
  tokens: Record<string, string>;
  /** fetch against the service as `user` (JSON bodies are encoded). */
  call(user: string | null, method: string, route: string, body?: unknown, headers?: Record<string, string>): Promise<Response>;
  close(): Promise<void>;
}

/** A real service on loopback: a Local manager in a temp basedir, SQLite in a temp file, users with hashed tokens. */
export async function startTestService(
  options: {
    users?: string[];
    limits?: Partial<ServiceLimits>;
    logger?: Logger;
    store?: SessionStore;
    basedir?: string;
    egress?: EgressPolicy;
    app?: Pick<CreateAppOptions, "allowedHosts" | "allowedOrigins">;
  } = {},
): Promise<Running> {
  const root = await mkdtemp(path.join(tmpdir(), "svc-"));
  const basedir = options.basedir ?? path.join(root, "workspaces");
  const manager = new LocalWorkspaceManager({ basedir, ttl: 600, ...(options.egress ? { egress: options.egress } : {}) });
  const store = options.store ?? new SqliteSessionStore(path.join(root, "sessions.db"));
  const tokens: Record<string, string> = {};
  for (const user of options.users ?? ["alice", "bob"]) {
    const t = newToken();
    await store.addTokenHash(user, t.hash);
    tokens[user] = t.token;
  }
  const { app, dispose } = createApp({
    workspaceManager: manager,
    sessionStore: store,
    backend: "local",
    processMetrics: false,
    downloadSecret: "test-secret",
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    ...options.app,
  });
  const running = await startService({
    app,
    onClose: async () => {
      dispose();
      await manager[Symbol.asyncDispose]();
      await store.close();
    },
  });
  const call = (user: string | null, method: string, route: string, body?: unknown, headers: Record<string, string> = {}) => {
    const h: Record<string, string> = { ...headers };
    if (user !== null) h.authorization = `Bearer ${tokens[user] ?? user}`;
    let payload: RequestInit["body"] | undefined;
    if (body instanceof FormData || typeof body === "string" || body instanceof Uint8Array) payload = body as RequestInit["body"];
    else if (body !== undefined) {
      payload = JSON.stringify(body);
      h["content-type"] ??= "application/json";
    }
    return fetch(`${running.url}${route}`, { method, headers: h, ...(payload !== undefined ? { body: payload } : {}) });
  };
  return {
    url: running.url,
    root,
    basedir,
    manager,
    store,
    tokens,
    call,
    close: async () => {
      await running.close();
      await rm(root, { recursive: true, force: true });
    },
  };
}
