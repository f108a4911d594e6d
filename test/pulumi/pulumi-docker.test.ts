import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Stack } from "@pulumi/pulumi/automation/index.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { dockerClient } from "../../sdk/backends/docker/client.js";
import { FLEET_OUTPUT_NAME, FleetOutputsSchema, type FleetOutputs } from "../../sdk/contract/fleet.js";
import { WorkspaceFleet } from "../../providers/index.js";
import { StepCollector, upWithPreview, withPlanEnv } from "../../sdk/cli/engine.js";
import { renderPreviewMarkdown } from "../../sdk/cli/preview-markdown.js";
import type { PreviewModel } from "../../sdk/cli/preview-model.js";
import { BASE_IMAGE, dockerEngine } from "../support/docker-engine.js";
import { bounded, ensureBuilt, makeSandbox, pulumiBinDir, testStack, type Sandbox } from "./pulumi-helpers.js";

// The real engine on a shared 2-core machine: operations take seconds each, more under load.
vi.setConfig({ testTimeout: 300_000 });

/**
 * Docker workspaces on the real engine, two stacks side by side: a base image that does not exist
 * fails the preview and the up while the old container keeps running with its files; a stopped
 * container is reported by refresh and started by `up --refresh`; `destroy`
 * with deleteData leaves no container, folder or image of the stack (a folder an earlier move left
 * behind with deleteData off included), and the other stack's container and image are untouched.
 */
const engine = await dockerEngine();
const OWN_IMAGE = `agentws-base:pulumi-docker-${process.pid}`;
const MISSING_IMAGE = `agentws-base:missing-${process.pid}`;
const SECOND_IMAGE = `agentws-base:pulumi-docker-second-${process.pid}`;
const A = `pulumi-docker-a-${process.pid}`;
const B = `pulumi-docker-b-${process.pid}`;
let sbA: Sandbox;
let sbB: Sandbox;
let stackA: Stack;
let stackB: Stack;
let imageA = OWN_IMAGE;
let deleteDataA = true;
let dataA = "data";

const docker = () => dockerClient();
const containerOf = async (id: string) => (await docker().listContainers({ all: true, filters: { label: [`agent-workspaces.workspace-id=${id}`] } }))[0];
/** Workspace images whose recorded inputs name `base`. */
const imagesFrom = async (base: string) =>
  (await docker().listImages({ filters: { label: ["agent-workspaces.image-inputs"] } })).filter(
    (i) => JSON.parse(i.Labels?.["agent-workspaces.image-inputs"] ?? "{}").baseImage === base,
  );
