import { dockerClient } from "../../sdk/backends/docker/client.js";
import { DaytonaEmulator } from "../emulators/daytona/server.js";
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
