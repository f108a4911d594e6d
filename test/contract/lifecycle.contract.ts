import { describe, expect, it } from "vitest";
import { useWorkspaces, uniqueId, type WorkspaceFixture } from "./fixture.js";
import { exists, expectCode, names, readText, skillPath } from "./helpers.js";

export function lifecycleContract(fixture: WorkspaceFixture): void {
  describe(`${fixture.name}: lifecycle`, () => {
    const { open, track } = useWorkspaces(fixture);

    it("initialize is idempotent, also when called concurrently", async () => {
      const ws = track(await fixture.create({}));
      expect(ws.isAlive).toBe(false);
      await expectCode(
        Promise.resolve().then(() => ws.getBackend()),
        "closed",
        /initialize/,
      );
      await Promise.all([ws.initialize(), ws.initialize(), ws.initialize()]);
      expect(ws.isAlive).toBe(true);
      const backend = ws.getBackend();
      await ws.initialize();
      expect(ws.getBackend()).toBe(backend);
    });

    it("close is idempotent; afterwards operations fail with 'closed'; initialize brings it back with its files", async () => {
      const ws = await open({ skillPaths: [skillPath("alpha")] });
      await ws.offloadToolResult("s", { id: "keep", output: "kept" });
      await ws.close();
      await ws.close();
      expect(ws.isAlive).toBe(false);
      await expectCode(
        Promise.resolve().then(() => ws.getBackend()),
        "closed",
      );
      await expectCode(ws.listSkills(), "closed");
      await expectCode(ws.addSkill(skillPath("beta")), "closed");
      await expectCode(ws.offloadContext("s", []), "closed");
      await expectCode(ws.offloadToolResult("s", { id: "x", output: "x" }), "closed");
      await expectCode(ws.reset(), "closed");
      await ws.initialize();
      if (ws.getBackend().persistent) expect(await readText(ws, "sessions/s/tool_result-keep.txt")).toBe("kept");
      expect((await ws.listSkills()).map((s) => s.name)).toEqual(["alpha"]);
    });

    it("re-checks partitions after close/initialize: one deleted meanwhile is copied from the seed again", async () => {
      const ws = await open({ skillPaths: [skillPath("alpha")] });
      expect((await ws.listSkills({ agentId: "a" })).map((s) => s.name)).toEqual(["alpha"]);
      await ws.getBackend().remove("skills/a");
      await ws.close();
      await ws.initialize();
      expect((await ws.listSkills({ agentId: "a" })).map((s) => s.name)).toEqual(["alpha"]);
    });

    it("a new object with the same workspace id reattaches to the same files, skills and offloads", async () => {
      const workspaceId = uniqueId();
      const first = await open({ workspaceId, skillPaths: [skillPath("alpha")] });
      if (!first.getBackend().persistent) return;
      await first.addSkill(skillPath("beta"), { agentId: "a" });
      await first.offloadContext("s", [{ role: "user", content: "remember me" }]);
      await first.close();
      const again = await open({ workspaceId });
      expect(again.workspaceId).toBe(workspaceId);
      expect((await again.listSkills({ agentId: "a" })).map((s) => s.name)).toEqual(["alpha", "beta"]);
      expect(await readText(again, "sessions/s/context.jsonl")).toContain("remember me");
    });

    it("reset deletes .mcp, skills/, sessions/ and data/ without re-seeding, and keeps other files", async () => {
      const ws = await open({ skillPaths: [skillPath("alpha")] });
      await ws.listSkills();
      await ws.offloadContext("s", [{ role: "user", content: [{ type: "data", source: { type: "base64", data: "AAECAwQF", media_type: "image/png" } }] }]);
      await ws.getBackend().writeFile(".mcp", JSON.stringify({ version: 2, mcps: {} }));
      await ws.getBackend().writeFile("project/notes.md", "mine");
      await ws.reset();
      for (const p of [".mcp", "skills", "sessions", "data"]) expect(await exists(ws, p), p).toBe(false);
      expect(await readText(ws, "project/notes.md")).toBe("mine");
      expect(await ws.listSkills()).toEqual([]);
      expect(await ws.listSkills({ agentId: "fresh" })).toEqual([]);
      expect(await ws.addSkill(skillPath("beta"))).toMatchObject({ name: "beta" });
      expect(ws.isAlive).toBe(true);
    });

    it("counts every operation as activity and disposes like close()", async () => {
      const ws = await open();
      const before = ws.lastActivityAt;
      await new Promise((r) => setTimeout(r, 15));
      const pending = ws.offloadContext("s", [{ role: "user", content: "x" }]);
      expect(ws.inFlight).toBe(1);
      await pending;
      expect(ws.inFlight).toBe(0);
      expect(ws.lastActivityAt).toBeGreaterThan(before);
      await ws[Symbol.asyncDispose]();
      expect(ws.isAlive).toBe(false);
    });

    it("reports failures of one operation without breaking the next", async () => {
      const ws = await open();
      await expectCode(ws.addSkill(skillPath("no-frontmatter")), "invalid_argument");
      expect(ws.inFlight).toBe(0);
      expect(await ws.addSkill(skillPath("alpha"))).toMatchObject({ name: "alpha" });
      expect(await names(ws, "skills/default")).toEqual([".index", "alpha"]);
    });
  });
}
