import { describe, it } from "vitest";
import { DaytonaDriver } from "../../sdk/backends/daytona/driver.js";
import { DaytonaWorkspace } from "../../sdk/backends/daytona/index.js";
import { driverContract } from "../contract/driver/driver.contract.js";
import { sandboxContract } from "../contract/driver/sandbox.contract.js";
import { uniqueId } from "../contract/fixture.js";

/**
 * The driver and sandbox contracts and one workspace round trip against the real Daytona service.
 * Runs only with DAYTONA_API_KEY set (DAYTONA_API_URL and DAYTONA_TARGET are honoured); the
 * "elsewhere" account is DAYTONA_OTHER_API_KEY (that part is skipped without it). Every sandbox it
 * makes is deleted at the end.
 */
const key = process.env.DAYTONA_API_KEY;
if (!key) console.warn("[daytona live] skipped: DAYTONA_API_KEY is not set (the emulator suites in test/emulators/daytona run instead)");

describe.skipIf(!key)("Daytona live", () => {
  const other = process.env.DAYTONA_OTHER_API_KEY;
  const driver = () => new DaytonaDriver({ apiKey: key!, timeoutSeconds: 300 });
  const fixture = { name: "daytona-live", driver, elsewhere: () => new DaytonaDriver({ apiKey: other ?? key!, timeoutSeconds: 300 }), destroyKeepsData: false };
  if (other) driverContract(fixture);
  else console.warn("[daytona live] driver contract skipped: DAYTONA_OTHER_API_KEY (a second organization) is not set");
  sandboxContract(fixture);

  it("a workspace is created, stopped on close, and started again with its files", { timeout: 600_000 }, async () => {
    const workspaceId = uniqueId("live");
    const ws = new DaytonaWorkspace({ workspaceId, apiKey: key! });
    try {
      await ws.initialize();
      await ws.getBackend().writeFile("hello.txt", "live");
      await ws.close();
      await ws.initialize();
      if ((await ws.getBackend().readFile("hello.txt")).toString() !== "live") throw new Error("the file did not survive stop and start");
    } finally {
      await ws.close().catch(() => undefined);
      await driver().destroy(workspaceId);
    }
  });
});
