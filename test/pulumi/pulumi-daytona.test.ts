import { join } from "node:path";
import type { Stack } from "@pulumi/pulumi/automation/index.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { LABELS } from "../../sdk/contract/driver.js";
import { FLEET_OUTPUT_NAME, FleetOutputsSchema } from "../../sdk/contract/fleet.js";
import program from "../../stacks/index.js";
import { EMULATOR_API_KEY, startDaytonaEmulator } from "../support/daytona-emulator.js";
import { ROOT, backendText, ensureBuilt, makeSandbox, pulumiBinDir, testStack, type Sandbox } from "./pulumi-helpers.js";

// The real engine on a shared 2-core machine: operations take seconds each, more under load.
vi.setConfig({ testTimeout: 300_000 });

/**
 * The `daytona` stack (stacks/Pulumi.daytona.yaml and daytona.fleet.yaml, unchanged) on the real
 * Pulumi engine, its provider driving the real SDK against the emulator: the API key travels as
 * the stack config secret `agentws:credentials.apiKey`, the endpoint as DAYTONA_API_URL.
 */
const emulator = await startDaytonaEmulator();
let sb: Sandbox;
let stack: Stack;
const savedUrl = process.env.DAYTONA_API_URL;

describe.skipIf(!emulator).sequential("daytona stack on the real Pulumi engine, against the emulator", () => {
  beforeAll(async () => {
    process.env.DAYTONA_API_URL = emulator!.apiUrl;
    const bin = pulumiBinDir();
    ensureBuilt();
    sb = makeSandbox("daytona");
    stack = await testStack(sb, "daytona", program, bin);
    await stack.setConfig("agentws:fleetFile", { value: join(ROOT, "stacks/daytona.fleet.yaml") });
    await stack.setConfig("agentws:skipUnavailable", { value: "false" });
    await stack.setConfig("agentws:credentials", { value: JSON.stringify({ apiKey: EMULATOR_API_KEY }), secret: true });
  });

  afterAll(async () => {
    await stack?.destroy({ color: "never" }).catch(() => undefined);
    sb?.dispose();
    if (savedUrl === undefined) delete process.env.DAYTONA_API_URL;
    else process.env.DAYTONA_API_URL = savedUrl;
    await emulator?.close();
  });

  it("up creates one labelled sandbox per workspace, the API key never in state; refresh sees it; destroy removes it", async () => {
    const up = await stack.up({ color: "never" });
    const fleet = FleetOutputsSchema.parse(up.outputs[FLEET_OUTPUT_NAME]!.value);
    const ids = Object.keys(fleet);
    expect(ids).toHaveLength(1);
    const id = ids[0]!;
    expect(fleet[id]!.backend.kind).toBe("daytona");
    const sandboxes = emulator!.sandboxes({ [LABELS.workspaceId]: id });
    expect(sandboxes).toHaveLength(1);
    expect(emulator!.inspect(sandboxes[0]!)!.labels).toMatchObject({ [LABELS.managedBy]: "pulumi", [LABELS.userId]: "team", [LABELS.agentId]: "coder" });
    expect(fleet[id]!.location.sandboxId).toBe(sandboxes[0]);
    expect(backendText(sb)).not.toContain(EMULATOR_API_KEY);

    const again = await stack.up({ color: "never" });
    expect(again.summary.resourceChanges?.same).toBeGreaterThan(0);
    expect(emulator!.sandboxes({ [LABELS.workspaceId]: id })).toHaveLength(1);

    await emulator!.vanish(sandboxes[0]!);
    const refreshed = await stack.refresh({ color: "never" });
    expect(refreshed.summary.resourceChanges?.delete).toBe(1);

    await stack.up({ color: "never" });
    expect(emulator!.sandboxes({ [LABELS.workspaceId]: id })).toHaveLength(1);
    await stack.destroy({ color: "never" });
    expect(emulator!.sandboxes({ [LABELS.workspaceId]: id })).toHaveLength(0);
    expect(backendText(sb)).not.toContain(EMULATOR_API_KEY);
  });
});
