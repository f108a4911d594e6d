/**
 * The manager side of the in-cluster test: run INSIDE a Pod of the cluster with a ServiceAccount
 * (no kubeconfig anywhere: the driver falls back to the in-cluster configuration), it provisions a
 * workspace, uses it, checks what its Role does not allow, and removes the workspace again.
 * Prints one JSON line: {ok, wrote, read, secretsForbidden, config} or {error}.
 *
 * Usage (in the Pod): node --import tsx test/support/k8s-incluster.ts '<json {image, namespace, workspaceId}>'
 */
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { K8sWorkspace } from "../../sdk/backends/kubernetes/index.js";

const cfg = JSON.parse(process.argv[2] ?? "{}") as { image: string; namespace: string; workspaceId: string };
const out: Record<string, unknown> = {};
try {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  out.config = kc.getCurrentCluster()?.name;
  // The Role grants Pods, PVCs and exec only: Secrets are refused.
  out.secretsForbidden = await kc
    .makeApiClient(CoreV1Api)
    .listNamespacedSecret({ namespace: cfg.namespace })
    .then(
      () => false,
      (e: { code?: number }) => e.code === 403,
    );
  const ws = new K8sWorkspace({ image: cfg.image, namespace: cfg.namespace, workspaceId: cfg.workspaceId, deletePvcOnClose: true });
  await ws.initialize();
  await ws.getBackend().writeFile("data/from-inside.txt", "hello from a pod");
  out.wrote = true;
  out.read = (await ws.getBackend().readFile("data/from-inside.txt")).toString();
  out.exec = (await ws.getBackend().exec(["sh", "-c", "echo $((6*7))"])).stdout.toString().trim();
  await ws.close();
  out.ok = true;
} catch (e) {
  out.error = String((e as Error).message ?? e).slice(0, 1000);
}
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(0);
