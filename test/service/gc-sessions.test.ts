import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalDriver } from "../../sdk/backends/local/driver.js";
import { LocalWorkspaceManager } from "../../sdk/backends/local/index.js";
import { collectGarbage } from "../../sdk/kit/gc.js";

/** `agentws gc --store`: owned runtime workspaces no session names any more are collected; referenced ones never. */
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "gc-sessions-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("collectGarbage with the session store's workspace ids", () => {
  it("lists (dry run) and removes only the workspaces whose sessions are gone", async () => {
    const basedir = path.join(dir, "ws");
    const m = new LocalWorkspaceManager({ basedir });
    const kept = await m.getWorkspace("u1", "a1", "s1");
    const gone = await m.getWorkspace("u2", "a1", "s1");
    await m[Symbol.asyncDispose]();
    const driver = new LocalDriver({ kind: "local", basedir });
    const referenced = new Set([kept.workspaceId]);
    expect((await collectGarbage(driver)).orphans).toEqual([]); // owned: never collected without a store
    const dry = await collectGarbage(driver, { referenced });
    expect(dry.orphans.map((o) => o.workspaceId)).toEqual([gone.workspaceId]);
    expect(dry.removed).toEqual([]);
    expect(existsSync(gone.workdir)).toBe(true);
    const r = await collectGarbage(driver, { referenced, remove: true });
    expect(r.removed).toEqual([gone.workspaceId]);
    expect(existsSync(gone.workdir)).toBe(false);
    expect(existsSync(kept.workdir)).toBe(true);
  });
});
