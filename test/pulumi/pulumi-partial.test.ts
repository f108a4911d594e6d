import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Stack } from "@pulumi/pulumi/automation/index.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { WorkspaceResource } from "../../providers/index.js";
import { ensureBuilt, makeSandbox, pulumiBinDir, stateResources, testStack, type Sandbox } from "./pulumi-helpers.js";

// The real engine on a shared 2-core machine: operations take seconds each, more under load.
vi.setConfig({ testTimeout: 300_000 });

/**
 * A create that provisions the backend object but fails to initialize the layout: the error
 * carries the id, so the workspace lands in state; the next `up` completes it; destroy cleans up.
 */
let sb: Sandbox;
let stack: Stack;
let basedir: string;

beforeAll(async () => {
  const bin = pulumiBinDir();
  ensureBuilt();
  sb = makeSandbox("partial");
  basedir = join(sb.dir, "workspaces");
  stack = await testStack(
    sb,
    "partial",
    async () => {
      new WorkspaceResource("pf", { workspaceId: "pf", backend: { kind: "local", basedir }, deleteData: true });
    },
    bin,
  );
});

afterAll(() => sb?.dispose());

describe.sequential("partial create", () => {
  it("lands in state with its id, is completed by the next up, and is removed by destroy", async () => {
    // A file where the layout needs the skills/ folder: the folder is claimed, initialize fails.
    mkdirSync(join(basedir, "pf"), { recursive: true });
    writeFileSync(join(basedir, "pf", "skills"), "in the way");
    let message = "";
    try {
      await stack.up({ color: "never" });
    } catch (e) {
      message = e instanceof Error ? e.message : String(e);
    }
    expect(message).toContain("workspace 'pf' was created but initializing its layout or seeds failed");
    const inState = stateResources(sb, "partial").filter((r) => r.type.endsWith("agentws:Workspace"));
    expect(inState.map((r) => r.id)).toEqual(["pf"]);

    rmSync(join(basedir, "pf", "skills"));
    const r = await stack.up({ color: "never" });
    expect(r.summary.result).toBe("succeeded");
    expect(existsSync(join(basedir, "pf", "skills"))).toBe(true);

    await stack.destroy({ color: "never" });
    expect(readdirSync(basedir)).toEqual([]);
  });
});
