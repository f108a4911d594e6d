/**
 * Our side of the peer benchmark: the same operations as reference_ops.py, on this SDK.
 *
 *   node --expose-gc --import tsx bench/peer/ours.ts --serve     (driven by run.ts / parity.ts)
 *
 * Speaks the same JSON lines as the reference driver. Each bench builds its inputs first
 * (untimed), times only the calls under test with performance.now(), then cleans up (untimed).
 */
import { cp, mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { LocalWorkspace } from "../../sdk/backends/local/index.js";
import { BubblewrapSandbox } from "../../sdk/backends/bubblewrap/sandbox.js";
import { IsolationPolicy } from "../../sdk/manager/index.js";
import { LocalWorkspaceManager } from "../../sdk/backends/local/index.js";
import { fromMcpJson } from "../../sdk/workspace/mcp-spec.js";
import type { DataBlock, Message, ToolResult } from "../../sdk/workspace/offload.js";
import type { FixtureIndex, Payloads } from "./fixtures.js";
import type { Step, StepResult } from "./scenario.js";

type Timed = { ms: number; count: number; extra: Record<string, unknown> };

async function load<T>(fx: string, name: string): Promise<T> {
  return JSON.parse(await readFile(path.join(fx, name), "utf8")) as T;
}
const tmp = (prefix: string) => mkdtemp(path.join(os.tmpdir(), `peer-ours-${prefix}-`));
const clean = (dir: string) => rm(dir, { recursive: true, force: true });

async function newWs(workdir: string, skillPaths?: string[]): Promise<LocalWorkspace> {
  const ws = new LocalWorkspace({ workdir, workspaceId: "peer-bench", ...(skillPaths ? { skillPaths } : {}) });
  await ws.initialize();
  return ws;
}

/** CPU time of the last timed region (all threads of this process, not child processes). */
let lastCpuMs = 0;

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await fn();
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  lastCpuMs = (c.user + c.system) / 1000;
  return { ms, value };
}

// ── bench operations ────────────────────────────────────────────────

async function initSeed(fx: string): Promise<Timed> {
  const { seedSkills } = await load<FixtureIndex>(fx, "index.json");
  const root = await tmp("init");
  try {
    const { ms, value: ws } = await timed(async () => {
      const ws = new LocalWorkspace({ workdir: path.join(root, "ws"), workspaceId: "peer-bench", skillPaths: seedSkills });
      await ws.initialize();
      return ws;
    });
    await ws.close();
    return { ms, count: seedSkills.length, extra: {} };
  } finally {
    await clean(root);
  }
}

async function addSkills(fx: string): Promise<Timed> {
  const { addSkills } = await load<FixtureIndex>(fx, "index.json");
  const root = await tmp("add");
  try {
    const ws = await newWs(path.join(root, "ws"));
    const { ms } = await timed(async () => {
      for (const p of addSkills) await ws.addSkill(p, { agentId: "agent-0" });
    });
    const listed = await ws.listSkills({ agentId: "agent-0" });
    await ws.close();
    return { ms, count: addSkills.length, extra: { skills: listed.length } };
  } finally {
    await clean(root);
  }
}

async function listAgents(fx: string, warm: boolean): Promise<Timed> {
  const { seedSkills } = await load<FixtureIndex>(fx, "index.json");
  const root = await tmp("list");
  try {
    const ws = await newWs(path.join(root, "ws"), seedSkills);
    const agents = Array.from({ length: 10 }, (_, i) => `agent-${i}`);
    if (warm) for (const a of agents) await ws.listSkills({ agentId: a });
    let total = 0;
    const { ms } = await timed(async () => {
      for (const a of agents) total += (await ws.listSkills({ agentId: a })).length;
    });
    await ws.close();
    return { ms, count: agents.length, extra: { skills: total } };
  } finally {
    await clean(root);
  }
}

async function offloadResults(fx: string, kind: "small" | "big"): Promise<Timed> {
  const p = await load<Payloads>(fx, "payloads.json");
  let results: ToolResult[];
  if (kind === "small")
    results = p.smallResults.map((text, i) => ({ id: `call-${String(i).padStart(4, "0")}`, name: "bench_tool", output: text, state: "success" }));
  else {
    const big = await readFile(path.join(fx, p.bigResultFile), "utf8");
    results = Array.from({ length: p.bigResultCount }, (_, i) => ({
      id: `big-${String(i).padStart(2, "0")}`,
      name: "bench_tool",
      output: big,
      state: "success",
    }));
  }
  const root = await tmp("offload");
  try {
    const ws = await newWs(path.join(root, "ws"));
    const { ms } = await timed(async () => {
      for (const r of results) await ws.offloadToolResult("session-1", r);
    });
    await ws.close();
    return { ms, count: results.length, extra: {} };
  } finally {
    await clean(root);
  }
}

