import { execFile } from "node:child_process";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadDriver } from "../../../sdk/backends/load.js";

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

describe("agentws gc", () => {
  let base: string;
  beforeAll(async () => {
    base = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-gc-"));
  });
  afterAll(() => fs.rm(base, { recursive: true, force: true }));

  it("lists unowned runtime workspaces as a dry run, removes them only with --yes, never touches owned ones", async () => {
    const driver = await loadDriver({ kind: "local", basedir: base });
    await driver.create({ workspaceId: "orphan", managedBy: "runtime" });
    await driver.create({ workspaceId: "owned", managedBy: "runtime", userId: "alice" });
    await driver.create({ workspaceId: "declared", managedBy: "pulumi" });
    // A folder without our record is not ours: never listed, never removed.
    await fs.mkdir(path.join(base, "stranger"));
    const cli = (...args: string[]) =>
      run(process.execPath, [path.join(ROOT, "bin/agentws.js"), "gc", "--kind", "local", "--basedir", base, ...args], { env: process.env });

    const dry = JSON.parse((await cli()).stdout) as { dryRun: boolean; results: Array<{ orphans: Array<{ workspaceId: string }>; removed: string[] }> };
    expect(dry.dryRun).toBe(true);
    expect(dry.results[0]!.orphans.map((o) => o.workspaceId)).toEqual(["orphan"]);
    expect(dry.results[0]!.removed).toEqual([]);
    expect(await driver.find("orphan")).not.toBeNull();

    const wet = JSON.parse((await cli("--yes")).stdout) as { dryRun: boolean; results: Array<{ removed: string[] }> };
    expect(wet.dryRun).toBe(false);
    expect(wet.results[0]!.removed).toEqual(["orphan"]);
    expect(await driver.find("orphan")).toBeNull();
    await expect(fs.stat(path.join(base, "orphan"))).rejects.toMatchObject({ code: "ENOENT" });
    expect(await driver.find("owned")).not.toBeNull();
    expect(await driver.find("declared")).not.toBeNull();
    expect((await fs.stat(path.join(base, "stranger"))).isDirectory()).toBe(true);
  });

  it("fails on an unknown kind, naming the known ones", async () => {
    const r = await run(process.execPath, [path.join(ROOT, "bin/agentws.js"), "gc", "--kind", "nope"], { env: process.env }).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect((r as { code: number }).code).toBe(1);
    expect((r as { stderr: string }).stderr).toContain("known: local, bubblewrap, docker");
  });
});
