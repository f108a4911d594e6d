import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, expect, it, vi } from "vitest";
import { K8sDriver } from "../../../sdk/backends/kubernetes/driver.js";
import { K8sWorkspaceManager } from "../../../sdk/backends/kubernetes/index.js";
import { ANNOTATIONS, objectName } from "../../../sdk/backends/kubernetes/names.js";
import type { K8sSandbox } from "../../../sdk/backends/kubernetes/sandbox.js";
import { K8sWorkspace } from "../../../sdk/backends/kubernetes/index.js";
import { uniqueId, type WorkspaceFixture } from "../../contract/fixture.js";
import { expectCode } from "../../contract/helpers.js";
import { k8sCluster, objectsFor, type K8sCluster } from "../../support/k8s-cluster.js";
import { runContractSuites } from "../../support/sandbox-fixtures.js";
import { ECHO_SERVER_IN_WORKSPACE, echoServerBundle } from "../../fixtures/mcp/bundle.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const run = promisify(execFile);
const cluster = await k8sCluster();
// Child processes (tsx) and Pod starts on a loaded 2-core machine take a while.
vi.setConfig({ testTimeout: 300_000 });
const sha = (b: Uint8Array | string) => createHash("sha256").update(b).digest("hex");

/** Runs test/support/k8s-child.ts: a manager in a process of its own, which exits without disposing. */
async function child(
  c: K8sCluster,
  workspaceId: string,
  write: Record<string, string> = {},
): Promise<{ pod?: string; outcome?: string; files?: Record<string, string>; error?: string }> {
  const cfg = { kubeconfig: c.kubeconfig, image: c.image, namespace: c.namespace, workspaceId, write };
  const { stdout } = await run(process.execPath, ["--import", "tsx", path.join(ROOT, "test/support/k8s-child.ts"), JSON.stringify(cfg)], {
    cwd: ROOT,
    timeout: 180_000,
  });
  return JSON.parse(stdout.trim().split("\n").pop()!) as { pod?: string; error?: string };
}

