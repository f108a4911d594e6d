import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { BubblewrapWorkspace } from "../../sdk/backends/bubblewrap/index.js";
import { DockerWorkspace } from "../../sdk/backends/docker/index.js";
import { LocalWorkspace } from "../../sdk/backends/local/index.js";
import type { Workspace } from "../../sdk/workspace/workspace.js";
import { uniqueId } from "../contract/fixture.js";
import { BASE_IMAGE, dockerEngine } from "./docker-engine.js";

/**
 * The backends a workspace-content attack runs against here: Local and Bubblewrap always, Docker (with a
 * host folder and without one) when an engine answers. Each `open` gives a fresh, initialized workspace
 * that `closeAll` ends.
 */
export interface AttackBackend {
  name: string;
  open(): Promise<Workspace>;
}

export async function attackBackends(tag: string): Promise<{ backends: AttackBackend[]; closeAll(): Promise<void> }> {
  const base = await fs.mkdtemp(path.join(os.tmpdir(), `agentws-${tag}-`));
  const opened: Workspace[] = [];
  const track = async (ws: Workspace): Promise<Workspace> => {
    opened.push(ws);
    await ws.initialize();
    return ws;
  };
  const backends: AttackBackend[] = [
    { name: "local", open: () => track(new LocalWorkspace({ workdir: path.join(base, uniqueId("lo")) })) },
    { name: "bubblewrap", open: () => track(new BubblewrapWorkspace({ workspaceId: uniqueId("bw"), basedir: base })) },
  ];
  if (process.env.AGENTWS_SKIP_DOCKER !== "1" && (await dockerEngine())) {
    backends.push(
      {
        name: "docker (host folder)",
        open: () => track(new DockerWorkspace({ workspaceId: uniqueId("dk"), basedir: base, baseImage: BASE_IMAGE, teardown: "destroy" })),
      },
      { name: "docker (no host folder)", open: () => track(new DockerWorkspace({ workspaceId: uniqueId("dk"), baseImage: BASE_IMAGE, teardown: "destroy" })) },
    );
  }
  return {
    backends,
    closeAll: async () => {
      await Promise.all(opened.splice(0).map((ws) => ws.close().catch(() => undefined)));
      await fs.rm(base, { recursive: true, force: true });
    },
  };
}

/** Runs `command` through the workspace's own Bash tool, as an agent would. */
export async function bash(ws: Workspace, command: string): Promise<string> {
  const tool = ws.listTools().find((t) => t.name === "Bash")!;
  const r = await tool.execute({ command, timeout: 120_000 });
  if (!r.ok) throw new Error(`Bash failed: ${r.output}`);
  return r.output;
}
