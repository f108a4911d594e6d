import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BubblewrapWorkspace, LocalWorkspace, type Workspace } from "../../sdk/index.js";
import { ECHO_SERVER_IN_WORKSPACE, echoServerBundle } from "../fixtures/mcp/bundle.js";

export const SKILL_ALPHA = fileURLToPath(new URL("../fixtures/skills/alpha", import.meta.url));
export const SESSION = "s1";
export const AGENT = "agent-1";
export type Kind = "local" | "bubblewrap";

/**
 * A real workspace with the `alpha` skill and the echo MCP server registered for the session. The
 * server is the self-contained bundle written into the workspace, so it runs in a sandbox without
 * any node_modules (a worktree's node_modules is outside every mounted path).
 */
export async function openWorkspace(kind: Kind, base: string): Promise<Workspace> {
  const id = `ad${Math.random().toString(16).slice(2, 10)}`;
  const ws =
    kind === "local"
      ? new LocalWorkspace({ workspaceId: id, workdir: path.join(base, id), skillPaths: [SKILL_ALPHA] })
      : new BubblewrapWorkspace({ workspaceId: id, basedir: base, skillPaths: [SKILL_ALPHA] });
  await ws.initialize();
  const sb = ws.getBackend();
  await sb.writeFile(ECHO_SERVER_IN_WORKSPACE, await echoServerBundle());
  const node = kind === "local" ? process.execPath : "node";
  await ws.addMcp(
    { name: "echo", transport: { type: "stdio", command: node, args: [`${sb.workdir}/${ECHO_SERVER_IN_WORKSPACE}`] } },
    { agentId: AGENT, sessionId: SESSION },
  );
  return ws;
}

export async function tempBase(): Promise<string> {
  return fs.mkdtemp(path.join(os.tmpdir(), "agentws-adapters-"));
}

/** Host path of a file the agent names by its in-workspace path. */
export async function readAgentFile(ws: Workspace, agentPath: string): Promise<Buffer> {
  const rel = path.posix.relative(ws.getBackend().workdir, agentPath);
  return ws.getBackend().readFile(rel, { maxBytes: 200 * 1024 * 1024 });
}

export const REMINDER =
  /\n<<<TRUNCATED>>>\n<system-reminder>The remaining content has been omitted for limited context\. You can refer to the file in '([^']+)' for the truncated content if needed\.<\/system-reminder>$/;
