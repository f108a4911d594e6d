/**
 * One service replica for test/service/replicas.test.ts: the HTTP service in its own process over
 * a Local manager on a shared basedir and a shared PostgreSQL store.
 * Usage: node --import tsx test/support/service-replica.ts '<json {basedir, postgres, secret}>'
 * Prints {type:"ready", url} on stdout; closing stdin shuts it down gracefully ({type:"closed"}).
 */
import { LocalWorkspaceManager } from "../../sdk/backends/local/index.js";
import { PostgresSessionStore, createApp, startService } from "../../sdk/service/index.js";

const cfg = JSON.parse(process.argv[2] ?? "{}") as { basedir: string; postgres: string; secret: string };
const emit = (line: Record<string, unknown>): void => void process.stdout.write(`${JSON.stringify(line)}\n`);
const manager = new LocalWorkspaceManager({ basedir: cfg.basedir, ttl: 600 });
const store = await PostgresSessionStore.open(cfg.postgres, { max: 20 });
const { app, dispose } = createApp({ workspaceManager: manager, sessionStore: store, backend: "local", downloadSecret: cfg.secret, processMetrics: false });
const service = await startService({
  app,
  onClose: async () => {
    dispose();
    await manager[Symbol.asyncDispose]();
    await store.close();
  },
});
emit({ type: "ready", url: service.url, pid: process.pid });
process.stdin.resume();
process.stdin.on("end", () => {
  void service.close().then(() => {
    emit({ type: "closed" });
    process.exit(0);
  });
});