async function offloadData(fx: string): Promise<Timed> {
  const p = await load<Payloads>(fx, "payloads.json");
  const blocks = p.dataBlocks as DataBlock[];
  const root = await tmp("data");
  try {
    const ws = await newWs(path.join(root, "ws"));
    const { ms } = await timed(async () => {
      for (const b of blocks) await ws.offloadData(b);
    });
    const files = (await readdir(path.join(root, "ws", "data"))).length;
    await ws.close();
    return { ms, count: blocks.length, extra: { files } };
  } finally {
    await clean(root);
  }
}

async function offloadContext(fx: string): Promise<Timed> {
  const p = await load<Payloads>(fx, "payloads.json");
  const msgs = p.contextMessages as Message[];
  const root = await tmp("ctx");
  try {
    const ws = await newWs(path.join(root, "ws"));
    const { ms, value: agentPath } = await timed(() => ws.offloadContext("session-1", msgs));
    const size = (await stat(path.join(root, "ws", path.relative(ws.workdir, agentPath)))).size;
    await ws.close();
    return { ms, count: msgs.length, extra: { bytes: size } };
  } finally {
    await clean(root);
  }
}

function localManager(basedir: string, isolation: IsolationPolicy = IsolationPolicy.PER_AGENT): LocalWorkspaceManager {
  return new LocalWorkspaceManager({ basedir, isolation });
}

const HITS = 100_000;

async function managerHits(): Promise<Timed> {
  const root = await tmp("mgr");
  try {
    const mgr = localManager(root);
    const ws = await mgr.getWorkspace("user-1", "agent-1", "s1", "ws-hot");
    let got: LocalWorkspace | undefined;
    const { ms } = await timed(async () => {
      for (let i = 0; i < HITS; i++) got = await mgr.getWorkspace("user-1", "agent-1", "s1", "ws-hot");
    });
    if (got !== ws) throw new Error("cache hit returned another workspace");
    await mgr.closeAll();
    return { ms, count: HITS, extra: {} };
  } finally {
    await clean(root);
  }
}

const ASSIGNS = 100_000;

async function assign(policy: IsolationPolicy): Promise<Timed> {
  const root = await tmp("assign");
  try {
    const mgr = localManager(root, policy);
    const users = Array.from({ length: 1000 }, (_, i) => `user-${i}`);
    const agents = Array.from({ length: 7 }, (_, i) => `agent-${i}`);
    let last = "";
    // The reference's assign_workspace_id is async (awaited per call); ours is synchronous.
    const { ms } = await timed(async () => {
      for (let i = 0; i < ASSIGNS; i++) last = mgr.assignWorkspaceId({ userId: users[i % 1000]!, agentId: agents[i % 7]!, sessionId: "s" });
    });
    return { ms, count: ASSIGNS, extra: { last: policy === IsolationPolicy.PER_SESSION ? "" : last } };
  } finally {
    await clean(root);
  }
}

async function managerFirstConcurrent(): Promise<Timed> {
  const root = await tmp("first");
  try {
    const mgr = localManager(root);
    const n = 100;
    const { ms, value: got } = await timed(() =>
      Promise.all(
        Array.from({ length: n }, (_, i) => mgr.getWorkspace("user-1", `agent-${String(i).padStart(3, "0")}`, "s1", `ws-${String(i).padStart(3, "0")}`)),
      ),
    );
    if (new Set(got).size !== n) throw new Error("expected distinct workspaces");
    await mgr.closeAll();
    return { ms, count: n, extra: {} };
  } finally {
    await clean(root);
  }
}

async function bwrapExecTrue(): Promise<Timed> {
  const root = await tmp("bwrap");
  try {
    await mkdir(path.join(root, "ws"));
    await mkdir(path.join(root, "tmp"));
    // network "host" = the reference's --share-net, which it requires for its gateway.
    const sb = await BubblewrapSandbox.open({ hostRoot: path.join(root, "ws"), hostTmp: path.join(root, "tmp"), network: "host", persistent: true });
    const first = await sb.exec(["true"]);
    if (first.exitCode !== 0) throw new Error(`bwrap true failed: ${first.stderr.toString()}`);
    const n = 200;
    const { ms } = await timed(async () => {
      for (let i = 0; i < n; i++) {
        const r = await sb.exec(["true"]);
        if (r.exitCode !== 0) throw new Error("bwrap true failed");
      }
    });
    await sb.close?.();
    return { ms, count: n, extra: {} };
  } finally {
    await clean(root);
  }
}

export const BENCHES: Record<string, (fx: string) => Promise<Timed>> = {
  init_seed20: initSeed,
  add_skills_100: addSkills,
  list_skills_10_first: (fx) => listAgents(fx, false),
  list_skills_10_warm: (fx) => listAgents(fx, true),
  offload_tool_result_small: (fx) => offloadResults(fx, "small"),
  offload_tool_result_1mib: (fx) => offloadResults(fx, "big"),
  offload_data_50pct: offloadData,
  offload_context_1000: offloadContext,
  manager_hits_100k: managerHits,
  assign_per_agent_100k: () => assign(IsolationPolicy.PER_AGENT),
  assign_per_user_100k: () => assign(IsolationPolicy.PER_USER),
  assign_per_session_100k: () => assign(IsolationPolicy.PER_SESSION),
  manager_first_100_concurrent: managerFirstConcurrent,
  bwrap_exec_true_200: bwrapExecTrue,
};

