import type { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { loadKubernetesClient } from "./sdk.js";
import { keepAliveConfiguration } from "./keep-alive.js";
import { ConflictError, InvalidArgumentError, NotFoundError, UnauthenticatedError, UnavailableError, WorkspaceError, InternalError } from "../../errors.js";

/** The API objects a driver needs, built once per kubeconfig and context (every driver of a process shares them). */
export interface KubeClients {
  kc: KubeConfig;
  core: CoreV1Api;
  /** Where the config came from, for error messages (a path or "in-cluster"; never a credential). */
  source: string;
}

const CACHE = new Map<string, KubeClients>();

/**
 * Loads the cluster configuration: an explicit kubeconfig path, else KUBECONFIG or ~/.kube/config,
 * else the in-cluster ServiceAccount (client-node's default order). A user's own KUBECONFIG is
 * read as it is, never written.
 */
export function kubeClients(opts: { kubeconfig?: string | undefined; context?: string | undefined }): KubeClients {
  const key = `${opts.kubeconfig ?? `env:${process.env.KUBECONFIG ?? ""}`}\0${opts.context ?? ""}`;
  const hit = CACHE.get(key);
  if (hit) return hit;
  const { CoreV1Api, KubeConfig } = loadKubernetesClient();
  const kc = new KubeConfig();
  let source: string;
  try {
    if (opts.kubeconfig) {
      kc.loadFromFile(opts.kubeconfig);
      source = opts.kubeconfig;
    } else {
      kc.loadFromDefault();
      source = process.env.KUBECONFIG ? process.env.KUBECONFIG : kc.getCurrentCluster()?.name === "inCluster" ? "in-cluster" : "~/.kube/config";
    }
    if (opts.context) kc.setCurrentContext(opts.context);
  } catch (e) {
    throw new InvalidArgumentError(`could not load the Kubernetes configuration: ${shortMessage(e)}`, {
      field: opts.context && !opts.kubeconfig ? "context" : "kubeconfig",
    });
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new InvalidArgumentError("no cluster configured (no kubeconfig and not running in a cluster)", { field: "kubeconfig" });
  const clients = { kc, core: new CoreV1Api(keepAliveConfiguration(kc, cluster.server)), source };
  CACHE.set(key, clients);
  return clients;
}

/** The HTTP status of a client-node ApiException, or undefined for a transport failure. */
export function statusOf(e: unknown): number | undefined {
  const code = (e as { code?: unknown })?.code;
  return typeof code === "number" ? code : undefined;
}

/** A failure that may pass by itself: the API server restarting, unreachable or overloaded. */
export function isTransient(e: unknown): boolean {
  if (e instanceof WorkspaceError) return false;
  const s = statusOf(e);
  if (s === undefined) return true;
  return s === 429 || s === 500 || s === 502 || s === 503 || s === 504;
}

/** Retries a call while the API server is transiently away, for at most `budgetMs` (a restart takes seconds). */
export async function withRetry<T>(fn: () => Promise<T>, budgetMs = 60_000): Promise<T> {
  const until = Date.now() + budgetMs;
  for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
    try {
      return await fn();
    } catch (e) {
      if (!isTransient(e) || Date.now() + delay > until) throw e;
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

/** One line of what the API server said (its Status message), never the response headers. */
export function shortMessage(e: unknown): string {
  const body = (e as { body?: unknown })?.body;
  let msg: string | undefined;
  if (typeof body === "string") {
    try {
      msg = (JSON.parse(body) as { message?: string }).message;
    } catch {
      msg = body;
    }
  } else if (body && typeof body === "object") msg = (body as { message?: string }).message;
  if (!msg) msg = e instanceof Error ? e.message.split("\n")[0] : String(e);
  return (msg ?? "").slice(0, 500);
}

/** The SDK error for a failed API call on `what` (an object name: no credential ever reaches the message). */
export function kubeError(e: unknown, what: string, source: string): unknown {
  if (e instanceof WorkspaceError) return e;
  const s = statusOf(e);
  const msg = shortMessage(e);
  if (s === undefined) return new UnavailableError(`Kubernetes API unreachable (config ${source}) while trying to ${what}: ${msg}`, { cause: e });
  if (s === 401) return new UnauthenticatedError(`Kubernetes refused the credentials of ${source} to ${what}: ${msg}`);
  if (s === 403) return new UnauthenticatedError(`Kubernetes RBAC forbids ${what} (config ${source}): ${msg}`, { retryable: false });
  if (s === 404) return new NotFoundError(`${what} not found`, { cause: e });
  if (s === 409) return new ConflictError(`${what}: ${msg}`, { cause: e });
  if (s === 422 || s === 400) return new InvalidArgumentError(`Kubernetes rejected ${what}: ${msg}`, { cause: e });
  if (isTransient(e)) return new UnavailableError(`Kubernetes API failed to ${what} (HTTP ${s}): ${msg}`, { cause: e });
  return new InternalError(`Kubernetes API failed to ${what} (HTTP ${s}): ${msg}`, { cause: e });
}
