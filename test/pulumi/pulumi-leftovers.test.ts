import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import type { Stack } from "@pulumi/pulumi/automation/index.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { FLEET_OUTPUT_NAME, FleetOutputsSchema, type FleetOutputs, type WorkspaceSpecInput } from "../../sdk/contract/fleet.js";
import { WorkspaceFleet } from "../../providers/index.js";
import { metadataRecordPath } from "../../sdk/backends/local/driver.js";
import { ensureBuilt, makeSandbox, pulumiBinDir, stateResources, testStack, type Sandbox } from "./pulumi-helpers.js";

// The real engine on a shared 2-core machine: operations take seconds each, more under load.
vi.setConfig({ testTimeout: 300_000 });

/**
 * Folders a stack left behind with deleteData off (a replace to another basedir, a removal from the
 * fleet) are recorded by the fleet's data ledger and removed by a later destroy with deleteData on,
 * through the same drivers; a folder a live workspace uses again (another stack's) is kept, a
 * leftover that cannot be removed fails the destroy naming it and stays recorded, and another
 * stack's folders in the same parent folders are never touched. Local and bubblewrap backends.
 */
const bwrap = spawnSync("sh", ["-c", "command -v bwrap"]).status === 0;
const LEDGER = "pulumi-nodejs:dynamic/agentws:DataLedger";
let sbA: Sandbox;
let sbB: Sandbox;
let stackA: Stack;
let stackB: Stack;
let parent: string;
let specsA: WorkspaceSpecInput[] = [];
let specsB: WorkspaceSpecInput[] = [];
let deleteDataA = false;
/** Folders of stack A's first workspaces, by id. */
const firstFolders: Record<string, string> = {};

const dir = (name: string) => join(parent, name);
const local = (id: string, basedir: string): WorkspaceSpecInput => ({ workspaceId: id, backend: { kind: "local", basedir: dir(basedir) } });
const bubble = (id: string, userId: string, basedir: string): WorkspaceSpecInput => ({
  workspaceId: id,
  userId,
  backend: { kind: "bubblewrap", basedir: dir(basedir) },
});

/** Every path under `root` (folders end in "/"), relative to it, sorted: what "listing them" means here. */
function tree(root: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      out.push(relative(root, p) + (e.isDirectory() ? "/" : ""));
      if (e.isDirectory()) walk(p);
    }
  };
  if (existsSync(root)) walk(root);
  return out.sort();
}

function leftovers(): string[] {
  const ledger = stateResources(sbA, "leftovers-a").find((r) => r.type === LEDGER);
  return ((ledger?.outputs?.leftovers as { key: string }[] | undefined) ?? []).map((h) => h.key.replace(`${parent}/`, "")).sort();
}

async function upA(): Promise<FleetOutputs> {
  const r = await stackA.up({ color: "never" });
  expect(r.summary.result).toBe("succeeded");
  return FleetOutputsSchema.parse(r.outputs[FLEET_OUTPUT_NAME]!.value);
}

beforeAll(async () => {
  const bin = pulumiBinDir();
  ensureBuilt();
  sbA = makeSandbox("leftovers-a");
  sbB = makeSandbox("leftovers-b");
  parent = join(sbA.dir, "parent");
  mkdirSync(parent);
  stackA = await testStack(
    sbA,
    "leftovers-a",
    async () => ({ [FLEET_OUTPUT_NAME]: new WorkspaceFleet("fleet", { workspaces: specsA, deleteData: deleteDataA }).workspaces }),
    bin,
  );
  stackB = await testStack(
    sbB,
    "leftovers-b",
    async () => ({ [FLEET_OUTPUT_NAME]: new WorkspaceFleet("fleet", { workspaces: specsB, deleteData: false }).workspaces }),
    bin,
  );
});

afterAll(async () => {
  await stackA?.destroy({ color: "never" }).catch(() => undefined);
  await stackB?.destroy({ color: "never" }).catch(() => undefined);
  sbA?.dispose();
  sbB?.dispose();
});

