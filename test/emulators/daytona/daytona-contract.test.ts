import { afterAll, beforeAll, describe } from "vitest";
import { DaytonaDriver } from "../../../sdk/backends/daytona/driver.js";
import { daytonaFixture, emulatorSpec, startDaytonaEmulator, type DaytonaEmulator } from "../../support/daytona-emulator.js";
import { runContractSuites } from "../../support/sandbox-fixtures.js";

/** The shared workspace contract suites on Daytona: the real SDK, unchanged, against the emulator. */
const emulator = await startDaytonaEmulator();

describe.skipIf(!emulator)("Daytona backend through the emulator: workspace contract", () => {
  const made: string[] = [];
  let emu: DaytonaEmulator;
  beforeAll(() => {
    emu = emulator!;
  });
  afterAll(async () => {
    const d = new DaytonaDriver(emulatorSpec(emu));
    await Promise.all(made.map((w) => d.destroy(w).catch(() => undefined)));
    await emu.close();
  });
  runContractSuites(daytonaFixture(() => ({ emulator: emu, track: (w) => made.push(w) })));
});
