import { describe, expect, it } from "vitest";
import { useWorkspaces, type WorkspaceFixture } from "./fixture.js";
import { exists, expectCode, names, readText, skillPath } from "./helpers.js";

export function layoutContract(fixture: WorkspaceFixture): void {
  describe(`${fixture.name}: layout`, () => {
    const { open } = useWorkspaces(fixture);

    it("initialize creates skills/ and skills/.seed but no .mcp and no partition", async () => {
      const ws = await open();
      const root = await names(ws, "");
      expect(root).toContain("skills");
      expect(root).not.toContain(".mcp");
      expect(await names(ws, "skills")).toEqual([".seed"]);
    });

    it("grows sessions/<id>/ and data/ on demand, with paths under the agent-visible workdir", async () => {
      const ws = await open({ skillPaths: [skillPath("alpha")] });
      const ctx = await ws.offloadContext("sess", [{ role: "user", content: "x" }]);
      const tool = await ws.offloadToolResult("sess", { id: "t", output: "y" });
      const data = await ws.offloadData({ type: "data", source: { type: "base64", data: "AAECAwQF", media_type: "image/png" } });
      const [skill] = await ws.listSkills({ agentId: "agent-1" });
      expect(ctx).toBe(`${ws.workdir}/sessions/sess/context.jsonl`);
      expect(tool).toBe(`${ws.workdir}/sessions/sess/tool_result-t.txt`);
      expect(data.source).toEqual({
        type: "url",
        url: "workspace:///data/131afd4cbe2f7ea4295563cbbde7bdb6120d5fd74dcec8827de0fbe23c9eb04d.png",
        media_type: "image/png",
      });
      expect(skill!.dir).toBe(`${ws.workdir}/skills/agent-1/alpha`);
      expect(await names(ws, "sessions/sess")).toEqual(["context.jsonl", "tool_result-t.txt"]);
      expect(await names(ws, "data")).toEqual(["131afd4cbe2f7ea4295563cbbde7bdb6120d5fd74dcec8827de0fbe23c9eb04d.png"]);
      expect(await names(ws, "skills")).toEqual([".seed", "agent-1"]);
      expect(await names(ws, "skills/agent-1")).toEqual([".index", "alpha"]);
    });

    it("keeps the backend's file operations inside the workspace: '..', absolute paths and symlinks out are refused", async () => {
      const ws = await open();
      const sb = ws.getBackend();
      await expectCode(sb.readFile("../outside"), "path_escape", /'\.\.'/);
      await expectCode(sb.readFile("/etc/passwd"), "path_escape");
      await expectCode(sb.writeFile("a/../../x", "x"), "path_escape");
      await expectCode(sb.list("skills/../.."), "path_escape");
      await expectCode(sb.remove(""), "path_escape");
      expect((await sb.exec(["ln", "-s", "/", "escape"])).exitCode).toBe(0);
      expect((await sb.stat("escape"))?.type).toBe("symlink");
      await expectCode(sb.readFile("escape/etc/hostname"), "path_escape");
      await expectCode(sb.writeFile("escape/tmp/agentws-escape.txt", "x"), "path_escape");
      await expectCode(sb.list("escape/etc"), "path_escape");
      await expectCode(sb.writeFile("escape", "x"), "path_escape");
      expect((await sb.exec(["ln", "-s", "/etc/hostname", "leaf"])).exitCode).toBe(0);
      await expectCode(sb.appendFile("leaf", "x"), "path_escape");
    });

    it("renders instructions with the workdir and backend, closed code fences and no placeholders", async () => {
      const ws = await open();
      const text = ws.getInstructions();
      expect(text).toContain(ws.workdir);
      expect(text.startsWith("<workspace>")).toBe(true);
      expect(text.trimEnd().endsWith("</workspace>")).toBe(true);
      expect((text.match(/```/g) ?? []).length % 2).toBe(0);
      expect(text).not.toMatch(/\{(backend|workdir)\}/);
      for (const dir of ["data/", "skills/", "sessions/"]) expect(text).toContain(dir);
    });

    it("stores text as UTF-8 exactly as given", async () => {
      const ws = await open();
      await ws.offloadToolResult("u", { id: "1", output: "é中🙂\r\nend" });
      expect(await readText(ws, "sessions/u/tool_result-1.txt")).toBe("é中🙂\r\nend");
      expect(await exists(ws, "sessions/u/tool_result-1.txt")).toBe(true);
    });
  });
}
