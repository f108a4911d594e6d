import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, expect, it, vi } from "vitest";
import { K8sDriver } from "../../../sdk/backends/kubernetes/driver.js";
import { K8sWorkspaceManager } from "../../../sdk/backends/kubernetes/index.js";
import { objectName } from "../../../sdk/backends/kubernetes/names.js";
import { uniqueId } from "../../contract/fixture.js";
import { k8sCluster, objectsFor } from "../../support/k8s-cluster.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const run = promisify(execFile);
const cluster = await k8sCluster();
// Restarting cluster components on a loaded 2-core machine takes a while.
vi.setConfig({ testTimeout: 300_000 });

/** Kills one component of the project's cluster (SIGKILL) and starts it again. */
const restart = (component: string) => run(path.join(ROOT, "scripts/k8s-cluster.sh"), ["restart", component], { timeout: 60_000 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Faults on the project's own cluster (they restart its processes): each ends with one Pod, one PVC and the files intact. */
describe.skipIf(!cluster?.own).sequential("Kubernetes backend under faults (the project's cluster)", () => {
  const c = cluster!;
  const spec = { kubeconfig: c.kubeconfig, image: c.image, namespace: c.namespace };
  const made: string[] = [];
  const id = () => {
    const w = uniqueId("kf");
    made.push(w);
    return w;
  };
  afterAll(async () => {
    const d = new K8sDriver(spec);
    await Promise.all(made.map((w) => d.destroy(w, { deleteData: true }).catch(() => undefined)));
  });

  it("the kubelet killed and restarted in the middle of a create", async () => {
    const w = id();
    const d = new K8sDriver(spec);
    const creating = d.create({ workspaceId: w, managedBy: "runtime" });
    // Kill it once the Pod object exists (bound to the node, maybe starting).
    for (let i = 0; i < 100 && !(await objectsFor(c, w)).pods.length; i++) await sleep(20);
    await restart("kubelet");
    await creating;
    expect(await objectsFor(c, w)).toEqual({ pods: [objectName(w)], pvcs: [objectName(w)] });
    const sb = await d.connect(w);
    await sb.writeFile("after-kubelet.txt", "ok");
    expect((await sb.readFile("after-kubelet.txt")).toString()).toBe("ok");
    await sb.close();
  });

  it("the API server restarted during getWorkspace (a resume)", async () => {
    const w = id();
    const m1 = new K8sWorkspaceManager({ ...spec, ttl: 3600 });
    const ws = await m1.getWorkspace("u", "a", undefined, w);
    await ws.getBackend().writeFile("data/kept.txt", "intact");
    await m1[Symbol.asyncDispose](); // pauses: the Pod goes, the PVC stays
    expect(await objectsFor(c, w)).toEqual({ pods: [], pvcs: [objectName(w)] });

    const m2 = new K8sWorkspaceManager({ ...spec, ttl: 3600 });
    try {
      const getting = m2.getWorkspace("u", "a", undefined, w);
      await restart("apiserver");
      const back = await getting;
      expect(back.ensureOutcome).toBe("resumed");
      expect((await back.getBackend().readFile("data/kept.txt")).toString()).toBe("intact");
      expect(await objectsFor(c, w)).toEqual({ pods: [objectName(w)], pvcs: [objectName(w)] });
    } finally {
      await m2[Symbol.asyncDispose]();
    }
  });
});
