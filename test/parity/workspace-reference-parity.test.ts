// Four places where we used to differ from the reference without saying so (issue 9, item 16).
import { promises as fs, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BubblewrapWorkspace } from "../../sdk/backends/bubblewrap/index.js";
import { LocalWorkspace } from "../../sdk/backends/local/index.js";
import { uniqueId } from "../contract/fixture.js";
import { ROOT } from "../support/sandbox-fixtures.js";
import { expectCode, skillMd, zipOf } from "../contract/helpers.js";

const base = mkdtempSync(path.join(os.tmpdir(), "agentws-refgap-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));
const local = (extra: Partial<ConstructorParameters<typeof LocalWorkspace>[0]> = {}) => {
  const workspaceId = uniqueId("rg");
  return new LocalWorkspace({ workspaceId, workdir: path.join(base, workspaceId), ...extra });
};

describe("matches the reference", () => {
  it("listSkills on a never-initialized workspace is [] (after close() it is 'closed')", async () => {
    const ws = local();
    expect(await ws.listSkills()).toEqual([]);
    expect(await ws.listSkills({ agentId: "a" })).toEqual([]);
    await expectCode(ws.listSkills({ agentId: "../x" }), "invalid_argument", /agentId/);
    await ws.initialize();
    await ws.close();
    await expectCode(ws.listSkills(), "closed");
  });

  it("skillPaths are normalised: '~' expanded, made absolute", () => {
    const ws = local({ skillPaths: ["~/skills/a", "~", "rel/b", "/abs/c"] });
    expect(ws.skillPaths).toEqual([path.join(os.homedir(), "skills/a"), os.homedir(), path.resolve("rel/b"), "/abs/c"]);
  });

  it("an archive's dirName clash gets the reference's '-1' suffix; front-matter names keep '_1'", async () => {
    const ws = local();
    await ws.initialize();
    try {
      const pack = (n: number) => zipOf({ "SKILL.md": skillMd(`pack ${n}`, `variant ${n}`) });
      expect((await ws.addSkillArchive(pack(1), { format: "zip", dirName: "pack" }))!.dir).toMatch(/\/skills\/default\/pack$/);
      expect((await ws.addSkillArchive(pack(2), { format: "zip", dirName: "pack" }))!.dir).toMatch(/\/skills\/default\/pack-1$/);
      expect((await ws.addSkillArchive(pack(3), { format: "zip", dirName: "pack" }))!.dir).toMatch(/\/skills\/default\/pack-2$/);
      const same = (d: string) => zipOf({ "SKILL.md": skillMd("same", d) });
      expect((await ws.addSkillArchive(same("one"), { format: "zip" }))!.dir).toMatch(/\/skills\/default\/same$/);
      expect((await ws.addSkillArchive(same("two"), { format: "zip" }))!.dir).toMatch(/\/skills\/default\/same_1$/);
    } finally {
      await ws.close();
    }
  });

  it("a sandboxed workspace has data/ and sessions/ right after initialize (Local creates them on demand)", async () => {
    const ws = new BubblewrapWorkspace({ workspaceId: uniqueId("rg"), basedir: path.join(base, "bwrap"), readOnlyPaths: [ROOT] });
    await ws.initialize();
    try {
      const root = (await ws.getBackend().list("")).map((e) => e.name).sort();
      expect(root).toEqual(expect.arrayContaining(["data", "sessions", "skills"]));
      expect(root).not.toContain(".mcp");
    } finally {
      await ws.close();
    }
    const plain = local();
    await plain.initialize();
    try {
      expect((await fs.readdir(plain.workdir)).sort()).toEqual(["skills"]);
    } finally {
      await plain.close();
    }
  }, 60_000);
});
