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
import { EMULATOR_API_KEY, emulatorSpec, startDaytonaEmulator } from "../support/daytona-emulator.js";

/** The driver and sandbox contracts on every registered backend, each driver built through the registry. */
const extra: Partial<Record<BackendKind, Record<string, unknown>>> = { docker: { baseImage: BASE_IMAGE, network: "none" } };
const engine = BACKEND_KINDS.includes("docker" as BackendKind) ? await dockerEngine() : null;
const backends = await Promise.all(BACKEND_KINDS.map(async (kind) => ({ kind, module: await loadBackend(kind) })));

/**
 * Cloud backends run against their local emulators: options for one account, "elsewhere" being
 * another account (the scope a cloud driver lists in). Files live in the cloud sandbox itself.
 */
interface Emulated {
  options(account: "main" | "other"): Record<string, unknown>;
  close(): Promise<void>;
}
const daytona = BACKEND_KINDS.includes("daytona" as BackendKind) ? await startDaytonaEmulator() : null;
const emulated: Partial<Record<BackendKind, Emulated | null>> = {
  daytona: daytona && { options: (a) => emulatorSpec(daytona, a === "main" ? EMULATOR_API_KEY : `${EMULATOR_API_KEY}-other`), close: () => daytona.close() },
};

for (const { kind, module } of backends) {
  const cloud = Object.hasOwn(emulated, kind) ? emulated[kind] : undefined;
  const unavailable =
    cloud !== undefined
      ? cloud
        ? undefined
        : "no emulator"
      : kind === "docker" && !engine
        ? "no Docker engine"
        : await module.canRunHere(module.schema.parse({ kind, ...extra[kind] }) as never);
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
      await cloud?.close();
    });
    const make = (basedir: () => string) => (): Driver => module.createDriver(module.schema.parse({ kind, basedir: basedir(), ...extra[kind] }) as never);
    const makeCloud = (account: "main" | "other") => (): Driver => module.createDriver(module.schema.parse({ kind, ...cloud!.options(account) }) as never);
    const fixture = cloud
      ? { name: kind, driver: makeCloud("main"), elsewhere: makeCloud("other"), destroyKeepsData: false }
      : { name: kind, driver: make(() => base), elsewhere: make(() => other) };
    driverContract(fixture);
    sandboxContract(fixture);
  });
}
