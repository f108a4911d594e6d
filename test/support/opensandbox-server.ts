import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { BASE_IMAGE, dockerEngine } from "./docker-engine.js";

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
/** Sandbox image for tests: the offline base image, local to the engine (the server uses a local image as is). */
export const OPENSANDBOX_TEST_IMAGE = BASE_IMAGE;

/**
 * The real OpenSandbox server on the project's Docker engine (scripts/opensandbox-server.sh: the
 * pinned opensandbox-server from PyPI, our execd-compatible image), started when not running.
 * Sets OPEN_SANDBOX_DOMAIN. Resolves to null with the reason printed when it cannot be had; with CI
 * set that throws instead, so a missing server fails the run rather than skipping silently.
 */
export async function openSandboxServer(): Promise<{ domain: string } | null> {
  const fail = (why: string) => {
    if (process.env.CI) throw new Error(`[opensandbox tests] ${why}`);
    console.warn(`[opensandbox tests] skipped: ${why}`);
    return null;
  };
  if (!(await dockerEngine())) return fail("no Docker engine for the OpenSandbox server");
  try {
    const { stdout } = await run(path.join(ROOT, "scripts/opensandbox-server.sh"), ["start"], { timeout: 600_000, env: process.env });
    const m = /OPEN_SANDBOX_DOMAIN=(\S+)/.exec(stdout);
    if (!m) return fail("scripts/opensandbox-server.sh printed no OPEN_SANDBOX_DOMAIN");
    process.env.OPEN_SANDBOX_DOMAIN = m[1];
    return { domain: m[1]! };
  } catch (e) {
    return fail(`scripts/opensandbox-server.sh could not start the server: ${String((e as Error).message).slice(0, 400)}`);
  }
}
