import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { IsolationPolicy, WorkspaceManager, type ManagedIdentity, assignWorkspaceId, blake2bHex, sessionWorkspaceId } from "../../sdk/manager/index.js";
import { FolderWorkspace } from "../support/manager-fixtures.js";

describe("assignWorkspaceId", () => {
  it("reproduces the reference's test vectors", () => {
    expect(assignWorkspaceId({ userId: "u1", agentId: "a1" }, IsolationPolicy.PER_AGENT)).toBe("4bf1218b645ff727");
    expect(assignWorkspaceId({ userId: "u1", agentId: "a1" })).toBe("4bf1218b645ff727");
    expect(assignWorkspaceId({ userId: "u1", agentId: "a1" }, IsolationPolicy.PER_USER)).toBe("48ea3da4179df93b");
    // The reference's empty-user fallback hashes "::a1"; an empty user is refused here (it skipped the owner check).
    expect(blake2bHex("::a1", 8)).toBe("19f69055a5066d5f");
    expect(() => assignWorkspaceId({ userId: "", agentId: "a1" }, IsolationPolicy.PER_AGENT)).toThrow(/userId: must not be empty or blank/);
    expect(blake2bHex("u", 16)).toBe("13d650693b19482ad7061da30b45bfbc");
  });

  it("keeps the reference's string values", () => {
    expect(IsolationPolicy).toEqual({ PER_AGENT: "per_agent", PER_SESSION: "per_session", PER_USER: "per_user" });
  });

  it("ignores the session under PER_AGENT and PER_USER, mints fresh ids under PER_SESSION", () => {
    const a = assignWorkspaceId({ userId: "u1", agentId: "a1", sessionId: "s1" });
    const b = assignWorkspaceId({ userId: "u1", agentId: "a1", sessionId: "s2" });
    expect(a).toBe(b);
    const s1 = assignWorkspaceId({ userId: "u1", agentId: "a1", sessionId: "s1" }, IsolationPolicy.PER_SESSION);
    const s2 = assignWorkspaceId({ userId: "u1", agentId: "a1", sessionId: "s1" }, IsolationPolicy.PER_SESSION);
    expect(s1).toMatch(/^[0-9a-f]{32}$/);
    expect(s1).not.toBe(s2);
  });

  it("refuses user ids that would make two users' ids collide", () => {
    // "a" + "::" + "::b" === "a:" + "::" + ":b": without the check these two users would share a workspace.
    expect(() => assignWorkspaceId({ userId: "a:", agentId: ":b" })).toThrow(/userId/);
    expect(() => assignWorkspaceId({ userId: "a::b", agentId: "c" })).toThrow(/userId/);
    expect(assignWorkspaceId({ userId: "a", agentId: "::b" })).toMatch(/^[0-9a-f]{16}$/);
  });

  it("rejects an unknown policy, naming the field", () => {
    expect(() => assignWorkspaceId({ userId: "u", agentId: "a" }, "per_team" as IsolationPolicy)).toThrow(/isolation: must be one of/);
  });

  it("derives one stable id per session for getWorkspace, distinct per user, agent and session", () => {
    const base = { userId: "u1", agentId: "a1", sessionId: "s1" };
    const id = sessionWorkspaceId(base);
    expect(sessionWorkspaceId(base)).toBe(id);
    expect(id).toBe(blake2bHex("session::u1::a1::s1", 8));
    expect(
      new Set([
        id,
        sessionWorkspaceId({ ...base, userId: "u2" }),
        sessionWorkspaceId({ ...base, agentId: "a2" }),
        sessionWorkspaceId({ ...base, sessionId: "s2" }),
      ]).size,
    ).toBe(4);
    expect(() => sessionWorkspaceId({ userId: "u1", agentId: "a1" })).toThrow(/sessionId: is required/);
  });
});

