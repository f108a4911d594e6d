import type { Stack } from "@pulumi/pulumi/automation/index.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { objectName } from "../../sdk/backends/kubernetes/names.js";
import { FLEET_OUTPUT_NAME, FleetOutputsSchema } from "../../sdk/contract/fleet.js";
import { WorkspaceFleet } from "../../providers/index.js";
import { StepCollector } from "../../sdk/cli/engine.js";
import { k8sCluster, objectsFor } from "../support/k8s-cluster.js";
import { ensureBuilt, makeSandbox, pulumiBinDir, testStack, type Sandbox } from "./pulumi-helpers.js";

// The real engine and a real cluster on a shared 2-core machine: operations take seconds each.
vi.setConfig({ testTimeout: 400_000, hookTimeout: 900_000 });

/** The kubernetes stack's resources on the real engine and the real cluster (the same driver the runtime uses). */
const cluster = await k8sCluster();
let sb: Sandbox;
let stack: Stack;
const ID = `pulumi-k8s-${process.pid}`;
let backend: Record<string, unknown> = {};
let tags: Record<string, string> = { team: "a" };

describe.skipIf(!cluster).sequential("kubernetes workspace on the real Pulumi engine", () => {
  const c = cluster!;
  const pvc = () => c.core.readNamespacedPersistentVolumeClaim({ name: objectName(ID), namespace: c.namespace });
  const podUid = async () => (await c.core.readNamespacedPod({ name: objectName(ID), namespace: c.namespace })).metadata!.uid;
  beforeAll(async () => {
    const bin = pulumiBinDir();
    ensureBuilt();
    backend = { kind: "kubernetes", kubeconfig: c.kubeconfig, image: c.image, namespace: c.namespace, storageSize: "1Gi" };
    sb = makeSandbox("k8s");
    stack = await testStack(
      sb,
      "kubernetes",
      async () => {
        const fleet = new WorkspaceFleet("fleet", { workspaces: [{ workspaceId: ID, backend: backend as never, tags }], deleteData: true });
        return { [FLEET_OUTPUT_NAME]: fleet.workspaces };
      },
      bin,
    );
  });

  afterAll(async () => {
    await stack?.destroy({ color: "never" }).catch(() => undefined);
    sb?.dispose();
  });

  it("up makes one Pod and one PVC; tags patch labels in place; storage size and image changes replace", async () => {
    const up = await stack.up({ color: "never" });
    const fleet = FleetOutputsSchema.parse(up.outputs[FLEET_OUTPUT_NAME]!.value);
    expect(fleet[ID]!.backend.kind).toBe("kubernetes");
    expect(await objectsFor(c, ID)).toEqual({ pods: [objectName(ID)], pvcs: [objectName(ID)] });
    const uid = await podUid();

    tags = { team: "b" };
    const t = await stack.up({ color: "never" });
    expect(t.summary.resourceChanges).toMatchObject({ update: 1 });
    expect((await pvc()).metadata!.labels!["tag.agent-workspaces/team"]).toBe("b");
    expect(await podUid()).toBe(uid);

    backend = { ...backend, storageSize: "2Gi" };
    // A new PVC with deleteData on deletes the files: refused without the opt-in, then applied with it.
    await expect(stack.up({ color: "never" })).rejects.toThrow(/deletes its files/);
    process.env.AGENTWS_ALLOW_DATA_LOSS = "1";
    const col = new StepCollector();
    let r: Awaited<ReturnType<typeof stack.up>>;
    try {
      await stack.preview({ onEvent: col.onEvent, color: "never" });
      expect(col.model().changes).toMatchObject([
        { op: "replace", workspaceId: ID, kind: "kubernetes", data: "deleted", fields: [{ path: "backend.storageSize", replace: true }] },
      ]);
      r = await stack.up({ color: "never" });
    } finally {
      delete process.env.AGENTWS_ALLOW_DATA_LOSS;
    }
    expect(r.summary.resourceChanges).toMatchObject({ replace: 1 });
    expect((await pvc()).spec!.resources!.requests!.storage).toBe("2Gi");
    expect(await podUid()).not.toBe(uid);
  });

  it("refresh notices a Pod or a PVC deleted out of band; destroy leaves no Pod, PVC or PV", async () => {
    await c.core.deleteNamespacedPod({ name: objectName(ID), namespace: c.namespace, gracePeriodSeconds: 0 });
    for (let i = 0; i < 100 && (await objectsFor(c, ID)).pods.length; i++) await new Promise((r) => setTimeout(r, 100));
    await stack.refresh({ color: "never" });
    // The refreshed state says the Pod is gone (the PVC, and so the workspace, is still there).
    const state = async () =>
      ((await stack.exportStack()).deployment.resources as { type: string; outputs?: { state?: string } }[]).find(
        (r) => r.type === "pulumi-nodejs:dynamic/agentws:Workspace",
      )?.outputs?.state;
    expect(await state()).toBe("stopped");
    await c.core.deleteNamespacedPersistentVolumeClaim({ name: objectName(ID), namespace: c.namespace });
    for (let i = 0; i < 200 && (await objectsFor(c, ID)).pvcs.length; i++) await new Promise((r) => setTimeout(r, 100));
    const gone = await stack.refresh({ color: "never" });
    expect(gone.summary.resourceChanges).toMatchObject({ delete: 1 });

    await stack.up({ color: "never" });
    const pv = (await pvc()).spec!.volumeName!;
    await stack.destroy({ color: "never" });
    expect(await objectsFor(c, ID)).toEqual({ pods: [], pvcs: [] });
    for (
      let i = 0;
      i < 100 &&
      (await c.core.readPersistentVolume({ name: pv }).then(
        () => true,
        () => false,
      ));
      i++
    )
      await new Promise((r) => setTimeout(r, 200));
    await expect(c.core.readPersistentVolume({ name: pv })).rejects.toMatchObject({ code: 404 });
  });
});
