import type { Daytona, DaytonaConfig } from "@daytonaio/sdk";
import { requirePeer, type PeerImporter } from "../../util/peer.js";
import type { DaytonaBackendSpec } from "./schema.js";

type DaytonaModule = typeof import("@daytonaio/sdk");

/** `@daytonaio/sdk`, an optional peer, loaded on first use; a missing install says `npm install @daytonaio/sdk`. */
export const loadDaytona = (importer?: PeerImporter): DaytonaModule => requirePeer<DaytonaModule>("@daytonaio/sdk", "the daytona backend", importer);

export const DEFAULT_API_URL = "https://app.daytona.io/api";

/**
 * A client for a spec. The endpoint is always passed explicitly (the SDK throws when the process
 * env and a cwd `.env` both name one), and state changes are polled rather than streamed over
 * socket.io: no long-lived connection per driver, and it works against any endpoint.
 */
export function daytonaClient(spec: Pick<DaytonaBackendSpec, "apiKey" | "apiUrl" | "target">): Daytona {
  const { Daytona } = loadDaytona();
  const config: DaytonaConfig = {
    apiUrl: spec.apiUrl ?? process.env.DAYTONA_API_URL ?? DEFAULT_API_URL,
    useDeprecatedPolling: true,
  };
  const apiKey = spec.apiKey ?? process.env.DAYTONA_API_KEY;
  if (apiKey) config.apiKey = apiKey;
  const target = spec.target ?? process.env.DAYTONA_TARGET;
  if (target) config.target = target;
  return new Daytona(config);
}
