import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe } from "vitest";
import { BACKEND_KINDS, loadBackend } from "../../sdk/backends/registry.js";
import type { BackendKind } from "../../sdk/backends/spec.js";
import type { Driver } from "../../sdk/backends/driver.js";
import { driverContract } from "./driver/driver.contract.js";
import { sandboxContract } from "./driver/sandbox.contract.js";
import { BASE_IMAGE, dockerEngine } from "../support/docker-engine.js";
import { k8sCluster } from "../support/k8s-cluster.js";

/** The driver and sandbox contracts on every registered backend, each driver built through the registry. */
const engine = BACKEND_KINDS.includes("docker" as BackendKind) ? await dockerEngine() : null;
const cluster = BACKEND_KINDS.includes("kubernetes" as BackendKind) ? await k8sCluster() : null;
const extra: Partial<Record<BackendKind, Record<string, unknown>>> = {
  docker: { baseImage: BASE_IMAGE, network: "none" },
  ...(cluster ? { kubernetes: { kubeconfig: cluster.kubeconfig, image: cluster.image } } : {}),
};
const missing: Partial<Record<BackendKind, string | false>> = { docker: !engine && "no Docker engine", kubernetes: !cluster && "no Kubernetes cluster" };
/** What "the same storage" and "storage of its own" are per backend: a basedir, or a namespace. */
const scope = (kind: BackendKind, dir: string, main: boolean): Record<string, unknown> =>
  kind === "kubernetes" ? { namespace: main ? cluster!.namespace : cluster!.otherNamespace } : { basedir: dir };
const backends = await Promise.all(BACKEND_KINDS.map(async (kind) => ({ kind, module: await loadBackend(kind) })));

for (const { kind, module } of backends) {
  const unavailable = missing[kind] || (await module.canRunHere(module.schema.parse({ kind, ...extra[kind] }) as never));
  describe.skipIf(Boolean(unavailable) && !process.env.CI)(`${kind} driver`, () => {
    let base: string;
    let other: string;
    beforeAll(async () => {
      base = await fs.mkdtemp(path.join(os.tmpdir(), `agentws-dc-${kind}-`));
      other = await fs.mkdtemp(path.join(os.tmpdir(), `agentws-dc-${kind}-other-`));
    });
    afterAll(async () => {
      await fs.rm(base, { recursive: true, force: true });
      await fs.rm(other, { recursive: true, force: true });
    });
    const make = (dir: () => string, main: boolean) => (): Driver => module.createDriver(module.schema.parse({ kind, ...scope(kind, dir(), main), ...extra[kind] }) as never);
    const fixture = { name: kind, driver: make(() => base, true), elsewhere: make(() => other, false) };
    driverContract(fixture);
    sandboxContract(fixture);
  });
}
