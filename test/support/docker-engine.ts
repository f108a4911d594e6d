import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { dockerClient } from "../../sdk/backends/docker/client.js";

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const BASE_IMAGE = process.env.AGENTWS_BASE_IMAGE ?? "agentws-base:bookworm";

/**
 * Makes a Docker engine with the offline base image available to the tests: the one at DOCKER_HOST
 * when it answers, else the project's private dockerd (scripts/dockerd.sh, scripts/base-image.sh).
 * Resolves to null with the reason printed only when no engine can be started at all; with CI set
 * that throws instead, so a missing engine fails the run rather than skipping silently.
 */
export async function dockerEngine(): Promise<{ host: string } | null> {
  if (await answers()) {
    await ensureBaseImage();
    return { host: process.env.DOCKER_HOST ?? "default socket" };
  }
  try {
    const { stdout } = await run(path.join(ROOT, "scripts/dockerd.sh"), ["start"], { timeout: 120_000 });
    const m = /DOCKER_HOST=(\S+)/.exec(stdout);
    if (m) process.env.DOCKER_HOST = m[1];
  } catch (e) {
    // In CI an engine that cannot start is a failure, not a silent skip.
    if (process.env.CI)
      throw new Error(`no Docker engine at DOCKER_HOST and scripts/dockerd.sh could not start one: ${String((e as Error).message).slice(0, 400)}`);
    console.warn(
      `[docker tests] skipped: no Docker engine at DOCKER_HOST and scripts/dockerd.sh could not start one: ${String((e as Error).message).slice(0, 400)}`,
    );
    return null;
  }
  if (!(await answers())) {
    if (process.env.CI) throw new Error("scripts/dockerd.sh started but the engine does not answer");
    console.warn("[docker tests] skipped: scripts/dockerd.sh started but the engine does not answer");
    return null;
  }
  await ensureBaseImage();
  return { host: process.env.DOCKER_HOST! };
}

async function answers(): Promise<boolean> {
  try {
    await dockerClient().ping();
    return true;
  } catch {
    return false;
  }
}

async function ensureBaseImage(): Promise<void> {
  try {
    await dockerClient().getImage(BASE_IMAGE).inspect();
  } catch {
    // Building it is part of the setup, not a reason to skip: a failure here fails the tests loudly.
    await run(path.join(ROOT, "scripts/base-image.sh"), [BASE_IMAGE], { timeout: 600_000, env: process.env });
  }
}

/** Containers carrying a workspace-id label (to count copies). */
export async function containersFor(workspaceId: string): Promise<string[]> {
  const list = await dockerClient().listContainers({ all: true, filters: { label: [`agent-workspaces.workspace-id=${workspaceId}`] } });
  return list.map((c) => c.Id);
}
