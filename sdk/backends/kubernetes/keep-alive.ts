import { createHash } from "node:crypto";
import http from "node:http";
import https from "node:https";
import type { createConfiguration, KubeConfig, RequestContext, SecurityAuthentication } from "@kubernetes/client-node";
import { loadKubernetesClient } from "./sdk.js";

/** TLS material that tells one connection pool from another (an exec credential plugin may rotate a client certificate). */
const TLS_FIELDS = ["ca", "cert", "key", "pfx", "passphrase", "rejectUnauthorized", "servername"] as const;
/** Pools kept per API client: one per distinct TLS identity; a rotation past this many starts over. */
const MAX_POOLS = 8;

/**
 * API client configuration whose requests reuse their connections. client-node hands every request
 * a new Agent, so each API call pays a TCP and TLS handshake (about 20 ms against a local API
 * server, most of a small call). Its own authentication runs unchanged on every request (tokens,
 * exec plugins, client certificates); only the Agent it made is swapped for a keep-alive one with
 * the same TLS material. A proxied cluster keeps client-node's own agents.
 */
export function keepAliveConfiguration(kc: KubeConfig, server: string): ReturnType<typeof createConfiguration> {
  const pools = new Map<string, https.Agent | http.Agent>();
  const auth: SecurityAuthentication = {
    getName: () => kc.getName(),
    async applySecurityAuthentication(context: RequestContext): Promise<void> {
      await kc.applySecurityAuthentication(context);
      const made = context.getAgent();
      // Only the two plain kinds client-node makes without a proxy; anything else is left alone.
      if (!made || (made.constructor !== https.Agent && made.constructor !== http.Agent)) return;
      const options = (made as https.Agent & { options: Record<string, unknown> }).options;
      const tls = made instanceof https.Agent;
      const key = createHash("sha256")
        .update(JSON.stringify([tls, ...TLS_FIELDS.map((f) => (options[f] === undefined ? null : String(options[f])))]))
        .digest("hex");
      let pool = pools.get(key);
      if (!pool) {
        if (pools.size >= MAX_POOLS) {
          for (const p of pools.values()) p.destroy();
          pools.clear();
        }
        const picked: Record<string, unknown> = {};
        for (const f of TLS_FIELDS) if (options[f] !== undefined) picked[f] = options[f];
        // Idle sockets are closed by the process exiting, not kept alive by the pool (unref'd by Node).
        pool = tls ? new https.Agent({ ...picked, keepAlive: true }) : new http.Agent({ keepAlive: true });
        pools.set(key, pool);
      }
      made.destroy();
      context.setAgent(pool);
    },
  };
  const { createConfiguration: configure, ServerConfiguration } = loadKubernetesClient();
  return configure({ baseServer: new ServerConfiguration(server, {}), authMethods: { default: auth } });
}
