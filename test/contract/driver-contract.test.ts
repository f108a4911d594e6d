import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe } from "vitest";
import { BACKEND_KINDS } from "../../sdk/contract/registry.js";
import { loadBackend } from "../../sdk/backends/load.js";
import type { BackendKind } from "../../sdk/contract/registry.js";
import type { Driver } from "../../sdk/contract/driver.js";
import { driverContract } from "./driver/driver.contract.js";
import { sandboxContract } from "./driver/sandbox.contract.js";
import { BASE_IMAGE, dockerEngine } from "../support/docker-engine.js";
import { k8sCluster } from "../support/k8s-cluster.js";
import { openSandboxServer } from "../support/opensandbox-server.js";
import { EMULATOR_API_KEY, emulatorSpec, startDaytonaEmulator } from "../support/daytona-emulator.js";
import { e2bConnection, e2bEmulator } from "../support/e2b-emulator.js";

/**
 * How each backend runs here: why it cannot (a missing engine, cluster, server or emulator), and its
 * options for "the same storage" (`main`) and "storage of its own": a basedir, a namespace, an account.
 */
interface Target {
  unavailable?: string | false;
  options(dir: string, main: boolean): Record<string, unknown>;
  /** Cloud sandboxes keep their files in the sandbox: destroying one cannot keep them. */
  destroyKeepsData?: boolean;
  close?(): Promise<void>;
}
const has = (kind: string) => BACKEND_KINDS.includes(kind as BackendKind);
const basedir =
  (extra: Record<string, unknown> = {}) =>
  (dir: string) => ({ basedir: dir, ...extra });

const engine = has("docker") ? await dockerEngine() : null;
const cluster = has("kubernetes") ? await k8sCluster() : null;
const osb = has("opensandbox") && process.env.AGENTWS_SKIP_OPENSANDBOX !== "1" ? await openSandboxServer() : null;
const daytona = has("daytona") ? await startDaytonaEmulator() : null;
const e2b = has("e2b") && engine ? await e2bEmulator() : null;
const targets: Partial<Record<BackendKind, Target>> = {
  docker: { unavailable: !engine && "no Docker engine", options: basedir({ baseImage: BASE_IMAGE, network: "none" }) },
  kubernetes: {
    unavailable: !cluster && "no Kubernetes cluster",
    options: (_dir, main) => ({ kubeconfig: cluster?.kubeconfig, image: cluster?.image, namespace: main ? cluster?.namespace : cluster?.otherNamespace }),
  },
  opensandbox: { unavailable: !osb && "no OpenSandbox server", options: basedir({ image: BASE_IMAGE }) },
  // Cloud backends run on their local emulators; storage of its own there is another account.
  daytona: {
    unavailable: !daytona && "no Daytona emulator",
    options: (_dir, main) => (daytona ? emulatorSpec(daytona, main ? EMULATOR_API_KEY : `${EMULATOR_API_KEY}-other`) : {}),
    destroyKeepsData: false,
    close: async () => daytona?.close(),
  },
  e2b: {
    unavailable: !e2b && "no Docker engine for the E2B emulator",
    options: (_dir, main) => (e2b ? e2bConnection(e2b, `e2b_team_${main ? "base" : "other"}`) : {}),
    close: async () => e2b?.close(),
  },
};
const backends = await Promise.all(BACKEND_KINDS.map(async (kind) => ({ kind, module: await loadBackend(kind) })));

for (const { kind, module } of backends) {
  const target: Target = targets[kind] ?? { options: basedir() };
  const unavailable = target.unavailable || (await module.canRunHere(module.schema.parse({ kind, ...target.options("/", true) }) as never));
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
      await target.close?.();
    });
    const make = (dir: () => string, main: boolean) => (): Driver =>
      module.createDriver(module.schema.parse({ kind, ...target.options(dir(), main) }) as never);
    const fixture = {
      name: kind,
      driver: make(() => base, true),
      elsewhere: make(() => other, false),
      ...(target.destroyKeepsData === false ? { destroyKeepsData: false } : {}),
    };
    driverContract(fixture);
    sandboxContract(fixture);
  });
}
