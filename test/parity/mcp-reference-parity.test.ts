// `.mcp` bytes and scope semantics against the pinned AgentScope reference itself (the peer venv
// made by scripts/peer-venv.sh). Skipped, with the reason printed, when that venv is not built.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { LocalWorkspace } from "../../sdk/backends/local/index.js";
import { fromMcpJson } from "../../sdk/workspace/mcp-spec.js";
import { hostEchoServerArgv } from "../fixtures/mcp/paths.js";

const venv = process.env.PEER_VENV_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "agent-workspaces", "peer-venv-2.0.11");
const python = path.join(venv, "bin", "python");
const ready = existsSync(path.join(venv, ".ready")) && existsSync(python);
if (!ready) console.log(`reference venv not found at ${venv} (run scripts/peer-venv.sh): .mcp parity checks skipped`);
const script = fileURLToPath(new URL("../fixtures/mcp/reference_mcp_ops.py", import.meta.url));

type Op = { call: "add" | "remove" | "purge" | "list" | "restart"; agent_id?: string; session_id?: string; spec?: unknown; name?: string };

describe.skipIf(!ready)(".mcp parity with the reference LocalWorkspace", () => {
  const base = mkdtempSync(path.join(os.tmpdir(), "agentws-mcp-parity-"));
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  async function both(
    defaults: unknown[],
    ops: Op[],
  ): Promise<{ ref: { file: string | null; lists: string[][] }; ours: { file: string | null; lists: string[][] } }> {
    const refDir = path.join(base, `ref-${Math.random().toString(36).slice(2)}`);
    const r = spawnSync(python, [script, refDir], { input: JSON.stringify({ defaults, ops }), encoding: "utf8", timeout: 120_000 });
    if (r.status !== 0) throw new Error(`reference failed: ${r.stderr}`);
    const ourDir = path.join(base, `ours-${Math.random().toString(36).slice(2)}`);
    const open = async () => {
      const ws = new LocalWorkspace({ workdir: ourDir, defaultMcps: defaults.map(fromMcpJson) });
      await ws.initialize();
      return ws;
    };
    let ws = await open();
    const lists: string[][] = [];
    for (const op of ops) {
      const scope = { agentId: op.agent_id, sessionId: op.session_id };
      if (op.call === "add") await ws.addMcp(fromMcpJson(op.spec), scope);
      if (op.call === "remove") await ws.removeMcp(op.name!, scope);
      if (op.call === "purge") await ws.purgeSession({ agentId: op.agent_id, sessionId: op.session_id ?? "" });
      if (op.call === "list") lists.push((await ws.listMcps(scope)).map((h) => h.name));
      if (op.call === "restart") {
        await ws.close();
        ws = await open();
      }
    }
    await ws.close();
    const read = (dir: string) => (existsSync(path.join(dir, ".mcp")) ? readFileSync(path.join(dir, ".mcp"), "utf8") : null);
    return { ref: { file: read(refDir), lists: JSON.parse(r.stdout) }, ours: { file: read(ourDir), lists } };
  }

  const http = (name: string, extra: Record<string, unknown> = {}) => ({
    name,
    is_stateful: false,
    mcp_config: { type: "http_mcp", url: `http://127.0.0.1:9/${name}` },
    ...extra,
  });
  const [node, echo] = hostEchoServerArgv();

  it("writes the same bytes for adds, removes, [] and purges across scopes", async () => {
    const { ref, ours } = await both(
      [http("d")],
      [
        { call: "list", agent_id: "a1", session_id: "s0" },
        {
          call: "add",
          agent_id: "a1",
          session_id: "s1",
          spec: http("web", {
            mcp_config: { type: "http_mcp", url: "http://127.0.0.1:9/w", headers: { X: "é中" }, timeout: 2.5 },
            execution_timeout: 5,
            enable_tools: ["t"],
          }),
        },
        { call: "remove", agent_id: "a1", session_id: "s2", name: "d" },
        {
          call: "add",
          spec: { name: "ech", is_stateful: true, mcp_config: { type: "stdio_mcp", command: node, args: [echo], env: { A: "b" } }, execution_timeout: 0.25 },
        },
        { call: "add", agent_id: "a4", spec: http("streamy", { stream_progress: true }) },
        { call: "add", agent_id: "a2", session_id: "s1", spec: http("h2", { disable_tools: ["x", "y"] }) },
        { call: "add", agent_id: "a3", session_id: "s9", spec: http("gone") },
        { call: "purge", agent_id: "a3", session_id: "s9" },
        { call: "list", agent_id: "a1", session_id: "s1" },
        { call: "list", agent_id: "a1", session_id: "s2" },
        { call: "list", agent_id: "a3", session_id: "s9" },
        { call: "restart" },
        { call: "list", agent_id: "a1", session_id: "s2" },
        { call: "list", agent_id: "a1", session_id: "s1" },
        { call: "list", agent_id: "zz" },
      ],
    );
    expect(ref.file).not.toBeNull();
    expect(ours.file).toBe(ref.file!);
    expect(ours.lists).toEqual(ref.lists);
  });

  it("reads a file the reference wrote and continues it byte-identically", async () => {
    const first = await both([], [{ call: "add", agent_id: "a", session_id: "s", spec: http("one") }]);
    expect(first.ref.file).toContain('"stream_progress": false');
    const dir = path.join(base, "continue");
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, ".mcp"), first.ref.file!);
    const ws = new LocalWorkspace({ workdir: dir, defaultMcps: [fromMcpJson(http("d"))] });
    await ws.initialize();
    expect((await ws.listMcps({ agentId: "a", sessionId: "s" })).map((h) => h.name)).toEqual(["one"]);
    await ws.addMcp(fromMcpJson(http("two")), { agentId: "a", sessionId: "s" });
    await ws.close();
    const { ref } = await both(
      [],
      [
        { call: "add", agent_id: "a", session_id: "s", spec: http("one") },
        { call: "restart" },
        { call: "add", agent_id: "a", session_id: "s", spec: http("two") },
      ],
    );
    expect(readFileSync(path.join(dir, ".mcp"), "utf8")).toBe(ref.file!);
  });
});