describe.skipIf(!cluster)("Kubernetes backend (real cluster)", () => {
  const c = cluster!;
  const made = new Set<string>();
  const id = (p = "k8") => {
    const w = uniqueId(p);
    made.add(w);
    return w;
  };
  const spec = { kubeconfig: c.kubeconfig, image: c.image, namespace: c.namespace };
  const driver = (extra: Record<string, unknown> = {}) => new K8sDriver({ ...spec, ...extra });
  const podUid = async (w: string) => (await c.core.readNamespacedPod({ name: objectName(w), namespace: c.namespace })).metadata!.uid!;
  afterAll(async () => {
    const d = driver();
    await Promise.all([...made].map((w) => d.destroy(w, { deleteData: true }).catch(() => undefined)));
  });

  const fixture: WorkspaceFixture = {
    name: "kubernetes",
    async create(opts = {}) {
      const workspaceId = opts.workspaceId ?? id("kc");
      made.add(workspaceId);
      return new K8sWorkspace({
        ...spec,
        workspaceId,
        ...(opts.defaultMcps ? { defaultMcps: opts.defaultMcps } : {}),
        ...(opts.skillPaths ? { skillPaths: opts.skillPaths } : {}),
        ...(opts.egress ? { egress: opts.egress } : {}),
      });
    },
  };
  describe("contract", () => {
    runContractSuites(fixture);
  });

  it("names objects by a stable DNS-1123 name and labels them with the identity", async () => {
    expect(objectName("Abc_DEF.x")).toBe(objectName("Abc_DEF.x"));
    expect(objectName("Abc_DEF.x")).not.toBe(objectName("abc_def.x"));
    expect(objectName("Abc_DEF.x")).toMatch(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);
    expect(objectName("x".repeat(63)).length).toBeLessThanOrEqual(63);
    const w = id();
    await driver().create({ workspaceId: w, userId: "someone@example.com", agentId: "coder", managedBy: "runtime", tags: { team: "a" } });
    const pvc = await c.core.readNamespacedPersistentVolumeClaim({ name: objectName(w), namespace: c.namespace });
    expect(pvc.metadata!.labels).toMatchObject({
      "agent-workspaces.workspace-id": w,
      "agent-workspaces.agent-id": "coder",
      "agent-workspaces.managed-by": "runtime",
      "tag.agent-workspaces/team": "a",
    });
    // An e-mail is no label value: the label holds a hash, the annotation the exact id.
    expect(pvc.metadata!.labels!["agent-workspaces.user-id"]).toMatch(/^h-[0-9a-f]{40}$/);
    expect(pvc.metadata!.annotations!["agent-workspaces/user-id"]).toBe("someone@example.com");
    expect((await driver().list({ userId: "someone@example.com" })).map((d) => d.workspaceId)).toContain(w);
  });

  it("hardens the Pod: no token, no capabilities, no escalation, a non-root uid", async () => {
    const w = id();
    const d = driver();
    await d.create({ workspaceId: w, managedBy: "runtime" });
    const pod = await c.core.readNamespacedPod({ name: objectName(w), namespace: c.namespace });
    const ctr = pod.spec!.containers[0]!;
    expect(pod.spec!.automountServiceAccountToken).toBe(false);
    expect(ctr.securityContext).toMatchObject({ allowPrivilegeEscalation: false, privileged: false, runAsNonRoot: true, capabilities: { drop: ["ALL"] } });
    const sb = await d.connect(w);
    try {
      const r = await sb.exec([
        "sh",
        "-c",
        "id -u; grep CapEff /proc/self/status; ls /var/run/secrets/kubernetes.io 2>&1 || true; grep NoNewPrivs /proc/self/status",
      ]);
      const out = r.stdout.toString();
      expect(out.split("\n")[0]).toBe("1000");
      expect(out).toMatch(/CapEff:\s+0000000000000000/);
      expect(out).toMatch(/No such file or directory/);
      expect(out).toMatch(/NoNewPrivs:\s+1/);
      // The volume is the workspace user's: it can write at the root of the tree.
      await sb.writeFile("owned.txt", "x");
    } finally {
      await sb.close();
    }
  });

  it("N racing creates and a second driver end with one Pod and one PVC", async () => {
    const w = id();
    await Promise.all([0, 1, 2].map(() => driver().create({ workspaceId: w, userId: "u", managedBy: "runtime" })));
    expect(await objectsFor(c, w)).toEqual({ pods: [objectName(w)], pvcs: [objectName(w)] });
  });

  it("touches a PVC the Pod keeps waiting on, and names it in the timeout", async () => {
    // A storage class no provisioner serves: the claim stays Pending, the Pod unschedulable.
    const w = id();
    const stuck = driver({ storageClassName: "agentws-no-provisioner", readinessTimeoutMs: 23_000 });
    let requeued: string | undefined;
    const watching = (async () => {
      for (let i = 0; i < 120 && !requeued; i++) {
        await new Promise((r) => setTimeout(r, 200));
        const pvc = await c.core.readNamespacedPersistentVolumeClaim({ name: objectName(w), namespace: c.namespace }).catch(() => undefined);
        requeued = pvc?.metadata?.annotations?.[ANNOTATIONS.requeued];
      }
    })();
    await expectCode(
      stuck.create({ workspaceId: w, managedBy: "runtime" }),
      "timeout",
      new RegExp(`unbound immediate PersistentVolumeClaims.*\\(PVC ${c.namespace}/${objectName(w)} Pending, storage class agentws-no-provisioner\\)`),
    );
    await watching;
    expect(requeued).toBe("1");
    expect(await objectsFor(c, w)).toEqual({ pods: [], pvcs: [] });
  });

  it("a readiness timeout (an image that is not there) leaves no Pod, and no PVC unless it held data", async () => {
    const w = id();
    const bad = driver({ image: "agentws.local/not-there:1", imagePullPolicy: "IfNotPresent", readinessTimeoutMs: 4000 });
    await expectCode(bad.create({ workspaceId: w, managedBy: "runtime" }), "timeout", /did not run within 4000 ms/);
    expect(await objectsFor(c, w)).toEqual({ pods: [], pvcs: [] });
    // With data on the PVC (a paused workspace), the failed resume keeps the PVC.
    const good = driver();
    await good.create({ workspaceId: w, managedBy: "runtime" });
    const sb = await good.connect(w);
    await sb.writeFile("data.txt", "precious");
    await sb.close();
    await good.pause(w);
    await expect(bad.resume(w)).rejects.toMatchObject({ code: "timeout" });
    expect(await objectsFor(c, w)).toEqual({ pods: [], pvcs: [objectName(w)] });
    await good.resume(w);
    const again = await good.connect(w);
    expect((await again.readFile("data.txt")).toString()).toBe("precious");
    await again.close();
  });

  it("pause deletes the Pod and keeps the PVC; resume brings every file's checksum and the MCP registrations back", async () => {
    const w = id();
    const ws = await fixture.create({ workspaceId: w });
    await ws.initialize();
    const sb = ws.getBackend();
    const files: Record<string, string> = {};
    for (let i = 0; i < 20; i++) {
      const data = randomBytes(1000 + i * 5000);
      const rel = `data/f${i}.bin`;
      await sb.writeFile(rel, data);
      files[rel] = sha(data);
    }
    await sb.writeFile(ECHO_SERVER_IN_WORKSPACE, await echoServerBundle());
    await ws.addMcp({ name: "echo", transport: { type: "stdio", command: "node", args: [ECHO_SERVER_IN_WORKSPACE] } });
    await ws.addMcp({ name: "web", transport: { type: "http", url: "http://127.0.0.1:9/mcp" } }, { agentId: "a1" });
    const mcpFile = (await sb.readFile(".mcp")).toString();
    await ws.close(); // teardown "pause": the Pod goes, the PVC stays
    expect(await objectsFor(c, w)).toEqual({ pods: [], pvcs: [objectName(w)] });
    expect((await driver().find(w))!.state).toBe("paused");

    const back = new K8sWorkspace({ ...spec, workspaceId: w });
    await back.initialize();
    expect(back.ensureOutcome).toBe("resumed");
    const sb2 = back.getBackend();
    for (const [rel, sum] of Object.entries(files)) expect(sha(await sb2.readFile(rel))).toBe(sum);
    expect((await sb2.readFile(".mcp")).toString()).toBe(mcpFile);
    const names = (await back.listMcps()).map((m) => m.name).sort();
    expect(names).toContain("echo");
    expect((await back.listMcps({ agentId: "a1" })).map((m) => m.name)).toContain("web");
    await back.close();
  });

  it("deletePvcOnClose: false keeps the PVC on close, true removes Pod and PVC", async () => {
    const keep = id();
    const a = new K8sWorkspace({ ...spec, workspaceId: keep, deletePvcOnClose: false, teardown: "destroy" });
    await a.initialize();
    await a.getBackend().writeFile("k.txt", "kept");
    await a.close();
    expect(await objectsFor(c, keep)).toEqual({ pods: [], pvcs: [objectName(keep)] });
    const a2 = new K8sWorkspace({ ...spec, workspaceId: keep });
    await a2.initialize();
    expect((await a2.getBackend().readFile("k.txt")).toString()).toBe("kept");
    await a2.close();

    const drop = id();
    const b = new K8sWorkspace({ ...spec, workspaceId: drop, deletePvcOnClose: true });
    await b.initialize();
    await b.getBackend().writeFile("d.txt", "gone");
    const pv = (await c.core.readNamespacedPersistentVolumeClaim({ name: objectName(drop), namespace: c.namespace })).spec!.volumeName!;
    await b.close();
    expect(await objectsFor(c, drop)).toEqual({ pods: [], pvcs: [] });
    // The Delete reclaim policy removes the volume too.
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

  it("a Pod deleted out of band is made again on the same PVC by the next access", async () => {
    const w = id();
    const ws = await fixture.create({ workspaceId: w });
    await ws.initialize();
    await ws.getBackend().writeFile("survive.txt", "yes");
    const before = await podUid(w);
    await c.core.deleteNamespacedPod({ name: objectName(w), namespace: c.namespace, gracePeriodSeconds: 0 });
    // The Pod leaves the API at once while the kubelet still tears its container down, so the first
    // accesses may still reach the old runner. Once it dies, the next access makes a new Pod on the
    // same PVC: every access in between answers, with the same file.
    const uidNow = () =>
      c.core.readNamespacedPod({ name: objectName(w), namespace: c.namespace }).then(
        (p) => p.metadata?.uid,
        () => undefined,
      );
    let now: string | undefined;
    for (let i = 0; i < 300; i++) {
      expect((await ws.getBackend().readFile("survive.txt")).toString()).toBe("yes");
      now = await uidNow();
      if (now && now !== before) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(now).toBeDefined();
    expect(now).not.toBe(before);
    await ws.close();
    // A fresh handle after an out-of-band delete recreates it as well.
    await driver().resume(w);
    await c.core.deleteNamespacedPod({ name: objectName(w), namespace: c.namespace, gracePeriodSeconds: 0 });
    const again = await fixture.create({ workspaceId: w });
    await again.initialize();
    expect((await again.getBackend().readFile("survive.txt")).toString()).toBe("yes");
    await again.close();
    expect(await objectsFor(c, w)).toEqual({ pods: [], pvcs: [objectName(w)] });
  });

  it("a new process reattaches to the same Pod and files", async () => {
    const w = id();
    const first = await child(c, w, { "data/a.txt": "from the first process", "notes.md": "# hi" });
    expect(first.error).toBeUndefined();
    expect(first.outcome).toBe("created");
    const uid = await podUid(w);
    const second = await child(c, w);
    expect(second.outcome).toBe("reattached");
    expect(await podUid(w)).toBe(uid);
    const m = new K8sWorkspaceManager({ ...spec, ttl: 3600 });
    try {
      const ws = await m.getWorkspace("child-user", "child-agent", undefined, w);
      expect(ws.ensureOutcome).toBe("reattached");
      expect(sha(await ws.getBackend().readFile("data/a.txt"))).toBe(first.files!["data/a.txt"]);
      expect(await podUid(w)).toBe(uid);
    } finally {
      await m[Symbol.asyncDispose]();
    }
  });

  it("two managers in two processes racing one id end with one Pod and one PVC", async () => {
    const w = id();
    const [a, b] = await Promise.all([child(c, w, { "a.txt": "a" }), child(c, w, { "b.txt": "b" })]);
    expect(a.error).toBeUndefined();
    expect(b.error).toBeUndefined();
    expect([a.outcome, b.outcome].sort()).toEqual(expect.arrayContaining([expect.stringMatching(/created|reattached/)]));
    expect(await objectsFor(c, w)).toEqual({ pods: [objectName(w)], pvcs: [objectName(w)] });
    const sb = await driver().connect(w);
    expect((await sb.readFile("a.txt")).toString()).toBe("a");
    expect((await sb.readFile("b.txt")).toString()).toBe("b");
    await sb.close();
  });

  it("moves 20 MiB both ways through the runner, and exec keeps exit codes, stderr, stdin and timeouts", async () => {
    const w = id();
    const d = driver();
    await d.create({ workspaceId: w, managedBy: "runtime" });
    const sb: K8sSandbox = await d.connect(w);
    try {
      const big = randomBytes(20 * 1024 * 1024);
      await sb.writeFile("big.bin", big);
      expect((await sb.exec(["sha256sum", "big.bin"])).stdout.toString().split(" ")[0]).toBe(sha(big));
      expect(sha(await sb.readFile("big.bin"))).toBe(sha(big));
      const r = await sb.exec(["sh", "-c", 'read x; echo "got $x"; echo oops >&2; exit 7'], { stdin: "abc\n" });
      expect([r.exitCode, r.stdout.toString(), r.stderr.toString()]).toEqual([7, "got abc\n", "oops\n"]);
      const t = await sb.exec(["sleep", "30"], { timeoutMs: 300 });
      expect(t.timedOut).toBe(true);
      expect((await sb.exec(["no-such-binary"])).exitCode).toBe(127);
    } finally {
      await sb.close();
    }
  });
});
