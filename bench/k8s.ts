/**
 * Kubernetes backend figures on a real cluster, each a median against a baseline measured in the same run:
 *   - cold create (PVC Bound + Pod Running) by driver.create vs `kubectl apply` of the same manifests + `kubectl wait` (goal ≤ 1x),
 *     the mean over start times spread across the kubelet's 1 s status tick (see below);
 *   - exec of `true` through the runner (one long-lived exec websocket) vs `kubectl exec ... true` (goal ≤ 0.5x);
 *   - a 20 MiB upload through the runner vs `kubectl cp` of the same file (goal ≤ 1x);
 *   - resume after an idle eviction (a manager's getWorkspace once the sweeper paused it: Pod made again, runner
 *     reconnected) vs `kubectl apply` + `kubectl wait` of the Pod alone;
 *   - `up` of a 20-workspace fleet on the cluster vs the same engine on 20 trivial dynamic resources (the floor).
 * Cluster: KUBECONFIG (+ AGENTWS_K8S_IMAGE), else the project's (scripts/k8s-cluster.sh up).
 * Run: npx tsx bench/k8s.ts [rounds]   (BENCH_FLEET=20; BENCH_FLEET=0 skips the fleet row)
 */
import { execFile, execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import * as pulumi from "@pulumi/pulumi";
import type { PulumiFn } from "@pulumi/pulumi/automation/index.js";
import { K8sDriver } from "../sdk/backends/kubernetes/driver.js";
import { K8sWorkspaceManager } from "../sdk/backends/kubernetes/index.js";
import { podManifest, pvcManifest } from "../sdk/backends/kubernetes/manifests.js";
import { objectName } from "../sdk/backends/kubernetes/names.js";
import { KubernetesBackendSchema } from "../sdk/backends/kubernetes/schema.js";
import { openStack } from "../sdk/cli/engine.js";
import { WorkspaceFleet } from "../providers/index.js";
import { k8sCluster } from "../test/support/k8s-cluster.js";

const ROOT = join(import.meta.dirname, "..");
const ROUNDS = Number(process.argv[2] ?? 10);
const FLEET = Number(process.env.BENCH_FLEET ?? 20);
const run = promisify(execFile);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (v: number) => (v >= 10_000 ? `${(v / 1000).toFixed(2)} s` : `${v.toFixed(1)} ms`);

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** One figure: medians unless `by` says otherwise (then `note` says which, and why). */
function row(
  name: string,
  subject: number[],
  baseline: number[],
  baselineName: string,
  goal?: number,
  o: { by?: (xs: number[]) => number; note?: string } = {},
): void {
  const by = o.by ?? median;
  const ratio = by(subject) / by(baseline);
  const notes = [...(goal === undefined ? [] : [`goal ≤ ${goal}x: ${ratio <= goal ? "met" : "NOT met"}`]), ...(o.note ? [o.note] : [])];
  console.log(
    `${name.padEnd(40)} ${ms(by(subject)).padStart(10)}  vs ${baselineName} ${ms(by(baseline))}  → ${ratio.toFixed(2)}x${notes.length ? `  (${notes.join("; ")})` : ""}`,
  );
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

/** Alternates subject and baseline so drift hits both alike; `warm` rounds first, not counted. */
async function paired(n: number, subject: () => Promise<unknown>, baseline: () => Promise<unknown>, warm = 2): Promise<[number[], number[]]> {
  for (let i = 0; i < warm; i++) {
    await subject();
    await baseline();
  }
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < n; i++) {
    if (i % 2) {
      a.push(await timed(subject));
      b.push(await timed(baseline));
    } else {
      b.push(await timed(baseline));
      a.push(await timed(subject));
    }
  }
  return [a, b];
}

const cluster = await k8sCluster();
if (!cluster) throw new Error("no cluster (see the reason above)");
const c = cluster;
const kubectlBin = process.env.AGENTWS_KUBECTL ?? execFileSync(join(ROOT, "scripts/k8s-cluster.sh"), ["kubectl-path"], { encoding: "utf8" }).trim();
const kubectl = (...args: string[]) => run(kubectlBin, ["--kubeconfig", c.kubeconfig, "-n", c.namespace, ...args], { maxBuffer: 64 << 20 });
// A small CPU request, so the cold-create rounds' Pods (kept until the end) all fit a 2-CPU node.
const specInput = { kubeconfig: c.kubeconfig, image: c.image, namespace: c.namespace, requests: { cpu: "10m", memory: "64Mi" } };
const spec = KubernetesBackendSchema.parse({ kind: "kubernetes", ...specInput });
const driver = new K8sDriver(specInput);
const tag = randomBytes(3).toString("hex");
const tmp = mkdtempSync(join(tmpdir(), "agentws-k8s-bench-"));

/** The same objects the driver makes, applied by kubectl under another name. */
function manifestsFile(workspaceId: string, parts: "all" | "pod"): string {
  const identity = { workspaceId, managedBy: "runtime" };
  const docs = [...(parts === "all" ? [pvcManifest(spec, identity)] : []), podManifest(spec, identity, false)];
  const file = join(tmp, `${workspaceId}-${parts}.json`);
  writeFileSync(file, JSON.stringify({ apiVersion: "v1", kind: "List", items: docs }));
  return file;
}

async function main(): Promise<void> {
  console.log(`bench/k8s: medians, ${ROUNDS} rounds, cluster ${c.kubeconfig}, image ${c.image}`);
  const cleanup: string[] = [];
  try {
    // 1. Cold create. The kubelet reports container changes on its 1 s relist tick, so a Pod's start
    // time is quantized (2 s or 3 s here, as its init container exits before or after a tick). A round
    // begun right after the previous one ends starts locked to that tick, so every round would meet it
    // at the same phase, and the figure would be a coin flip. Each pair starts at the same offset after
    // a tick instead, the offsets spread over the second; their mean is the figure that counts.
    let n = 0;
    const create: number[] = [];
    const apply: number[] = [];
    const phases = Math.max(12, 2 * ROUNDS);
    const afterTick = (phase: number) => new Promise((r) => setTimeout(r, Math.round((phase / phases) * 1000)));
    const ours = async () => {
      const w = `bench-${tag}-d${n++}`;
      cleanup.push(w);
      await driver.create({ workspaceId: w, managedBy: "runtime" });
    };
    const theirs = async () => {
      const w = `bench-${tag}-k${n++}`;
      cleanup.push(w);
      await kubectl("apply", "-f", manifestsFile(w, "all"));
      await kubectl("wait", "--for=condition=Ready", `pod/${objectName(w)}`, "--timeout=180s");
    };
    await ours();
    await theirs();
    for (let i = 0; i < phases; i++) {
      // Both ends of a pair start right after a Pod turned Running (a tick), then wait the same offset.
      for (const [fn, into] of (i % 2
        ? [
            [theirs, apply],
            [ours, create],
          ]
        : [
            [ours, create],
            [theirs, apply],
          ]) as [() => Promise<void>, number[]][]) {
        await afterTick(i);
        into.push(await timed(fn));
      }
    }
    row("cold create (PVC + Pod Running)", create, apply, "kubectl apply + wait", 1, {
      by: mean,
      note: `means over ${phases} start phases; medians ${ms(median(create))} vs ${ms(median(apply))}`,
    });
    await Promise.all(cleanup.splice(0).map((w) => driver.destroy(w, { deleteData: true })));

    // 2. Exec and upload on one workspace.
    const w = `bench-${tag}-x`;
    cleanup.push(w);
    await driver.create({ workspaceId: w, managedBy: "runtime" });
    const sb = await driver.connect(w);
    const pod = objectName(w);
    const [ex, kex] = await paired(
      ROUNDS * 3,
      () => sb.exec(["true"]),
      () => kubectl("exec", pod, "-c", "workspace", "--", "true"),
    );
    row("exec true", ex, kex, "kubectl exec", 0.5);
    const big = randomBytes(20 * 1024 * 1024);
    const file = join(tmp, "upload.bin");
    writeFileSync(file, big);
    // The exec stream itself (API server, kubelet, CRI) is most of an upload and varies by a few tenths: many rounds.
    const [up, cp] = await paired(
      Math.max(5, ROUNDS),
      () => sb.writeFile("upload.bin", big),
      () => kubectl("cp", "-c", "workspace", file, `${c.namespace}/${pod}:/workspace/upload-cp.bin`),
      1,
    );
    row("20 MiB upload", up, cp, "kubectl cp", 1);
    await sb.close();

    // 3. Resume after an idle eviction (the manager's sweeper pauses: the Pod is deleted, the PVC kept).
    const m = new K8sWorkspaceManager({ ...specInput, ttl: 1, sweepInterval: 0.5 });
    const rid = `bench-${tag}-r`;
    cleanup.push(rid);
    const resumes: number[] = [];
    const podOnly: number[] = [];
    await m.getWorkspace("bench", "bench", undefined, rid);
    for (let i = 0; i < Math.max(3, Math.ceil(ROUNDS / 2)); i++) {
      for (let t = 0; t < 200 && (await driver.find(rid))?.state !== "paused"; t++) await new Promise((r) => setTimeout(r, 100));
      resumes.push(await timed(async () => (await m.getWorkspace("bench", "bench", undefined, rid)).getBackend().exec(["true"])));
      const k = `bench-${tag}-p${i}`;
      cleanup.push(k);
      await kubectl("apply", "-f", manifestsFile(k, "all"));
      await kubectl("wait", "--for=condition=Ready", `pod/${objectName(k)}`, "--timeout=180s");
      await kubectl("delete", "pod", objectName(k), "--wait=true");
      const podFile = manifestsFile(k, "pod");
      podOnly.push(
        await timed(async () => {
          await kubectl("apply", "-f", podFile);
          await kubectl("wait", "--for=condition=Ready", `pod/${objectName(k)}`, "--timeout=180s");
        }),
      );
    }
    await m[Symbol.asyncDispose]();
    row("resume after idle eviction", resumes, podOnly, "kubectl apply + wait (Pod)");
  } finally {
    await Promise.all(cleanup.map((w) => driver.destroy(w, { deleteData: true }).catch(() => undefined)));
  }

  // 4. A 20-workspace fleet through the real Pulumi engine vs its floor.
  if (FLEET > 0) {
    const binDir = execFileSync(join(ROOT, "scripts", "pulumi-toolchain.sh"), { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim();
    execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: ROOT, stdio: "ignore" });
    const fleetRounds = Math.max(1, Math.min(3, Math.floor(ROUNDS / 3)));
    const fleet: number[] = [];
    const floor: number[] = [];
    for (let r = 0; r < fleetRounds; r++) {
      floor.push(await upOnce(binDir, "trivial", trivialProgram()));
      fleet.push(await upOnce(binDir, "k8sfleet", fleetProgram(r)));
    }
    row(`pulumi up, ${FLEET}-workspace fleet`, fleet, floor, `${FLEET} trivial resources`);
  }
  rmSync(tmp, { recursive: true, force: true });
}

const trivialProvider: pulumi.dynamic.ResourceProvider = {
  async create() {
    return { id: "x", outs: {} };
  },
};
class Trivial extends pulumi.dynamic.Resource {
  constructor(name: string) {
    super(trivialProvider, name, {});
  }
}
function trivialProgram(): PulumiFn {
  return async () => {
    for (let i = 0; i < FLEET; i++) new Trivial(`t${i}`);
  };
}
function fleetProgram(round: number): PulumiFn {
  return async () => {
    const workspaces = Array.from({ length: FLEET }, (_, i) => ({
      workspaceId: `bench-${tag}-f${round}-${i}`,
      backend: { kind: "kubernetes" as const, ...specInput },
      tags: { bench: "yes" },
    }));
    const fleet = new WorkspaceFleet("fleet", { workspaces, deleteData: true });
    return { workspaces: fleet.workspaces };
  };
}
async function upOnce(binDir: string, name: string, program: PulumiFn): Promise<number> {
  // Under the project, so the dynamic-provider host resolves @pulumi/pulumi from its node_modules.
  const base = join(ROOT, ".cache", "k8s-bench");
  mkdirSync(base, { recursive: true });
  const dir = mkdtempSync(join(base, `${name}-`));
  for (const d of ["project", "state", "home"]) mkdirSync(join(dir, d));
  const stack = await openStack({
    workDir: join(dir, "project"),
    projectName: `bench-${name}`,
    stackName: "bench",
    program,
    backendUrl: `file://${join(dir, "state")}`,
    pulumiHome: join(dir, "home"),
    passphrase: "bench",
    pulumiBinDir: binDir,
  });
  try {
    const t = performance.now();
    const up = await stack.up({ color: "never" });
    const took = performance.now() - t;
    if (up.summary.result !== "succeeded") throw new Error(`${name} up failed`);
    return took;
  } finally {
    await stack.destroy({ color: "never" }).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
