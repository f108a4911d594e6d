import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Stack } from "@pulumi/pulumi/automation/index.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { OpenSandboxDriver } from "../../sdk/backends/opensandbox/driver.js";
import { FLEET_OUTPUT_NAME, FleetOutputsSchema } from "../../sdk/contract/fleet.js";
import { WorkspaceFleet, loadFleetFile } from "../../providers/index.js";
import { OPENSANDBOX_TEST_IMAGE, openSandboxServer } from "../support/opensandbox-server.js";
import { ensureBuilt, makeSandbox, pulumiBinDir, testStack, type Sandbox } from "./pulumi-helpers.js";
import { ROOT } from "./pulumi-helpers.js";

vi.setConfig({ testTimeout: 300_000 });

/** The `opensandbox` stack's fleet on the real Pulumi engine and the real OpenSandbox server: the provider drives the same driver. */
const server = await openSandboxServer();
let sb: Sandbox;
let stack: Stack;
let basedir: string;
let tags: Record<string, string> = { team: "a" };
const ID = `pulumi-osb-${process.pid}`;

describe.skipIf(!server).sequential("opensandbox stack on the real Pulumi engine", () => {
  beforeAll(async () => {
    const bin = pulumiBinDir();
    ensureBuilt();
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-pulumi-osb-"));
    sb = makeSandbox("opensandbox");
    // The stack's own fleet file, with the test image and a basedir of this run.
    const entry = loadFleetFile(path.join(ROOT, "stacks/opensandbox.fleet.yaml"))[0]!;
    stack = await testStack(
      sb,
      "opensandbox",
      async () => {
        const fleet = new WorkspaceFleet("fleet", {
          workspaces: [
            {
              ...entry,
              workspaceId: ID,
              backend: { ...entry.backend, kind: "opensandbox", image: OPENSANDBOX_TEST_IMAGE, domain: server!.domain, basedir } as never,
              tags,
            },
          ],
          deleteData: true,
        });
        return { [FLEET_OUTPUT_NAME]: fleet.workspaces };
      },
      bin,
    );
  });

  afterAll(async () => {
    await stack?.destroy({ color: "never" }).catch(() => undefined);
    sb?.dispose();
    await fs.rm(basedir, { recursive: true, force: true }).catch(() => undefined);
  });

  it("up creates one sandbox with the workspace's metadata; a tag change updates it in place; destroy removes it", async () => {
    const driver = new OpenSandboxDriver({ domain: server!.domain, basedir, image: OPENSANDBOX_TEST_IMAGE });
    try {
      const up = await stack.up({ color: "never" });
      const fleet = FleetOutputsSchema.parse(up.outputs[FLEET_OUTPUT_NAME]!.value);
      expect(fleet[ID]!.backend.kind).toBe("opensandbox");
      const found = await driver.find(ID);
      expect(found).toMatchObject({ workspaceId: ID, managedBy: "pulumi", userId: "team", agentId: "coder", tags: { team: "a" } });
      const sandboxId = found!.location.sandboxId;

      tags = { team: "b" };
      const r = await stack.up({ color: "never" });
      expect(r.summary.resourceChanges).toMatchObject({ update: 1 });
      const after = await driver.find(ID);
      expect(after!.location.sandboxId).toBe(sandboxId);
      expect(after!.tags).toEqual({ team: "b" });

      await stack.destroy({ color: "never" });
      expect(await driver.find(ID)).toBeNull();
    } finally {
      await driver.close();
    }
  });
});
