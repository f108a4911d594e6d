import { execFileSync } from "node:child_process";
import { promises as fs } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalWorkspace as PulumiWorkspace } from "@pulumi/pulumi/automation/index.js";
import { LocalDriver } from "../../sdk/backends/local/driver.js";
import type { FleetEntry } from "../../sdk/contract/fleet.js";
import { assignWorkspaceId, readStackOutputs, type ManagerEvent } from "../../sdk/manager/index.js";
import { LocalWorkspaceManager } from "../../sdk/backends/local/index.js";

// A real Pulumi engine with a file backend: a stack whose inline program exports a `workspaces` map.
let root: string;
let envVars: Record<string, string>;
let pulumiHome: string;
let savedPath: string | undefined;
let entry: FleetEntry;
const project = "fleet-test";

beforeAll(async () => {
  const bin = execFileSync("bash", [path.resolve("scripts/pulumi-toolchain.sh")], { encoding: "utf8" })
    .trim()
    .split("\n")
    .at(-1)!;
  savedPath = process.env.PATH;
  process.env.PATH = `${bin}:${process.env.PATH}`;
  root = await mkdtemp(path.join(tmpdir(), "mgr-stack-"));
  pulumiHome = path.join(root, "pulumi-home");
  await fs.mkdir(path.join(root, "state"), { recursive: true });
  envVars = { PULUMI_BACKEND_URL: `file://${path.join(root, "state")}`, PULUMI_CONFIG_PASSPHRASE: "", PULUMI_SKIP_UPDATE_CHECK: "true" };

  const workspaceId = assignWorkspaceId({ userId: "alice", agentId: "coder" });
  const driver = new LocalDriver({ kind: "local", basedir: path.join(root, "declared") });
  const description = await driver.create({ workspaceId, userId: "alice", agentId: "coder", managedBy: "pulumi" });
  await fs.writeFile(path.join(driver.folderFor(workspaceId), "from-stack.txt"), "declared");
  entry = {
    workspaceId,
    userId: "alice",
    agentId: "coder",
    backend: { kind: "local", basedir: path.join(root, "declared") },
    managedBy: "pulumi",
    location: description.location,
  };

  await fs.mkdir(path.join(root, "project"), { recursive: true });
  const stack = await PulumiWorkspace.createOrSelectStack(
    { stackName: "dev", projectName: project, program: async () => ({ workspaces: { [workspaceId]: entry }, unrelated: "x" }) },
    { envVars, pulumiHome, workDir: path.join(root, "project") },
  );
  await stack.up();
  const empty = await PulumiWorkspace.createOrSelectStack(
    { stackName: "empty", projectName: project, program: async () => ({ nothing: 1 }) },
    { envVars, pulumiHome },
  );
  await empty.up();
}, 300_000);

afterAll(async () => {
  process.env.PATH = savedPath;
  if (root) await rm(root, { recursive: true, force: true });
});

describe("WorkspaceManager.fromStack", () => {
  it("loads the declared fleet through the Automation API and reattaches it", async () => {
    const events: ManagerEvent[] = [];
    await using m = await LocalWorkspaceManager.fromStack(
      { stackName: "dev", projectName: project, envVars, pulumiHome },
      { basedir: path.join(root, "runtime"), onEvent: (e: ManagerEvent) => events.push(e) },
    );
    expect(m.declared(entry.workspaceId)).toMatchObject({ userId: "alice", managedBy: "pulumi" });
    const ws = await m.getWorkspace("alice", "coder");
    expect(ws.workdir).toBe(entry.location.hostPath);
    expect(await fs.readFile(path.join(ws.workdir, "from-stack.txt"), "utf8")).toBe("declared");
    expect(events).toMatchObject([{ type: "reattach", managedBy: "pulumi" }]);
  });

  it("reads a stack by its project folder too", async () => {
    expect(Object.keys(await readStackOutputs({ stackName: "dev", workDir: path.join(root, "project"), envVars, pulumiHome }))).toEqual([entry.workspaceId]);
  });

  it("says what is wrong when the stack or its output is missing", async () => {
    await expect(readStackOutputs({ stackName: "nope", projectName: project, envVars, pulumiHome })).rejects.toMatchObject({
      code: "unavailable",
      message: expect.stringContaining("stack 'nope'"),
    });
    await expect(readStackOutputs({ stackName: "empty", projectName: project, envVars, pulumiHome })).rejects.toMatchObject({
      code: "invalid_argument",
      message: expect.stringContaining("has no 'workspaces' output"),
    });
    await expect(readStackOutputs({ stackName: "dev", envVars, pulumiHome })).rejects.toMatchObject({ field: "projectName" });
  });
});
