import { afterAll, describe } from "vitest";
import { e2bEmulator, e2bFixture } from "../../support/e2b-emulator.js";
import { runContractSuites } from "../../support/sandbox-fixtures.js";

/** Every workspace contract suite on E2B: the unchanged e2b SDK against the emulator, whose sandboxes are real containers. */
const emu = await e2bEmulator();

describe.skipIf(!emu)("E2B backend (emulator)", () => {
  afterAll(async () => {
    await emu?.close();
  });
  runContractSuites(e2bFixture(() => ({ emu: emu! })));
});
