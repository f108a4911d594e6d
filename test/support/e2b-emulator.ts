import { dockerClient } from "../../sdk/backends/docker/client.js";
import { E2BWorkspace } from "../../sdk/backends/e2b/index.js";
import { uniqueId, type WorkspaceFixture } from "../contract/fixture.js";
import { startE2BEmulator, type E2BEmulator } from "../emulators/e2b/server.js";
import { BASE_IMAGE, dockerEngine } from "./docker-engine.js";

export type { E2BEmulator } from "../emulators/e2b/server.js";

/**
 * The E2B emulator (test/emulators/e2b) in this test process, its sandboxes real containers on the
 * project's Docker engine. Null (with the reason printed) only when no engine can be had outside CI;
 * in CI a missing engine fails, as dockerEngine() does. Close it in afterAll: it removes its sandboxes.
 */
export async function e2bEmulator(): Promise<E2BEmulator | null> {
  if (!(await dockerEngine())) return null;
  return startE2BEmulator(dockerClient(), { baseImage: BASE_IMAGE });
}

/** Connection options pointing the unchanged e2b SDK at an emulator, for one team (api key). */
export function e2bConnection(emu: E2BEmulator, apiKey = "e2b_emulator_team_a"): { apiKey: string; apiUrl: string; sandboxUrl: string } {
  return { apiKey, apiUrl: emu.url, sandboxUrl: emu.url };
}

/** A contract-suite fixture: E2B workspaces on the emulator through the real SDK (MCP servers run from a bundle, with the sandbox's node). */
export function e2bFixture(env: () => { emu: E2BEmulator; apiKey?: string }): WorkspaceFixture {
  return {
    name: "e2b",
    async create(opts = {}) {
      const { emu, apiKey } = env();
      return new E2BWorkspace({
        workspaceId: opts.workspaceId ?? uniqueId("e2b"),
        ...e2bConnection(emu, apiKey),
        ...(opts.defaultMcps ? { defaultMcps: opts.defaultMcps } : {}),
        ...(opts.skillPaths ? { skillPaths: opts.skillPaths } : {}),
        ...(opts.egress ? { egress: opts.egress } : {}),
      });
    },
  };
}
