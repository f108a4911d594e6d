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
import { openSandboxServer } from "../support/opensandbox-server.js";

/** The driver and sandbox contracts on every registered backend, each driver built through the registry. */
const extra: Partial<Record<BackendKind, Record<string, unknown>>> = { docker: { baseImage: BASE_IMAGE, network: "none" }, opensandbox: { image: BASE_IMAGE } };
const engine = BACKEND_KINDS.includes("docker" as BackendKind) ? await dockerEngine() : null;
if (BACKEND_KINDS.includes("opensandbox" as BackendKind) && process.env.AGENTWS_SKIP_OPENSANDBOX !== "1") await openSandboxServer();
const backends = await Promise.all(BACKEND_KINDS.map(async (kind) => ({ kind, module: await loadBackend(kind) })));

for (const { kind, module } of backends) {
  const unavailable = kind === "docker" && !engine ? "no Docker engine" : await module.canRunHere(module.schema.parse({ kind, ...extra[kind] }) as never);
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
    const make = (basedir: () => string) => (): Driver => module.createDriver(module.schema.parse({ kind, basedir: basedir(), ...extra[kind] }) as never);
    const fixture = { name: kind, driver: make(() => base), elsewhere: make(() => other) };
    driverContract(fixture);
    sandboxContract(fixture);
  });
}
