import { join } from "node:path";
import type { Stack } from "@pulumi/pulumi/automation/index.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { dockerClient } from "../../sdk/backends/docker/client.js";
import { FLEET_OUTPUT_NAME, FleetOutputsSchema } from "../../sdk/fleet.js";
import { WorkspaceFleet } from "../../providers/index.js";
import { StepCollector } from "../../sdk/cli/engine.js";
import { renderPreviewMarkdown } from "../../sdk/cli/preview-markdown.js";
import { BASE_IMAGE, containersFor, dockerEngine } from "../support/docker-engine.js";
import { ensureBuilt, makeSandbox, pulumiBinDir, testStack, type Sandbox } from "./pulumi-helpers.js";

// The real engine on a shared 2-core machine: operations take seconds each, more under load.
vi.setConfig({ testTimeout: 300_000 });

/** A Docker workspace on the real engine: a base image change replaces the container. */
const engine = await dockerEngine();
const ALT_IMAGE = "agentws-base:pulumi-replace-test";
let sb: Sandbox;
let stack: Stack;
let image = BASE_IMAGE;
const ID = `pulumi-docker-${process.pid}`;

describe.skipIf(!engine).sequential("docker workspace on the real Pulumi engine", () => {
  beforeAll(async () => {
    const bin = pulumiBinDir();
    ensureBuilt();
    const [repo, tag] = ALT_IMAGE.split(":");
    await dockerClient().getImage(BASE_IMAGE).tag({ repo: repo!, tag: tag! });
    sb = makeSandbox("docker");
    stack = await testStack(
      sb,
      "docker",
      async () => {
        const fleet = new WorkspaceFleet("fleet", {
          workspaces: [{ workspaceId: ID, backend: { kind: "docker", baseImage: image, network: "none", basedir: join(sb.dir, "data") }, tags: { team: "a" } }],
          deleteData: true,
        });
        return { [FLEET_OUTPUT_NAME]: fleet.workspaces };
      },
      bin,
    );
  });

  afterAll(async () => {
    await stack?.destroy({ color: "never" }).catch(() => undefined);
    await dockerClient().getImage(ALT_IMAGE).remove().catch(() => undefined);
    sb?.dispose();
  });

  it("up creates one labelled container; changing the base image replaces it; destroy removes it", async () => {
    const up = await stack.up({ color: "never" });
    const fleet = FleetOutputsSchema.parse(up.outputs[FLEET_OUTPUT_NAME]!.value);
    expect(fleet[ID]!.backend.kind).toBe("docker");
    const before = await containersFor(ID);
    expect(before).toHaveLength(1);

    image = ALT_IMAGE;
    const c = new StepCollector();
    await stack.preview({ onEvent: c.onEvent, color: "never" });
    expect(c.model().changes).toEqual([{ op: "replace", workspaceId: ID, kind: "docker", fields: [{ path: "backend.baseImage", replace: true }] }]);
    expect(renderPreviewMarkdown(c.model())).toContain("`backend.baseImage` (forces replacement)");

    const r = await stack.up({ color: "never" });
    expect(r.summary.resourceChanges).toMatchObject({ replace: 1 });
    const after = await containersFor(ID);
    expect(after).toHaveLength(1);
    expect(after[0]).not.toBe(before[0]);

    await stack.destroy({ color: "never" });
    expect(await containersFor(ID)).toEqual([]);
  });
});
