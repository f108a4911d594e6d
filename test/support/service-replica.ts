/**
 * One service replica for test/service/replicas.test.ts: the HTTP service in its own process over
 * a Local manager on a shared basedir and a shared PostgreSQL store.
 * Usage: node [--expose-gc] --import tsx test/support/service-replica.ts '<json {basedir, postgres | sqlite, secret}>'
 * Prints {type:"ready", url} on stdout; a "gc" line on stdin answers {type:"heap", heapUsed} after a
 * full collection (with --expose-gc); closing stdin shuts it down gracefully ({type:"closed"}).
 */
import { LocalWorkspaceManager } from "../../sdk/backends/local/index.js";
import { createInterface } from "node:readline";
import { PostgresSessionStore, SqliteSessionStore, createApp, startService } from "../../sdk/service/index.js";

const cfg = JSON.parse(process.argv[2] ?? "{}") as { basedir: string; postgres?: string; sqlite?: string; secret: string };
const emit = (line: Record<string, unknown>): void => void process.stdout.write(`${JSON.stringify(line)}\n`);
const manager = new LocalWorkspaceManager({ basedir: cfg.basedir, ttl: 600 });
const store = cfg.postgres ? await PostgresSessionStore.open(cfg.postgres, { max: 20 }) : new SqliteSessionStore(cfg.sqlite!);
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
createInterface({ input: process.stdin }).on("line", (line) => {
  if (line.trim() !== "gc") return;
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let i = 0; i < 3; i++) gc?.();
  emit({ type: "heap", heapUsed: process.memoryUsage().heapUsed, collected: gc !== undefined });
});
process.stdin.on("end", () => {
  void service.close().then(() => {
    emit({ type: "closed" });
    process.exit(0);
  });
});
