/**
 * A second service process for the Kubernetes tests: a real K8sWorkspaceManager in its own process,
 * printing one JSON line with what it saw, then exiting WITHOUT disposing the manager (a service
 * that is restarted or crashes): the Pod stays for the next process to reattach to.
 *
 * Usage: node --import tsx test/support/k8s-child.ts '<json config>'
 *   kubeconfig, image, namespace, workspaceId; write: { path: content } written after getWorkspace.
 * Line: {pod, outcome, files: {path: sha256}} or {error}.
 */
import { createHash } from "node:crypto";
import { K8sWorkspaceManager } from "../../sdk/backends/kubernetes/index.js";
import type { K8sSandbox } from "../../sdk/backends/kubernetes/sandbox.js";

interface Config {
  kubeconfig: string;
  image: string;
  namespace: string;
  workspaceId: string;
  write?: Record<string, string>;
}

const cfg = JSON.parse(process.argv[2] ?? "{}") as Config;
const manager = new K8sWorkspaceManager({ kubeconfig: cfg.kubeconfig, image: cfg.image, namespace: cfg.namespace, ttl: 3600 });
try {
  const ws = await manager.getWorkspace("child-user", "child-agent", undefined, cfg.workspaceId);
  const sb = ws.getBackend();
  for (const [p, content] of Object.entries(cfg.write ?? {})) await sb.writeFile(p, content);
  const files: Record<string, string> = {};
  for (const p of Object.keys(cfg.write ?? {}))
    files[p] = createHash("sha256")
      .update(await sb.readFile(p))
      .digest("hex");
  process.stdout.write(`${JSON.stringify({ pod: (sb as unknown as K8sSandbox).podName, outcome: ws.ensureOutcome, files })}\n`);
} catch (e) {
  process.stdout.write(`${JSON.stringify({ error: String((e as Error).message ?? e) })}\n`);
}
process.exit(0);
