import type Docker from "dockerode";
import { requirePeer, type PeerImporter } from "../../util/peer.js";

/**
 * dockerode, an optional peer dependency, loaded on first use: importing the SDK for another
 * backend never loads it, and a missing install is an error saying `npm install dockerode`.
 */
export const loadDockerode = (importer?: PeerImporter): typeof Docker => requirePeer<typeof Docker>("dockerode", "the docker backend", importer);
const load = (): typeof Docker => loadDockerode();

/**
 * A dockerode client for a socket path, or for DOCKER_HOST / the default socket. dockerode reads
 * DOCKER_HOST only when given no options, so a unix:// DOCKER_HOST is turned into a socketPath here.
 */
export function dockerClient(socketPath?: string): Docker {
  const Docker = load();
  if (socketPath) return new Docker({ socketPath: socketPath.replace(/^unix:\/\//, "") });
  const host = process.env.DOCKER_HOST;
  if (host?.startsWith("unix://")) return new Docker({ socketPath: host.slice("unix://".length) });
  return new Docker();
}

/** Clients are cheap but keep-alive agents are not: one per socket per process. */
const clients = new Map<string, Docker>();
export function sharedDockerClient(socketPath?: string): Docker {
  const key = socketPath ?? `env:${process.env.DOCKER_HOST ?? ""}`;
  let c = clients.get(key);
  if (!c) {
    c = dockerClient(socketPath);
    clients.set(key, c);
  }
  return c;
}

export function statusCode(e: unknown): number | undefined {
  return (e as { statusCode?: number })?.statusCode;
}