/** Workspace images from these bases still on the engine, once none is left or after 60 s (a removal on a busy engine may outlast the driver's 30 s bound and finish on the engine's side). */
async function imagesLeft(...bases: string[]) {
  let left: Awaited<ReturnType<typeof imagesFrom>> = [];
  for (let i = 0; i < 60; i++) {
    left = (await Promise.all(bases.map(imagesFrom))).flat();
    if (!left.length) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  return left.map((i) => i.RepoTags);
}
const fleetOf = (o: Record<string, { value: unknown }>): FleetOutputs => FleetOutputsSchema.parse(o[FLEET_OUTPUT_NAME]!.value);

describe.skipIf(!engine).sequential("docker workspaces on the real Pulumi engine", () => {
  beforeAll(async () => {
    const bin = pulumiBinDir();
    ensureBuilt();
    for (const name of [OWN_IMAGE, SECOND_IMAGE]) {
      const [repo, tag] = name.split(":");
      await docker().getImage(BASE_IMAGE).tag({ repo: repo!, tag: tag! });
    }
    sbA = makeSandbox("docker-a");
    sbB = makeSandbox("docker-b");
    const program = (id: string, sb: Sandbox, image: () => string, deleteData: () => boolean, data: () => string) => async () => {
      const fleet = new WorkspaceFleet("fleet", {
        workspaces: [
          {
            workspaceId: id,
            userId: "ops",
            agentId: "builder",
            backend: { kind: "docker", baseImage: image(), basedir: join(sb.dir, data()) },
            tags: { team: "a" },
          },
        ],
        deleteData: deleteData(),
      });
      return { [FLEET_OUTPUT_NAME]: fleet.workspaces };
    };
    stackA = await testStack(
      sbA,
      "docker",
      program(
        A,
        sbA,
        () => imageA,
        () => deleteDataA,
        () => dataA,
      ),
      bin,
    );
    stackB = await testStack(
      sbB,
      "docker",
      program(
        B,
        sbB,
        () => BASE_IMAGE,
        () => false,
        () => "data",
      ),
      bin,
    );
  });

  afterAll(async () => {
    await stackA?.destroy({ color: "never" }).catch(() => undefined);
    await stackB?.destroy({ color: "never" }).catch(() => undefined);
    for (const base of [OWN_IMAGE, SECOND_IMAGE]) {
      for (const img of engine ? await imagesFrom(base) : []) await bounded(docker().getImage(img.Id).remove());
      await bounded(docker().getImage(base).remove());
    }
    sbA?.dispose();
    sbB?.dispose();
  }, 600_000);

  it("a base image that does not exist fails preview and up; the old container keeps running with its files", async () => {
    const upA = fleetOf((await upWithPreview(stackA, { color: "never" })).outputs);
    await upWithPreview(stackB, { color: "never" });
    const before = await containerOf(A);
    expect(before?.State).toBe("running");
    expect(upA[A]!.location.containerId).toBe(before!.Id);
    writeFileSync(join(upA[A]!.location.hostPath!, "marker.txt"), "kept");

    imageA = MISSING_IMAGE;
    const c = new StepCollector();
    await expect(withPlanEnv(stackA, { preview: true }, () => stackA.preview({ onEvent: c.onEvent, color: "never" }))).rejects.toThrow(
      /backend\.baseImage: 'agentws-base:missing-\d+' is not on the Docker engine/,
    );
    expect(renderPreviewMarkdown(c.model())).toContain("backend.baseImage");
    await expect(upWithPreview(stackA, { color: "never" })).rejects.toThrow(/backend\.baseImage/);
    // Even without the CLI's preview, the provider checks the new inputs before the old container goes.
    await expect(upWithPreview(stackA, { color: "never", skipPreview: true })).rejects.toThrow(/backend\.baseImage/);
    const after = await containerOf(A);
    expect(after?.Id).toBe(before!.Id);
    expect(after?.State).toBe("running");
    expect(existsSync(join(upA[A]!.location.hostPath!, "marker.txt"))).toBe(true);

    imageA = OWN_IMAGE;
    const clean = new StepCollector();
    await withPlanEnv(stackA, { preview: true }, () => stackA.preview({ onEvent: clean.onEvent, color: "never" }));
    expect(clean.model().changes).toEqual([]);
  });

  it("a stopped container: refresh reports it, `up --refresh` starts it (the same container) in one command", async () => {
    const before = await containerOf(A);
    await docker().getContainer(before!.Id).stop({ t: 0 });
    let plan: PreviewModel | undefined;
    await upWithPreview(stackA, { color: "never", refresh: true, onPlan: (m) => (plan = m) });
    // The plan names it as an update of A (its state field is not yet reliably in the preview's events: see the report).
    expect(plan!.changes).toMatchObject([{ op: "update", workspaceId: A }]);
    const after = await containerOf(A);
    expect(after?.Id).toBe(before!.Id);
    expect(after?.State).toBe("running");
    const clean = new StepCollector();
    await withPlanEnv(stackA, { preview: true }, () => stackA.preview({ onEvent: clean.onEvent, color: "never", refresh: true }));
    expect(clean.model().changes).toEqual([]);
  });

  it("a changed base image re-creates the container on a new workspace image and drops the old one", async () => {
    const before = await containerOf(A);
    expect(await imagesFrom(OWN_IMAGE)).toHaveLength(1);
    imageA = SECOND_IMAGE;
    await upWithPreview(stackA, { color: "never" });
    const after = await containerOf(A);
    expect(after?.Id).not.toBe(before!.Id);
    expect(after?.State).toBe("running");
    expect(await imagesFrom(SECOND_IMAGE)).toHaveLength(1);
    expect(await imagesLeft(OWN_IMAGE)).toEqual([]);
  });

  it("with deleteData off, a move to another basedir replaces the container and leaves the old folder, which the data ledger records", async () => {
    deleteDataA = false;
    await upWithPreview(stackA, { color: "never" });
    const before = await containerOf(A);
    dataA = "data2";
    const moved = fleetOf((await upWithPreview(stackA, { color: "never" })).outputs);
    expect(moved[A]!.location.hostPath).toBe(join(sbA.dir, "data2", A));
    expect((await containerOf(A))?.Id).not.toBe(before!.Id);
    expect(existsSync(join(sbA.dir, "data", A, "marker.txt"))).toBe(true);
    deleteDataA = true;
    await upWithPreview(stackA, { color: "never" });
  });

  it("destroy with deleteData leaves no container, folder or image of the stack, and nothing of the other stack is touched", async () => {
    expect(await imagesFrom(SECOND_IMAGE)).toHaveLength(1);
    const other = await containerOf(B);
    const otherImage = other!.ImageID;
    await stackA.destroy({ color: "never" });
    expect(await containerOf(A)).toBeUndefined();
    // The folder the move left behind too (the data ledger's), not only the current one.
    expect(readdirSync(join(sbA.dir, "data"))).toEqual([]);
    expect(readdirSync(join(sbA.dir, "data2"))).toEqual([]);
    // Every workspace image the stack built is gone (the first by the update above, the second by the destroy).
    expect(await imagesLeft(OWN_IMAGE, SECOND_IMAGE)).toEqual([]);
    // The other stack: its container still runs on its image, its folder is there.
    const still = await containerOf(B);
    expect(still?.Id).toBe(other!.Id);
    expect(still?.State).toBe("running");
    await expect(docker().getImage(otherImage).inspect()).resolves.toBeDefined();
    expect(existsSync(join(sbB.dir, "data", B))).toBe(true);
  });
});
