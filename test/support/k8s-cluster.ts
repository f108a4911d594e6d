import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const SCRIPT = path.join(ROOT, "scripts/k8s-cluster.sh");
/**
 * A start under way (scripts/test begins one in the background; cold, it builds from Go modules) is
 * followed by `k8s-cluster.sh wait`: done when ready, failed at once when the start fails or its
 * process is gone, and otherwise waited for as long as it makes progress; this many seconds
 * without any fails it. Every test file that needs the cluster waits through this one rule.
 */
const STALL_SECONDS = Number(process.env.AGENTWS_K8S_STALL_SECONDS ?? 900);

export interface K8sCluster {
  kubeconfig: string;
  /** The workspace image present on the cluster's node (python3 and node inside). */
  image: string;
  /** Namespaces the tests use (made here if missing): the main one and "another stack's". */
  namespace: string;
  otherNamespace: string;
  kc: KubeConfig;
  core: CoreV1Api;
  /** Whether the cluster is the project's own (scripts/k8s-cluster.sh), whose processes fault tests may restart. */
  own: boolean;
}

let pending: Promise<K8sCluster | null> | undefined;

/**
 * The cluster the Kubernetes tests run on: the user's own when KUBECONFIG is set (used untouched,
 * with AGENTWS_K8S_IMAGE naming an image its nodes have), else the project's (scripts/k8s-cluster.sh):
 * a start already in progress (scripts/test begins one in the background) is waited for, a cached
 * build is started. Null, with the reason printed, when there is none; with CI set that throws.
 */
export function k8sCluster(): Promise<K8sCluster | null> {
  pending ??= find();
  return pending;
}

async function find(): Promise<K8sCluster | null> {
  const fail = (why: string): null => {
    if (process.env.CI) throw new Error(`[kubernetes tests] no cluster: ${why}`);
    console.warn(`[kubernetes tests] skipped: ${why}`);
    return null;
  };
  let kubeconfig = process.env.KUBECONFIG;
  let image = process.env.AGENTWS_K8S_IMAGE;
  const own = !kubeconfig;
  if (!kubeconfig) {
    const env = await ownCluster().catch((e: unknown) => ({ error: String((e as Error).message ?? e).slice(0, 600) }));
    if ("error" in env) return fail(env.error);
    kubeconfig = env.KUBECONFIG;
    image ??= env.AGENTWS_K8S_IMAGE;
  }
  if (!kubeconfig || !image) return fail("KUBECONFIG is set but AGENTWS_K8S_IMAGE (an image with python3 and node on the nodes) is not");
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  const namespace = process.env.AGENTWS_K8S_NAMESPACE ?? "agentws-test";
  const otherNamespace = `${namespace}-other`;
  try {
    for (const ns of [namespace, otherNamespace]) {
      await core.createNamespace({ body: { metadata: { name: ns } } }).catch((e: unknown) => {
        if ((e as { code?: number }).code !== 409) throw e;
      });
    }
    await waitForDefaultServiceAccount(core, [namespace, otherNamespace]);
  } catch (e) {
    return fail(`the cluster at ${kubeconfig} does not answer: ${String((e as Error).message).split("\n")[0]}`);
  }
  return { kubeconfig, image, namespace, otherNamespace, kc, core, own };
}

async function ownCluster(): Promise<Record<string, string>> {
  const sh = async (...args: string[]) => (await run(SCRIPT, args, { maxBuffer: 1 << 20 })).stdout;
  let out: string;
  if (
    await sh("status").then(
      () => true,
      () => false,
    )
  )
    out = await sh("env");
  else {
    // A start under way (scripts/test) is waited for; otherwise a cached build starts in seconds.
    out = await sh("wait", String(STALL_SECONDS)).catch(async (e: unknown) => {
      if (!/no cluster is starting/.test(String((e as { stderr?: string }).stderr ?? e))) throw e;
      if (
        !(await sh("cached").then(
          () => true,
          () => false,
        ))
      )
        throw new Error("the project's cluster is not built (run scripts/k8s-cluster.sh up once: about 15 min on 2 cores), and KUBECONFIG is not set");
      return sh("up");
    });
  }
  const env: Record<string, string> = {};
  for (const m of out.matchAll(/^export (\w+)=(.*)$/gm)) env[m[1]!] = m[2]!;
  if (!env.KUBECONFIG) throw new Error(`scripts/k8s-cluster.sh printed no KUBECONFIG: ${out.slice(0, 300)}`);
  return env;
}

/** Pods are refused in a namespace until the controller-manager made its default ServiceAccount. */
async function waitForDefaultServiceAccount(core: CoreV1Api, namespaces: string[]): Promise<void> {
  for (const ns of namespaces) {
    for (let i = 0; ; i++) {
      try {
        await core.readNamespacedServiceAccount({ name: "default", namespace: ns });
        break;
      } catch (e) {
        if (i > 100) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
}

/** Pods and PVCs of one workspace (to count copies). */
export async function objectsFor(cluster: K8sCluster, workspaceId: string, namespace = cluster.namespace): Promise<{ pods: string[]; pvcs: string[] }> {
  const labelSelector = `agent-workspaces.workspace-id=${workspaceId}`;
  const [pods, pvcs] = await Promise.all([
    cluster.core.listNamespacedPod({ namespace, labelSelector }),
    cluster.core.listNamespacedPersistentVolumeClaim({ namespace, labelSelector }),
  ]);
  return {
    pods: pods.items.filter((p) => !p.metadata?.deletionTimestamp).map((p) => p.metadata!.name!),
    pvcs: pvcs.items.filter((p) => !p.metadata?.deletionTimestamp).map((p) => p.metadata!.name!),
  };
}

/** kubectl from the project's cluster build (for baselines and out-of-band actions), or the one on PATH. */
export async function kubectl(cluster: K8sCluster, args: string[], input?: string): Promise<string> {
  const bin =
    process.env.AGENTWS_KUBECTL ??
    (await run(SCRIPT, ["kubectl-path"]).then(
      (r) => r.stdout.trim(),
      () => "kubectl",
    ));
  const child = run(bin, ["--kubeconfig", cluster.kubeconfig, ...args], { maxBuffer: 64 << 20 });
  if (input !== undefined) child.child.stdin?.end(input);
  return (await child).stdout;
}