// ── parity scenario ─────────────────────────────────────────────────

const rel = (p: string, workdir: string) => path.relative(workdir, p).split(path.sep).join("/");

/** Interprets the shared step list (scenario.ts) on our LocalWorkspace. */
export async function runScenario(workdir: string, steps: Step[]): Promise<StepResult[]> {
  let ws: LocalWorkspace | undefined;
  const need = () => {
    if (!ws) throw new Error("scenario must start with init");
    return ws;
  };
  const scope = (s: { agentId?: string; sessionId?: string }) => ({
    ...(s.agentId !== undefined ? { agentId: s.agentId } : {}),
    ...(s.sessionId !== undefined ? { sessionId: s.sessionId } : {}),
  });
  const run = async (s: Step): Promise<unknown> => {
    switch (s.call) {
      case "init":
        ws = new LocalWorkspace({
          workdir,
          workspaceId: s.workspaceId,
          ...(s.skillPaths.length ? { skillPaths: s.skillPaths } : {}),
          ...(s.defaultMcps.length ? { defaultMcps: s.defaultMcps.map(fromMcpJson) } : {}),
        });
        await ws.initialize();
        return null;
      case "close":
        await need().close();
        return null;
      case "listSkills": {
        const w = need();
        return (await w.listSkills(scope(s))).map((k) => ({ name: k.name, description: k.description, dir: rel(k.dir, w.workdir), markdown: k.markdown }));
      }
      case "addSkill":
        await need().addSkill(s.path, scope(s));
        return null;
      case "removeSkill":
        await need().removeSkill(s.name, scope(s));
        return null;
      case "addMcp":
        await need().addMcp(fromMcpJson(s.spec), scope(s));
        return null;
      case "removeMcp":
        await need().removeMcp(s.name, scope(s));
        return null;
      case "listMcps":
        return (await need().listMcps(scope(s))).map((m) => m.name);
      case "purgeSession":
        await need().purgeSession({ agentId: s.agentId, sessionId: s.sessionId });
        return null;
      case "purgeAgent":
        await need().purgeAgent({ agentId: s.agentId });
        return null;
      case "offloadToolResult": {
        const w = need();
        return rel(await w.offloadToolResult(s.sessionId, s.result as ToolResult), w.workdir);
      }
      case "offloadData": {
        const out = await need().offloadData(s.block as DataBlock);
        return { id: out.id, name: out.name ?? null, source: out.source };
      }
      case "addSkillArchive": {
        const data = await readFile(s.file);
        await need().addSkillArchive(data, { format: s.format, dirName: s.dirName, ...(s.agentId !== undefined ? { agentId: s.agentId } : {}) });
        return null;
      }
      case "reset":
        await need().reset();
        return null;
      case "snapshot":
        await cp(workdir, `${workdir}@${s.label}`, { recursive: true, verbatimSymlinks: true });
        return null;
      case "writeFile": {
        const target = path.join(workdir, s.path);
        await mkdir(path.dirname(target), { recursive: true });
        await writeFile(target, s.content);
        return null;
      }
      case "offloadContext": {
        const w = need();
        return rel(await w.offloadContext(s.sessionId, s.messages as Message[]), w.workdir);
      }
    }
  };
  const results: StepResult[] = [];
  for (const s of steps) {
    try {
      results.push({ ok: true, value: await run(s) });
    } catch (e) {
      results.push({ ok: false, error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
    }
  }
  return results;
}

// ── JSON-lines driver ───────────────────────────────────────────────

async function handle(req: Record<string, unknown>): Promise<Record<string, unknown>> {
  switch (req.op) {
    case "version":
      return { version: process.version };
    case "bench": {
      const fn = BENCHES[String(req.name)];
      if (!fn) throw new Error(`unknown bench '${String(req.name)}'`);
      (globalThis as { gc?: () => void }).gc?.();
      const r = await fn(String(req.fixtures));
      return { ...r, cpuMs: lastCpuMs };
    }
    case "scenario":
      return { results: await runScenario(String(req.workdir), req.steps as Step[]) };
    default:
      throw new Error(`unknown op '${String(req.op)}'`);
  }
}

async function serve(): Promise<void> {
  const out = process.stdout;
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    const req = JSON.parse(line) as Record<string, unknown>;
    let reply: Record<string, unknown>;
    try {
      reply = { id: req.id, ok: true, ...(await handle(req)) };
    } catch (e) {
      reply = { id: req.id, ok: false, error: e instanceof Error ? e.message : String(e), trace: e instanceof Error ? e.stack : undefined };
    }
    out.write(`${JSON.stringify(reply)}\n`);
  }
}

if (process.argv.includes("--serve")) await serve();
