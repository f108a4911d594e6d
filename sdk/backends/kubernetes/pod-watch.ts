import type { KubeConfig } from "@kubernetes/client-node";
import { loadKubernetesClient } from "./sdk.js";

/**
 * Cuts a polling loop's sleeps short when one Pod changes, through a watch on it (as `kubectl wait`
 * does): a Pod turning Running is seen at once rather than at the next poll. Polling stays the
 * source of truth; a watch that fails or ends (the API server restarting, no `watch` verb) only
 * leaves the loop to its own pace.
 */
export class PodWake {
  #dirty = false;
  #wake: (() => void) | undefined;
  #stopped = false;
  #abort: AbortController | undefined;

  #start: (() => void) | undefined;

  constructor(kc: KubeConfig, namespace: string, name: string) {
    // Started by the first sleep: a Pod already running (a connect's check) costs no watch.
    this.#start = () =>
      void new (loadKubernetesClient().Watch)(kc)
        .watch(
          `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`,
          { fieldSelector: `metadata.name=${name}` },
          () => this.#changed(),
          () => undefined,
        )
        .then((c) => {
          if (this.#stopped) c.abort();
          else this.#abort = c;
        })
        .catch(() => undefined);
  }

  /** Sleeps up to `ms`, less when the Pod changed since the last call. */
  sleep(ms: number): Promise<void> {
    this.#start?.();
    this.#start = undefined;
    if (this.#dirty || this.#stopped) {
      this.#dirty = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(t);
        this.#wake = undefined;
        this.#dirty = false;
        resolve();
      };
      const t = setTimeout(done, ms);
      this.#wake = done;
    });
  }

  stop(): void {
    this.#stopped = true;
    this.#abort?.abort();
    this.#wake?.();
  }

  #changed(): void {
    this.#dirty = true;
    this.#wake?.();
  }
}