describe("WorkspaceManager id resolution", () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "mgr-ids-"));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });
  const manager = (isolation: IsolationPolicy) =>
    new WorkspaceManager<FolderWorkspace>({ isolation, factory: (identity) => new FolderWorkspace(identity, path.join(root, identity.workspaceId)) });

  it("maps calls by policy, and an explicit workspaceId beats the policy", async () => {
    await using m = manager(IsolationPolicy.PER_AGENT);
    expect((await m.getWorkspace("u1", "a1", "s1")).workspaceId).toBe("4bf1218b645ff727");
    expect((await m.getWorkspace("u1", "a1", "s1", "chosen-id")).workspaceId).toBe("chosen-id");
    m.isolation = IsolationPolicy.PER_USER;
    expect((await m.getWorkspace("u1", "a1", "s1")).workspaceId).toBe("48ea3da4179df93b");
    expect((await m.getWorkspace("u1", "a1", "s1", "chosen-id")).workspaceId).toBe("chosen-id");
    m.isolation = IsolationPolicy.PER_SESSION;
    const s1 = await m.getWorkspace("u1", "a1", "s1");
    expect(s1.workspaceId).toBe(sessionWorkspaceId({ userId: "u1", agentId: "a1", sessionId: "s1" }));
    expect(await m.getWorkspace("u1", "a1", "s1")).toBe(s1);
    expect((await m.getWorkspace("u1", "a1", "s2")).workspaceId).not.toBe(s1.workspaceId);
  });

  it("a policy change leaves existing ids and their workspaces alone", async () => {
    await using m = manager(IsolationPolicy.PER_AGENT);
    const before = await m.getWorkspace("u1", "a1", "s1");
    await before.writeFile("notes.txt", "kept");
    m.isolation = IsolationPolicy.PER_USER;
    const after = await m.getWorkspace("u1", "a1", "s1");
    expect(after.workspaceId).toBe("48ea3da4179df93b");
    // The PER_AGENT workspace is still cached under its id, alive, and its files untouched.
    expect(m.peek("4bf1218b645ff727")).toBe(before);
    expect(before.alive).toBe(true);
    expect(await m.getWorkspace("u1", "a1", "s1", "4bf1218b645ff727")).toBe(before);
    expect((await before.sandbox.readFile("notes.txt")).toString()).toBe("kept");
    expect(m.cachedIds().sort()).toEqual(["48ea3da4179df93b", "4bf1218b645ff727"]);

    // A new manager with another policy over the same folders reaches the old one by explicit id.
    await using m2 = manager(IsolationPolicy.PER_SESSION);
    const reopened = await m2.getWorkspace("u1", "a1", "s9", "4bf1218b645ff727");
    expect((await reopened.sandbox.readFile("notes.txt")).toString()).toBe("kept");
  });

  it("never confuses two users whose ids differ only around separators", async () => {
    await using m = manager(IsolationPolicy.PER_AGENT);
    const pairs: Array<[string, string]> = [
      ["a\u0000b", "c"],
      ["a", "b\u0000c"],
      ["a|1", "b"],
      ["a", "1|b"],
      ["a", "::b"],
    ];
    const ids = await Promise.all(pairs.map(([u, a]) => m.getWorkspace(u, a).then((w) => w.workspaceId)));
    expect(ids).toEqual(pairs.map(([userId, agentId]) => assignWorkspaceId({ userId, agentId })));
    expect(new Set(ids).size).toBe(pairs.length);
    // The memoised path gives the same answers.
    expect(await Promise.all(pairs.map(([u, a]) => m.getWorkspace(u, a).then((w) => w.workspaceId)))).toEqual(ids);
    await expect(m.getWorkspace(undefined as never, "a")).rejects.toMatchObject({ field: "userId" });
  });

  it("refuses ids that could escape or name nothing, before any provisioning", async () => {
    let built = 0;
    await using m = new WorkspaceManager<FolderWorkspace>({
      factory: (identity) => {
        built++;
        return new FolderWorkspace(identity, path.join(root, identity.workspaceId));
      },
    });
    for (const bad of ["../etc", "/etc", "a/../../etc", "", ".hidden", "a b", "x".repeat(64)])
      await expect(m.getWorkspace("u1", "a1", "s1", bad)).rejects.toMatchObject({ code: "invalid_argument", field: "workspaceId" });
    await expect(m.getWorkspace("u::x", "a1")).rejects.toMatchObject({ code: "invalid_argument", field: "userId" });
    expect(built).toBe(0);
  });

  it("rejects bad options naming the field", () => {
    const factory = (identity: ManagedIdentity) => new FolderWorkspace(identity, root);
    expect(() => new WorkspaceManager({ factory, ttl: -1 })).toThrow(/options\.ttl/);
    expect(() => new WorkspaceManager({ factory, isolation: "per_team" as IsolationPolicy })).toThrow(/options\.isolation/);
    expect(() => new WorkspaceManager({ factory, prewarm: { size: -2 } })).toThrow(/options\.prewarm\.size/);
    expect(() => new WorkspaceManager({ factory: undefined as never })).toThrow(/factory/);
    expect(() => new WorkspaceManager({ factory, tll: 5 } as never)).toThrow(/options: Unrecognized key/);
  });
});