describe.sequential("destroy with deleteData removes what earlier replaces and removals left behind", () => {
  it("two stacks share parent folders; stack A starts with deleteData off", async () => {
    specsB = [local("b-one", "loc"), ...(bwrap ? [bubble("b-bw", "user-b", "bw")] : [])];
    expect((await stackB.up({ color: "never" })).summary.result).toBe("succeeded");
    specsA = [
      local("stay", "loc"),
      local("moved", "loc"),
      local("gone", "loc"),
      local("back", "loc"),
      local("lost", "loc3"),
      ...(bwrap ? [bubble("bw-moved", "user-a", "bw")] : []),
    ];
    const fleet = await upA();
    for (const [id, w] of Object.entries(fleet)) {
      firstFolders[id] = w.location.hostPath!;
      writeFileSync(join(w.location.hostPath!, "note.txt"), id);
    }
    expect(leftovers()).toEqual([]);
  });

  it("a replace to another basedir and a removal keep the old folders, and the ledger records them", async () => {
    specsA = [local("stay", "loc"), local("moved", "loc2"), local("back", "loc2"), ...(bwrap ? [bubble("bw-moved", "user-a", "bw2")] : [])];
    const fleet = await upA();
    expect(fleet.moved!.location.hostPath).toBe(join(dir("loc2"), "moved"));
    // deleteData off keeps them: the files are there, the records (the backend objects) are not.
    for (const id of ["moved", "gone", "back", "lost", ...(bwrap ? ["bw-moved"] : [])]) expect(existsSync(join(firstFolders[id]!, "note.txt"))).toBe(true);
    expect(existsSync(metadataRecordPath(firstFolders.moved!))).toBe(false);
    expect(leftovers()).toEqual([
      ...(bwrap ? ["bubblewrap:bw|user-a|bw-moved"] : []),
      "local:loc/back",
      "local:loc/gone",
      "local:loc/moved",
      "local:loc3/lost",
    ]);
  });

  it("a workspace moved back takes its old folder again (no longer a leftover); another stack's workspace takes one too", async () => {
    specsA = [local("stay", "loc"), local("moved", "loc2"), local("back", "loc"), ...(bwrap ? [bubble("bw-moved", "user-a", "bw2")] : [])];
    const fleet = await upA();
    expect(fleet.back!.location.hostPath).toBe(firstFolders.back);
    expect(existsSync(join(firstFolders.back!, "note.txt"))).toBe(true);
    // Its folder in loc2 is the one left behind now.
    expect(leftovers()).toEqual([
      ...(bwrap ? ["bubblewrap:bw|user-a|bw-moved"] : []),
      "local:loc/gone",
      "local:loc/moved",
      "local:loc2/back",
      "local:loc3/lost",
    ]);
    // Stack B creates a workspace with the id of A's removed one in the same basedir: it adopts the folder.
    specsB = [...specsB, local("gone", "loc")];
    expect((await stackB.up({ color: "never" })).summary.result).toBe("succeeded");
    expect(existsSync(metadataRecordPath(firstFolders.gone!))).toBe(true);
  });

  it("a leftover that cannot be removed safely fails the destroy, naming it, and stays recorded", async () => {
    deleteDataA = true;
    await upA();
    // The left-behind folder is now a symlink to a folder of someone else's: never followed, never deleted.
    const precious = join(sbA.dir, "precious");
    mkdirSync(precious);
    writeFileSync(join(precious, "keep.txt"), "keep");
    rmSync(firstFolders.lost!, { recursive: true });
    symlinkSync(precious, firstFolders.lost!);
    const message = await stackA.destroy({ color: "never" }).then(
      () => "",
      (e: unknown) => (e instanceof Error ? e.message : String(e)),
    );
    expect(message).toContain(firstFolders.lost!);
    expect(message).toContain("workspace 'lost'");
    expect(existsSync(join(precious, "keep.txt"))).toBe(true);
    // Every workspace is gone; the ledger stays with all it could not finish.
    expect(
      stateResources(sbA, "leftovers-a")
        .filter((r) => r.type.startsWith("pulumi-nodejs:dynamic/"))
        .map((r) => r.type),
    ).toEqual([LEDGER]);
    expect(leftovers()).toContain("local:loc3/lost");
    rmSync(firstFolders.lost!);
    mkdirSync(firstFolders.lost!);
  });

  it("destroy with deleteData on then leaves no folder of stack A, and stack B's are untouched", async () => {
    // Stack A's user folder in the shared bubblewrap basedir holds only its left-behind workspace.
    const aUser = bwrap ? `${relative(dir("bw"), dirname(firstFolders["bw-moved"]!))}/` : "\0";
    const before = {
      loc: ["b-one", "gone"].flatMap((id) => tree(join(dir("loc"), id)).map((p) => `${id}/${p}`)),
      bw: tree(dir("bw")).filter((p) => !p.startsWith(aUser)),
    };
    const r = await stackA.destroy({ color: "never" });
    expect(r.summary.result).toBe("succeeded");
    // The folder stack B took over is kept, and the destroy says so.
    expect(r.stdout + r.stderr).toContain("kept the files of workspace 'gone'");
    expect(stateResources(sbA, "leftovers-a")).toEqual([]);
    // Stack A's own basedirs are empty; in the shared ones only stack B's folders and records remain, as they were.
    expect(tree(dir("loc2"))).toEqual([]);
    expect(tree(dir("loc3"))).toEqual([]);
    expect(tree(dir("bw2"))).toEqual([]);
    expect(readdirSync(dir("loc")).sort()).toEqual([".agentws", "b-one", "gone"]);
    expect(readdirSync(join(dir("loc"), ".agentws", "owners")).sort()).toEqual(["b-one.json", "gone.json"]);
    expect(["b-one", "gone"].flatMap((id) => tree(join(dir("loc"), id)).map((p) => `${id}/${p}`))).toEqual(before.loc);
    expect(readFileSync(join(firstFolders.gone!, "note.txt"), "utf8")).toBe("gone");
    if (bwrap) {
      expect(existsSync(firstFolders["bw-moved"]!)).toBe(false);
      expect(tree(dir("bw"))).toEqual(before.bw);
      expect(tree(dir("bw")).some((p) => p.startsWith(".agentws/index/"))).toBe(true);
    }
    expect(lstatSync(join(sbA.dir, "precious", "keep.txt")).isFile()).toBe(true);
  });
});
