import { spawnSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { BubblewrapDriver } from "../../sdk/backends/bubblewrap/driver.js";
import { newReplicaId } from "../../sdk/contract/leases.js";
import { main } from "../../sdk/cli/main.js";

const bwrap = spawnSync("sh", ["-c", "command -v bwrap"]).status === 0;
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "status-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The command in process, stdout captured. */
async function status(args: string[]): Promise<{ code: number; rows: Array<Record<string, string>> }> {
  let out = "";
  const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
    out += chunk.toString();
    return true;
  });
  const quiet = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
  try {
    const code = await main(["status", ...args, "--json"]);
    return { code, rows: code === 0 ? (JSON.parse(out) as Array<Record<string, string>>) : [] };
  } finally {
    spy.mockRestore();
    quiet.mockRestore();
  }
}

describe.skipIf(!bwrap)("agentws status says why a running workspace is awake", () => {
  it("names the replicas holding a fresh lease, and says when none does", async () => {
    const basedir = path.join(dir, "bwrap");
    const driver = new BubblewrapDriver({ kind: "bubblewrap", basedir });
    await driver.create({ workspaceId: "awake-1", userId: "u", agentId: "a", managedBy: "runtime" });
    await driver.create({ workspaceId: "awake-2", userId: "u", agentId: "b", managedBy: "runtime" });
    const replica = newReplicaId();
    await driver.leases.renew("awake-1", replica, 600_000);

    const r = await status(["--kind", "bubblewrap", "--basedir", basedir]);
    expect(r.code).toBe(0);
    const byId = Object.fromEntries(r.rows.map((row) => [row.workspace, row]));
    expect(byId["awake-1"]?.awake).toMatch(new RegExp(`^leased by 1 replica\\(s\\) \\(${replica.slice(0, 8)}\\) until \\d\\d:\\d\\d:\\d\\d UTC$`));
    expect(byId["awake-2"]?.awake).toMatch(/^no lease/);

    // Released: nothing holds it any more.
    await driver.leases.release("awake-1", replica);
    const after = await status(["--kind", "bubblewrap", "--basedir", basedir]);
    expect(after.rows.find((row) => row.workspace === "awake-1")?.awake).toMatch(/^no lease/);
  });
});
