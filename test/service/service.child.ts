/**
 * A service in its own process, so a test can measure its memory alone: a Local manager and SQLite
 * under argv[2], one user `alice`. Prints `{"url","token","basedir"}` on one line, and shuts down
 * gracefully on SIGTERM. Limits may be given as JSON in argv[3]; server options in argv[4].
 */
import path from "node:path";
import { LocalWorkspaceManager } from "../../sdk/backends/local/index.js";
import { createApp, newToken, startService, SqliteSessionStore } from "../../sdk/service/index.js";

const root = process.argv[2]!;
const limits = JSON.parse(process.argv[3] ?? "{}") as Record<string, number>;
const server = JSON.parse(process.argv[4] ?? "{}") as Record<string, number>;
const basedir = path.join(root, "workspaces");
const manager = new LocalWorkspaceManager({ basedir, ttl: 600 });
const store = new SqliteSessionStore(path.join(root, "sessions.db"));
const { token, hash } = newToken();
await store.addTokenHash("alice", hash);
const { app, dispose } = createApp({ workspaceManager: manager, sessionStore: store, backend: "local", processMetrics: false, limits });
const running = await startService({
  app,
  ...server,
  onClose: async () => {
    dispose();
    await manager[Symbol.asyncDispose]();
    await store.close();
  },
});
process.stdout.write(`${JSON.stringify({ url: running.url, token, basedir })}\n`);
process.once("SIGTERM", () => {
  void running.close().then(() => process.exit(0));
});
