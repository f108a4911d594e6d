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
import { e2bConnection, e2bEmulator } from "../support/e2b-emulator.js";

/** The driver and sandbox contracts on every registered backend, each driver built through the registry. */
const extra: Partial<Record<BackendKind, Record<string, unknown>>> = { docker: { baseImage: BASE_IMAGE, network: "none" } };
const engine = BACKEND_KINDS.includes("docker" as BackendKind) ? await dockerEngine() : null;
const backends = await Promise.all(BACKEND_KINDS.map(async (kind) => ({ kind, module: await loadBackend(kind) })));
// Cloud backends run on their emulator; a driver's own storage there is an account (team) of its own, not a basedir.
const e2b = BACKEND_KINDS.includes("e2b" as BackendKind) && engine ? await e2bEmulator() : null;
const storage = (kind: BackendKind, dir: string, which: string): Record<string, unknown> =>
  kind === "e2b" ? (e2b ? e2bConnection(e2b, `e2b_team_${which}`) : {}) : { basedir: dir };
afterAll(async () => {
  await e2b?.close();
});

for (const { kind, module } of backends) {
  const unavailable =
    (kind === "docker" || kind === "e2b") && !engine ? "no Docker engine" : await module.canRunHere(module.schema.parse({ kind, ...storage(kind, "/", "probe"), ...extra[kind] }) as never);
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
    const make = (basedir: () => string, which: string) => (): Driver =>
      module.createDriver(module.schema.parse({ kind, ...storage(kind, basedir(), which), ...extra[kind] }) as never);
    const fixture = { name: kind, driver: make(() => base, "base"), elsewhere: make(() => other, "other") };
    driverContract(fixture);
    sandboxContract(fixture);
  });
}
