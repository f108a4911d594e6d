import { promises as fs } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kubeClients } from "../../sdk/backends/kubernetes/client.js";

/**
 * The Kubernetes API client reuses its connections (client-node alone opens one per call), and
 * still authenticates every request. Against a local HTTP server standing in for the API server:
 * it counts connections and records each request's Authorization header.
 */
describe("Kubernetes API client: keep-alive connections", () => {
  let server: http.Server;
  let dir: string;
  let connections = 0;
  const auth: (string | undefined)[] = [];
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      auth.push(req.headers.authorization);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "ns", annotations: {} } }));
    });
    server.on("connection", () => connections++);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-k8s-ka-"));
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await fs.rm(dir, { recursive: true, force: true });
  });

  const kubeconfig = async (token: string) => {
    const file = path.join(dir, `${token}.yaml`);
    const { port } = server.address() as AddressInfo;
    await fs.writeFile(
      file,
      [
        "apiVersion: v1",
        "kind: Config",
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:" + port + "', insecure-skip-tls-verify: true}}]",
        `users: [{name: u, user: {token: ${token}}}]`,
        "contexts: [{name: x, context: {cluster: c, user: u}}]",
        "current-context: x",
      ].join("\n"),
    );
    return file;
  };

  it("sequential and concurrent calls share a few connections, each call carrying the credentials", async () => {
    const { core } = kubeClients({ kubeconfig: await kubeconfig("tok-a") });
    connections = 0;
    auth.length = 0;
    for (let i = 0; i < 20; i++) await core.readNamespacedPod({ name: "p", namespace: "ns" });
    expect(connections).toBe(1);
    await Promise.all(Array.from({ length: 5 }, () => core.readNamespacedPod({ name: "p", namespace: "ns" })));
    expect(connections).toBeLessThanOrEqual(5);
    expect(auth).toHaveLength(25);
    expect(new Set(auth)).toEqual(new Set(["Bearer tok-a"]));
  });

  it("a connection the server closed while idle is replaced, not reported as a failure", async () => {
    const { core } = kubeClients({ kubeconfig: await kubeconfig("tok-b") });
    await core.readNamespacedPod({ name: "p", namespace: "ns" });
    connections = 0;
    // As an API server does with a connection idle past its timeout.
    server.closeIdleConnections();
    await new Promise((r) => setTimeout(r, 50));
    const pod = await core.readNamespacedPod({ name: "p", namespace: "ns" });
    expect(pod.metadata?.name).toBe("p");
    expect(connections).toBe(1);
  });

  it("clients for other credentials authenticate as themselves", async () => {
    const a = kubeClients({ kubeconfig: await kubeconfig("tok-c") });
    const b = kubeClients({ kubeconfig: await kubeconfig("tok-d") });
    auth.length = 0;
    await a.core.readNamespacedPod({ name: "p", namespace: "ns" });
    await b.core.readNamespacedPod({ name: "p", namespace: "ns" });
    await a.core.readNamespacedPod({ name: "p", namespace: "ns" });
    expect(auth).toEqual(["Bearer tok-c", "Bearer tok-d", "Bearer tok-c"]);
  });
});
