/**
 * One service replica for test/replicas.test.ts: a real WorkspaceManager in its own process on a
 * shared backend, reporting what happens as JSON lines on stdout.
 *
 * Usage: node --import tsx test/support/replica.ts '<json config>'
 *   kind: "docker" | "bubblewrap"; basedir; workspaceId; ttl, sweepInterval (seconds);
 *   mode: "busy" (Bash, Write and Read tool calls back to back for busyMs, then idle) or "idle" (one
 *   getWorkspace, then only a poke every pokeMs when set); baseImage, readOnlyPaths: backend spec.
 * Lines: {type:"ready"}, {type:"failure", message}, {type:"busy-done", ok, failed, lastOpAt},
 * {type:"event", event} for pause / evict / error manager events, {type:"disposed"}.
 * Closing stdin disposes the manager and exits.
 */
import { BubblewrapWorkspaceManager } from "../../sdk/backends/bubblewrap/index.js";
import { DockerWorkspaceManager } from "../../sdk/backends/docker/index.js";
import type { ManagerEvent } from "../../sdk/manager/events.js";

interface Config {
  kind: "docker" | "bubblewrap";
  basedir: string;
  workspaceId: string;
  ttl: number;
  sweepInterval: number;
  mode: "busy" | "idle";
  busyMs?: number;
  pokeMs?: number;
  baseImage?: string;
  readOnlyPaths?: string[];
}

const cfg = JSON.parse(process.argv[2] ?? "{}") as Config;
const emit = (line: Record<string, unknown>): void => void process.stdout.write(`${JSON.stringify({ t: Date.now(), ...line })}\n`);
const onEvent = (event: ManagerEvent): void => {
  if (event.type === "pause" || event.type === "evict" || event.type === "error") emit({ type: "event", event });
};
const common = {
  basedir: cfg.basedir,
  ttl: cfg.ttl,
  sweepInterval: cfg.sweepInterval,
  onEvent,
  ...(cfg.readOnlyPaths ? { readOnlyPaths: cfg.readOnlyPaths } : {}),
};
const manager =
  cfg.kind === "docker"
    ? new DockerWorkspaceManager({ ...common, ...(cfg.baseImage ? { baseImage: cfg.baseImage } : {}) })
    : new BubblewrapWorkspaceManager(common);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const get = () => manager.getWorkspace("replica-user", "replica-agent", undefined, cfg.workspaceId);

let stopping = false;
process.stdin.resume();
process.stdin.on("end", () => {
  stopping = true;
  void manager[Symbol.asyncDispose]().finally(() => {
    emit({ type: "disposed" });
    process.exit(0);
  });
});

/**
 * One exec and one write + read, each checked, through the workspace's built-in tools: tracked
 * operations, as an agent's are, so the replica's own sweep counts them as activity.
 */
async function operate(i: number): Promise<void> {
  const ws = await get();
  const tools = new Map(ws.listTools().map((t) => [t.name, t]));
  const run = async (name: string, input: Record<string, unknown>) => {
    const r = await tools.get(name)!.execute(input);
    if (!r.ok) throw new Error(`${name}: ${r.output.slice(0, 400)}`);
    return r.output;
  };
  const out = await run("Bash", { command: `echo op-${i}` });
  if (!out.includes(`op-${i}`)) throw new Error(`Bash gave '${out.slice(0, 200)}'`);
  const file = `replica-${process.pid}.txt`;
  await run("Write", { file_path: file, content: `n=${i}` });
  const back = await run("Read", { file_path: file });
  if (!back.includes(`n=${i}`)) throw new Error(`Read gave '${back.slice(0, 200)}'`);
}

await get();
emit({ type: "ready", replicaId: manager.replicaId });
if (cfg.mode === "busy") {
  const until = Date.now() + (cfg.busyMs ?? 60_000);
  let ok = 0;
  let failed = 0;
  let lastOpAt = Date.now();
  for (let i = 0; Date.now() < until && !stopping; i++) {
    try {
      await operate(i);
      ok++;
    } catch (e) {
      failed++;
      emit({ type: "failure", message: String((e as Error).message ?? e).slice(0, 500) });
    }
    lastOpAt = Date.now();
    await sleep(10);
  }
  emit({ type: "busy-done", ok, failed, lastOpAt });
} else if (cfg.pokeMs) {
  for (let i = 0; !stopping; i++) {
    await sleep(cfg.pokeMs);
    if (stopping) break;
    try {
      await operate(i);
      emit({ type: "poke" });
    } catch (e) {
      emit({ type: "failure", message: String((e as Error).message ?? e).slice(0, 500) });
    }
  }
}
