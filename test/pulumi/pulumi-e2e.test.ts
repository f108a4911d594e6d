import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Stack } from "@pulumi/pulumi/automation/index.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { FLEET_OUTPUT_NAME, FleetOutputsSchema, type WorkspaceSpecInput } from "../../sdk/contract/fleet.js";
import { WorkspaceFleet } from "../../providers/index.js";
import { StepCollector, upWithPreview, withPlanEnv } from "../../sdk/cli/engine.js";
import { renderPreviewMarkdown } from "../../sdk/cli/preview-markdown.js";
import { metadataRecordPath } from "../../sdk/backends/local/driver.js";
import { ensureBuilt, makeSandbox, pulumiBinDir, stateResources, testStack, type Sandbox } from "./pulumi-helpers.js";

// The real engine on a shared 2-core machine: operations take seconds each, more under load.
vi.setConfig({ testTimeout: 300_000 });

/**
 * The real Pulumi engine (CLI built from Go modules, file backend, temp PULUMI_HOME) driving
 * WorkspaceResource over the real local driver. One stack walks the whole lifecycle in order.
 */
const PROJECT = "e2e";
let sb: Sandbox;
let stack: Stack;
let basedir: string;
let specs: WorkspaceSpecInput[] = [];

/** The local driver's record of a workspace folder, beside it (out of the agent's reach). */
const META = (folder: string) => metadataRecordPath(folder);
const SKILLS = join(import.meta.dirname, "..", "fixtures", "skills");
const folderOf = (dir: string, id: string) => join(dir, id);
const metaOf = (dir: string, id: string) => JSON.parse(readFileSync(META(folderOf(dir, id)), "utf8")) as { tags: Record<string, string> };

async function preview() {
  const c = new StepCollector();
  const r = await withPlanEnv(stack, { preview: true }, () => stack.preview({ onEvent: c.onEvent, diff: true, color: "never" }));
  return { model: c.model(), stdout: r.stdout, summary: r.changeSummary };
}

beforeAll(async () => {
  const bin = pulumiBinDir();
  ensureBuilt();
  sb = makeSandbox("e2e");
  basedir = join(sb.dir, "workspaces");
  stack = await testStack(
    sb,
    PROJECT,
    async () => {
      const fleet = new WorkspaceFleet("fleet", { workspaces: specs, deleteData: true });
      return { [FLEET_OUTPUT_NAME]: fleet.workspaces };
    },
    bin,
  );
});

afterAll(async () => {
  await stack?.destroy({ color: "never" }).catch(() => undefined);
  sb?.dispose();
});

