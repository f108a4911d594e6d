import type { Stack } from "@pulumi/pulumi/automation/index.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { FLEET_OUTPUT_NAME, FleetOutputsSchema } from "../../sdk/contract/fleet.js";
import { REFERENCE_KEY } from "../../sdk/backends/e2b/driver.js";
import { WorkspaceFleet } from "../../providers/index.js";
import { e2bConnection, e2bEmulator } from "../support/e2b-emulator.js";
import { backendText, ensureBuilt, makeSandbox, pulumiBinDir, testStack, type Sandbox } from "./pulumi-helpers.js";

vi.setConfig({ testTimeout: 600_000 });

/** An E2B workspace through the real Pulumi engine and the provider, against the emulator: the key stays secret in state. */
const emu = await e2bEmulator();
const ID = `pulumi-e2b-${process.pid}`;
const KEY = `e2b_pulumi_secret_${process.pid}_key`;
let sb: Sandbox;
let stack: Stack;

describe.skipIf(!emu).sequential("e2b workspace on the real Pulumi engine (emulator)", () => {
  const copies = () => emu!.sandboxes(KEY).filter((s) => s.metadata[REFERENCE_KEY] === ID);
  beforeAll(async () => {
    const bin = pulumiBinDir();
    ensureBuilt();
    sb = makeSandbox("e2b");
    stack = await testStack(
      sb,
      "e2b",
      async () => {
        const fleet = new WorkspaceFleet("fleet", {
          workspaces: [{ workspaceId: ID, userId: "team", backend: { kind: "e2b", template: "base", ...e2bConnection(emu!, KEY) }, tags: { team: "a" } }],
          deleteData: true,
        });
        return { [FLEET_OUTPUT_NAME]: fleet.workspaces };
      },
      bin,
    );
    // The provider build (tsc) and the engine's first start take minutes on a loaded 2-core machine.
  }, 900_000);

  afterAll(async () => {
    await stack?.destroy({ color: "never" }).catch(() => undefined);
    sb?.dispose();
    await emu?.close();
  });

  it("up creates one tagged sandbox with the key secret in state; refresh finds it; destroy removes it", async () => {
    const up = await stack.up({ color: "never" });
    const fleet = FleetOutputsSchema.parse(up.outputs[FLEET_OUTPUT_NAME]!.value);
    expect(fleet[ID]!.backend.kind).toBe("e2b");
    expect(copies()).toHaveLength(1);
    expect(copies()[0]!.metadata).toMatchObject({ "agent-workspaces.managed-by": "pulumi", "agent-workspaces.user-id": "team" });
    expect(backendText(sb)).not.toContain(KEY);
    const refreshed = await stack.refresh({ color: "never" });
    expect(refreshed.summary.result).toBe("succeeded");
    expect(copies()).toHaveLength(1);
    await stack.destroy({ color: "never" });
    expect(copies()).toEqual([]);
  });
});
