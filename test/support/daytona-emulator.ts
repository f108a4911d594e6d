import { DaytonaWorkspace } from "../../sdk/backends/daytona/index.js";
import { dockerClient } from "../../sdk/backends/docker/client.js";
import { DaytonaEmulator } from "../emulators/daytona/server.js";
import { uniqueId, type WorkspaceFixture } from "../contract/fixture.js";
import { BASE_IMAGE, dockerEngine } from "./docker-engine.js";

export { DaytonaEmulator };

/** The API key tests use; each key is one organization on the emulator. */
export const EMULATOR_API_KEY = "emulator-key-0123456789";

/**
 * Starts a Daytona emulator whose sandboxes are containers on the project's Docker engine
 * (scripts/dockerd.sh). Null, with the reason printed, when no engine can run here; under CI a
 * missing engine throws (dockerEngine does).
 */
export async function startDaytonaEmulator(options: { minuteMs?: number } = {}): Promise<DaytonaEmulator | null> {
  const engine = await dockerEngine();
  if (!engine) {
    console.warn("[daytona emulator] skipped: no Docker engine for its sandboxes");
    return null;
  }
  return new DaytonaEmulator({ docker: dockerClient(), image: BASE_IMAGE, ...options }).start();
}

/** The backend options that point the real SDK at an emulator. */
export function emulatorSpec(emulator: DaytonaEmulator, apiKey = EMULATOR_API_KEY): { apiKey: string; apiUrl: string; timeoutSeconds: number } {
  return { apiKey, apiUrl: emulator.apiUrl, timeoutSeconds: 120 };
}

/** Daytona workspaces on the emulator, for the shared contract suites (the MCP suite bundles its server into the sandbox). */
export function daytonaFixture(env: () => { emulator: DaytonaEmulator; track: (workspaceId: string) => void }): WorkspaceFixture {
  return {
    name: "daytona",
    async create(opts = {}) {
      const workspaceId = opts.workspaceId ?? uniqueId("dt");
      env().track(workspaceId);
      return new DaytonaWorkspace({
        workspaceId,
        ...emulatorSpec(env().emulator),
        ...(opts.defaultMcps ? { defaultMcps: opts.defaultMcps } : {}),
        ...(opts.skillPaths ? { skillPaths: opts.skillPaths } : {}),
        ...(opts.egress ? { egress: opts.egress } : {}),
      });
    },
  };
}