describe.sequential("WorkspaceFleet on the real Pulumi engine", () => {
  it("up creates the workspaces and the fleet output", async () => {
    specs = [
      { workspaceId: "alpha", backend: { kind: "local", basedir }, tags: { team: "a" }, ttlSeconds: 600, skillPaths: [join(SKILLS, "alpha")] },
      { userId: "u1", agentId: "a1", backend: { kind: "local", basedir } },
    ];
    const r = await stack.up({ color: "never" });
    expect(r.summary.result).toBe("succeeded");
    const fleet = FleetOutputsSchema.parse(r.outputs[FLEET_OUTPUT_NAME]!.value);
    expect(Object.keys(fleet).sort()).toEqual(["4bf1218b645ff727", "alpha"]);
    expect(fleet.alpha).toMatchObject({ workspaceId: "alpha", managedBy: "pulumi", tags: { team: "a" }, ttlSeconds: 600, backend: { kind: "local", basedir } });
    expect(fleet.alpha!.location.hostPath).toBe(folderOf(basedir, "alpha"));
    expect(fleet["4bf1218b645ff727"]).toMatchObject({ userId: "u1", agentId: "a1" });
    for (const id of Object.keys(fleet)) expect(existsSync(META(folderOf(basedir, id)))).toBe(true);
    expect(metaOf(basedir, "alpha").tags).toEqual({ team: "a" });
    // Layout and seeds are initialized at create.
    expect(existsSync(join(folderOf(basedir, "alpha"), "skills", ".seed", "alpha", "SKILL.md"))).toBe(true);
    const types = stateResources(sb, PROJECT).map((x) => x.type);
    expect(types.filter((t) => t === "pulumi-nodejs:dynamic/agentws:Workspace")).toHaveLength(2);
  });

  it("a second up changes nothing", async () => {
    const p = await preview();
    expect(p.model.changes).toEqual([]);
    expect(p.model.unchanged).toBe(2);
    const r = await stack.up({ color: "never" });
    const changed = Object.entries(r.summary.resourceChanges ?? {}).filter(([op, n]) => op !== "same" && n);
    expect(changed).toEqual([]);
  });

  it("a different provider build in state is not a change, and refresh still runs with it", async () => {
    // State written by another build of the provider shim (as after upgrading the package).
    const state = await stack.exportStack();
    const resources = (state.deployment as { resources: { type: string; inputs?: Record<string, string>; outputs?: Record<string, string> }[] }).resources;
    let edited = 0;
    for (const r of resources)
      if (r.type === "pulumi-nodejs:dynamic/agentws:Workspace") {
        r.inputs!.__provider += "\n// built by an older release";
        r.outputs!.__provider += "\n// built by an older release";
        edited++;
      }
    expect(edited).toBe(2);
    await stack.importStack(state);
    const p = await preview();
    expect(p.model.changes).toEqual([]);
    expect(p.stdout).not.toContain("__provider");
    const refreshed = await stack.refresh({ color: "never" });
    expect(Object.entries(refreshed.summary.resourceChanges ?? {}).filter(([op, n]) => op !== "same" && n)).toEqual([]);
  });

  it("changing tags and seeds updates in place, and preview --diff and markdown say exactly that", async () => {
    writeFileSync(join(folderOf(basedir, "alpha"), "marker.txt"), "kept");
    specs[0] = { ...specs[0]!, tags: { team: "b" }, skillPaths: [join(SKILLS, "alpha"), join(SKILLS, "beta")] };
    const p = await preview();
    expect(p.model.changes).toMatchObject([
      {
        op: "update",
        workspaceId: "alpha",
        kind: "local",
        data: "kept",
        fields: [
          { path: "skillPaths", replace: false },
          { path: "tags.team", replace: false, from: '"a"', to: '"b"' },
        ],
      },
    ]);
    expect(p.stdout).toMatch(/~ pulumi-nodejs:dynamic\/agentws:Workspace: \(update\)/);
    expect(p.stdout).toMatch(/team: "a" => "b"/);
    expect(p.stdout).not.toContain("__provider");
    const md = renderPreviewMarkdown(p.model, { stack: "test" });
    expect(md).toContain("**1 to update** · 1 unchanged");
    expect(md).toContain("| `alpha` | — | local | `skillPaths`: ");
    expect(md).toContain('`tags.team`: `"a"` → `"b"` | same folder; files kept |');
    expect(md).not.toContain("replace");

    const r = await stack.up({ color: "never" });
    expect(r.summary.resourceChanges).toMatchObject({ update: 1 });
    expect(r.summary.resourceChanges?.create ?? 0).toBe(0);
    expect(readFileSync(join(folderOf(basedir, "alpha"), "marker.txt"), "utf8")).toBe("kept");
    expect(metaOf(basedir, "alpha").tags).toEqual({ team: "b" });
    expect(existsSync(join(folderOf(basedir, "alpha"), "skills", ".seed", "beta", "SKILL.md"))).toBe(true);
    expect(FleetOutputsSchema.parse(r.outputs[FLEET_OUTPUT_NAME]!.value).alpha!.tags).toEqual({ team: "b" });
  });

  it("changing a backend option replaces the workspace (the new folder first); with deleteData that needs the opt-in", async () => {
    const moved = join(sb.dir, "workspaces-2");
    specs[0] = { ...specs[0]!, backend: { kind: "local", basedir: moved } };
    const p = await preview();
    expect(p.model.changes).toMatchObject([
      { op: "replace", workspaceId: "alpha", kind: "local", data: "deleted", fields: [{ path: "backend.basedir", replace: true }] },
    ]);
    expect(p.stdout).toMatch(/\+-pulumi-nodejs:dynamic\/agentws:Workspace: \(replace\)/);
    const md = renderPreviewMarkdown(p.model);
    expect(md).toContain("**1 to replace** · 1 unchanged");
    expect(md).toContain("(forces replacement) | new folder; **files deleted** |");
    await expect(upWithPreview(stack, { color: "never" })).rejects.toThrow(/deletes its files/);
    expect(existsSync(folderOf(basedir, "alpha"))).toBe(true);

    const r = await upWithPreview(stack, { color: "never", allowDataLoss: true });
    expect(r.summary.resourceChanges).toMatchObject({ replace: 1 });
    expect(existsSync(folderOf(basedir, "alpha"))).toBe(false);
    expect(existsSync(META(folderOf(moved, "alpha")))).toBe(true);
    basedir = moved;
    // The other workspace moves too (it deletes its old folder as well, so it needs the same opt-in).
    specs[1] = { ...specs[1]!, backend: { kind: "local", basedir: moved } };
    await upWithPreview(stack, { color: "never", allowDataLoss: true });
  });

  it("a workspace deleted out of band: refresh reports it, up recreates it", async () => {
    rmSync(folderOf(basedir, "alpha"), { recursive: true, force: true });
    const events = new StepCollector();
    const refreshed = await stack.refresh({ onEvent: events.onEvent, color: "never" });
    expect(refreshed.summary.resourceChanges).toMatchObject({ delete: 1 });
    expect(stateResources(sb, PROJECT).filter((x) => x.id === "alpha")).toHaveLength(0);

    const p = await preview();
    expect(p.model.changes).toEqual([{ op: "create", workspaceId: "alpha", kind: "local", fields: [] }]);
    const r = await stack.up({ color: "never" });
    expect(r.summary.resourceChanges).toMatchObject({ create: 1 });
    expect(existsSync(META(folderOf(basedir, "alpha")))).toBe(true);
  });

  it("removing a workspace from the fleet deletes it; destroy leaves nothing behind", async () => {
    specs = [specs[0]!];
    const p = await preview();
    // The preview names the owner and says the files go with it (deleteData is on).
    expect(p.model.changes).toEqual([
      { op: "delete", workspaceId: "4bf1218b645ff727", userId: "u1", agentId: "a1", kind: "local", data: "deleted", fields: [] },
    ]);
    await stack.up({ color: "never" });
    expect(existsSync(folderOf(basedir, "4bf1218b645ff727"))).toBe(false);

    const r = await stack.destroy({ color: "never" });
    expect(r.summary.result).toBe("succeeded");
    expect(readdirSync(basedir)).toEqual([]);
    expect(stateResources(sb, PROJECT)).toEqual([]);
  });
});
