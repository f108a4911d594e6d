import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { Workspace } from "../../sdk/workspace/workspace.js";
import { useWorkspaces, uniqueId, type WorkspaceFixture } from "./fixture.js";
import { chunked, exists, expectCode, hostTemp, names, readText, skillMd, skillPath, tarOf, writeSkill, zipOf } from "./helpers.js";

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");
const fixtureHash = async (name: string) => sha256(await fs.readFile(path.join(skillPath(name), "SKILL.md"), "utf8"));

/** The `.index` of a partition, parsed, with its key order. */
async function index(
  ws: Workspace,
  partition: string,
): Promise<{ mtime: number; dirs: string[]; skills: Record<string, { hash: string; skill_name: string }> }> {
  const parsed = JSON.parse(await readText(ws, `skills/${partition}/.index`)) as {
    skills_dir_mtime: number;
    skills: Record<string, { hash: string; skill_name: string }>;
  };
  return { mtime: parsed.skills_dir_mtime, dirs: Object.keys(parsed.skills), skills: parsed.skills };
}

/** Partition folders must never keep staging leftovers. */
async function expectClean(ws: Workspace, partition = "default"): Promise<void> {
  const root = await names(ws, "");
  expect(root.filter((n) => n.startsWith(".skill-staging"))).toEqual([]);
  expect((await names(ws, "skills")).filter((n) => n.startsWith(".equipping"))).toEqual([]);
  if (await exists(ws, `skills/${partition}`)) expect((await names(ws, `skills/${partition}`)).filter((n) => n.startsWith(".adding"))).toEqual([]);
}

export function skillsContract(fixture: WorkspaceFixture): void {
  describe(`${fixture.name}: skills`, () => {
    const { open } = useWorkspaces(fixture);
    const seeds = [skillPath("alpha"), skillPath("beta"), skillPath("unicode")];

    describe("seeding and the .index file", () => {
      it("seeds valid skill paths into skills/.seed with an .index in the reference's exact format", async () => {
        const ws = await open({
          skillPaths: [
            ...seeds,
            skillPath("alpha-copy"),
            skillPath("no-frontmatter"),
            skillPath("missing-description"),
            skillPath("no-skill-md"),
            skillPath("does-not-exist"),
          ],
        });
        expect(await names(ws, "skills/.seed")).toEqual([".index", "My_Skill_v2_é中", "alpha", "beta"].sort());
        const text = await readText(ws, "skills/.seed/.index");
        const mtime = /^\{\n {2}"skills_dir_mtime": (\d+(?:\.\d+)?(?:e[+-]?\d+)?),\n/.exec(text)?.[1];
        expect(mtime, text).toBeDefined();
        const expected =
          `{\n  "skills_dir_mtime": ${mtime},\n  "skills": {\n` +
          `    "alpha": {\n      "hash": "${await fixtureHash("alpha")}",\n      "skill_name": "alpha"\n    },\n` +
          `    "beta": {\n      "hash": "${await fixtureHash("beta")}",\n      "skill_name": "beta"\n    },\n` +
          `    "My_Skill_v2_é中": {\n      "hash": "${await fixtureHash("unicode")}",\n      "skill_name": "My Skill.v2/é中"\n    }\n  }\n}`;
        expect(text).toBe(expected);
        expect(Number(mtime)).toBeGreaterThan(1_000_000_000);
        expect(await readText(ws, "skills/.seed/alpha/scripts/run.sh")).toContain("wc -w");
      });

      it("leaves the seed index byte-identical when re-initialised with the same paths, and adds new paths to an existing seed", async () => {
        const workspaceId = uniqueId();
        const first = await open({ workspaceId, skillPaths: seeds });
        if (!first.getBackend().persistent) return;
        const before = await readText(first, "skills/.seed/.index");
        await first.close();
        const again = await open({ workspaceId, skillPaths: [...seeds].reverse() });
        expect(await readText(again, "skills/.seed/.index")).toBe(before);
        await again.close();
        const more = await open({ workspaceId, skillPaths: [...seeds, skillPath("alpha-variant")] });
        const idx = await index(more, ".seed");
        expect(idx.dirs).toEqual(["alpha", "beta", "My_Skill_v2_é中", "alpha_1"]);
        expect(idx.skills["alpha_1"]!.skill_name).toBe("alpha (1)");
      });

      it("creates no .seed/.index when nothing was seeded", async () => {
        const ws = await open();
        expect(await names(ws, "skills/.seed")).toEqual([]);
      });
    });

    describe("partitions", () => {
      it("copies the seed into an agent's partition on first use and lists skills in index order", async () => {
        const ws = await open({ skillPaths: seeds });
        const skills = await ws.listSkills({ agentId: "a1" });
        expect(skills.map((s) => s.name)).toEqual(["alpha", "beta", "My Skill.v2/é中"]);
        const alpha = skills[0]!;
        expect(alpha.description).toBe("Counts words in text files.");
        expect(alpha.markdown).toBe("# Alpha\n\nRun `scripts/run.sh <file>` to count the words in a file.");
        expect(alpha.dir).toBe(path.posix.join(ws.workdir, "skills/a1/alpha"));
        expect(alpha.updatedAt).toBeGreaterThan(1_000_000_000_000);
        expect(skills[2]!.dir).toBe(path.posix.join(ws.workdir, "skills/a1/My_Skill_v2_é中"));
        expect(await readText(ws, "skills/a1/.index")).toBe(await readText(ws, "skills/.seed/.index"));
        expect(await readText(ws, "skills/a1/alpha/scripts/run.sh")).toContain("wc -w");
      });

      it("uses skills/default when no agent is given", async () => {
        const ws = await open({ skillPaths: [skillPath("beta")] });
        expect((await ws.listSkills()).map((s) => s.dir)).toEqual([path.posix.join(ws.workdir, "skills/default/beta")]);
        expect(await exists(ws, "skills/default/.index")).toBe(true);
      });

      it("equips a partition once under concurrent first use, leaving no staging folders", async () => {
        const ws = await open({ skillPaths: seeds });
        const results = await Promise.all(Array.from({ length: 6 }, () => ws.listSkills({ agentId: "racer" })));
        for (const r of results) expect(r.map((s) => s.name)).toEqual(["alpha", "beta", "My Skill.v2/é中"]);
        expect(await names(ws, "skills")).toEqual([".seed", "racer"]);
        await expectClean(ws, "racer");
      });

      it("refuses agent ids that are not usable as partition names, touching nothing", async () => {
        const ws = await open({ skillPaths: seeds });
        const before = await names(ws, "skills");
        for (const agentId of ["..", "../x", ".seed", ".hidden", "a/b", "a\\b", "x\0y"]) {
          await expectCode(ws.listSkills({ agentId }), "invalid_argument", /partition name/);
          await expectCode(ws.addSkill(skillPath("alpha"), { agentId }), "invalid_argument", /agentId/);
          await expectCode(ws.removeSkill("alpha", { agentId }), "invalid_argument", /agentId/);
          await expectCode(ws.purgeAgent({ agentId }), "invalid_argument", /agentId/);
          await expectCode(ws.addSkillArchive(zipOf({ "SKILL.md": skillMd("z", "d") }), { format: "zip", agentId }), "invalid_argument", /agentId/);
        }
        expect(await names(ws, "skills")).toEqual(before);
        expect(await names(ws, "skills/.seed")).toContain("alpha");
      });

      it("purgeAgent deletes the partition; the next use copies the seed again", async () => {
        const ws = await open({ skillPaths: [skillPath("alpha")] });
        await ws.addSkill(skillPath("beta"), { agentId: "p" });
        expect((await ws.listSkills({ agentId: "p" })).map((s) => s.name)).toEqual(["alpha", "beta"]);
        await ws.purgeAgent({ agentId: "p" });
        expect(await exists(ws, "skills/p")).toBe(false);
        expect((await ws.listSkills({ agentId: "p" })).map((s) => s.name)).toEqual(["alpha"]);
        await ws.purgeAgent({ agentId: "" }); // empty id: nothing to do
        expect(await exists(ws, "skills/default")).toBe(false);
      });
    });

    describe("addSkill", () => {
      it("copies a host skill folder, returns it, and records it in the partition index", async () => {
        const ws = await open();
        const skill = await ws.addSkill(skillPath("alpha"));
        expect(skill).toMatchObject({ name: "alpha", description: "Counts words in text files.", dir: path.posix.join(ws.workdir, "skills/default/alpha") });
        expect(skill!.updatedAt).toBeGreaterThan(1_000_000_000_000);
        const idx = await index(ws, "default");
        expect(idx.skills).toEqual({ alpha: { hash: await fixtureHash("alpha"), skill_name: "alpha" } });
        expect(await readText(ws, "skills/default/alpha/scripts/run.sh")).toContain("wc -w");
        await expectClean(ws);
      });

      it("skips a skill whose SKILL.md content is already indexed (no copy, undefined result)", async () => {
        const ws = await open();
        await ws.addSkill(skillPath("alpha"));
        const indexBefore = await readText(ws, "skills/default/.index");
        expect(await ws.addSkill(skillPath("alpha-copy"))).toBeUndefined();
        expect(await ws.addSkill(skillPath("alpha"))).toBeUndefined();
        expect(await names(ws, "skills/default")).toEqual([".index", "alpha"]);
        expect(await readText(ws, "skills/default/.index")).toBe(indexBefore);
      });

      it("suffixes clashing names with ' (1)' and clashing folders with '_1'", async () => {
        const ws = await open();
        await ws.addSkill(skillPath("alpha"));
        const variant = await ws.addSkill(skillPath("alpha-variant"));
        expect(variant).toMatchObject({ name: "alpha (1)", dir: path.posix.join(ws.workdir, "skills/default/alpha_1") });
        const dir = await hostTemp();
        try {
          await writeSkill(path.join(dir, "third"), { name: "alpha", description: "third of its name" });
          expect(await ws.addSkill(path.join(dir, "third"))).toMatchObject({ name: "alpha (2)", dir: path.posix.join(ws.workdir, "skills/default/alpha_2") });
        } finally {
          await fs.rm(dir, { recursive: true, force: true });
        }
        expect((await ws.listSkills()).map((s) => s.name)).toEqual(["alpha", "alpha (1)", "alpha (2)"]);
      });

      it("names folders by the sanitised front-matter name ('My Skill.v2/é中' → 'My_Skill_v2_é中')", async () => {
        const ws = await open();
        const skill = await ws.addSkill(skillPath("unicode"));
        expect(skill!.name).toBe("My Skill.v2/é中");
        expect(await names(ws, "skills/default")).toEqual([".index", "My_Skill_v2_é中"]);
      });

      it("dedups and names per partition: another agent's copy neither clashes nor dedups", async () => {
        const ws = await open();
        await ws.addSkill(skillPath("alpha"), { agentId: "a" });
        const b = await ws.addSkill(skillPath("alpha"), { agentId: "b" });
        expect(b).toMatchObject({ name: "alpha", dir: path.posix.join(ws.workdir, "skills/b/alpha") });
        expect((await ws.listSkills({ agentId: "a" })).map((s) => s.name)).toEqual(["alpha"]);
        expect(await ws.listSkills()).toEqual([]);
      });

      it("does not fail on a folder the index does not know; it picks the next free folder name", async () => {
        const ws = await open();
        await ws.getBackend().writeFile("skills/default/alpha/notes.txt", "not a skill");
        const skill = await ws.addSkill(skillPath("alpha"));
        expect(skill!.dir).toBe(path.posix.join(ws.workdir, "skills/default/alpha_1"));
        expect(await readText(ws, "skills/default/alpha/notes.txt")).toBe("not a skill");
      });

      it("reports invalid skills with the file and the missing field, and adds nothing", async () => {
        const ws = await open();
        const noFm = path.join(skillPath("no-frontmatter"), "SKILL.md");
        await expectCode(
          ws.addSkill(skillPath("no-frontmatter")),
          "invalid_argument",
          new RegExp(`${noFm.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}.*front matter`),
        );
        await expectCode(ws.addSkill(skillPath("missing-description")), "invalid_argument", /missing-description\/SKILL\.md is missing 'description'/);
        await expectCode(ws.addSkill(skillPath("unclosed")), "invalid_argument", /no closing '---'/);
        await expectCode(ws.addSkill(skillPath("no-skill-md")), "invalid_argument", /SKILL\.md not found/);
        await expectCode(ws.addSkill(skillPath("does-not-exist")), "not_found", /does-not-exist/);
        await expectCode(ws.addSkill(""), "invalid_argument", /skillPath/);
        const dir = await hostTemp();
        try {
          await writeSkill(path.join(dir, "nameless"), { description: "has no name" });
          await expectCode(ws.addSkill(path.join(dir, "nameless")), "invalid_argument", /missing 'name'/);
          await writeSkill(path.join(dir, "empty-name"), "---\nname: ''\ndescription: x\n---\n");
          await expectCode(ws.addSkill(path.join(dir, "empty-name")), "invalid_argument", /missing 'name'/);
          await writeSkill(path.join(dir, "bad-yaml"), "---\nname: [unclosed\ndescription: x\n---\n");
          await expectCode(ws.addSkill(path.join(dir, "bad-yaml")), "invalid_argument", /not valid YAML/);
          await writeSkill(path.join(dir, "list-yaml"), "---\n- a\n- b\n---\n");
          await expectCode(ws.addSkill(path.join(dir, "list-yaml")), "invalid_argument", /not a YAML mapping/);
        } finally {
          await fs.rm(dir, { recursive: true, force: true });
        }
        expect(await ws.listSkills()).toEqual([]);
        await expectClean(ws);
      });

      it("accepts CRLF front matter and hashes it like Python's text read (newlines normalised)", async () => {
        const ws = await open();
        const dir = await hostTemp();
        try {
          await writeSkill(path.join(dir, "crlf"), "---\r\nname: crlf\r\ndescription: windows line ends\r\n---\r\nBody\r\n");
          const skill = await ws.addSkill(path.join(dir, "crlf"));
          expect(skill).toMatchObject({ name: "crlf", description: "windows line ends", markdown: "Body" });
          expect((await index(ws, "default")).skills["crlf"]!.hash).toBe(sha256("---\nname: crlf\ndescription: windows line ends\n---\nBody\n"));
        } finally {
          await fs.rm(dir, { recursive: true, force: true });
        }
      });

      it("does not copy symlinks out of a skill folder and refuses a symlinked SKILL.md", async () => {
        const ws = await open();
        const dir = await hostTemp();
        try {
          const skill = await writeSkill(path.join(dir, "linky"), { name: "linky", description: "has links" }, { "real.txt": "ok" });
          await fs.symlink("/etc/passwd", path.join(skill, "leak"));
          await fs.symlink("/etc", path.join(skill, "leakdir"));
          await ws.addSkill(skill);
          expect(await names(ws, "skills/default/linky")).toEqual(["SKILL.md", "real.txt"]);

          const linked = path.join(dir, "linked-md");
          await fs.mkdir(linked);
          await fs.symlink(path.join(skill, "SKILL.md"), path.join(linked, "SKILL.md"));
          await expectCode(ws.addSkill(linked), "invalid_argument", /symlink/);
        } finally {
          await fs.rm(dir, { recursive: true, force: true });
        }
      });

      it("keeps .index whole under concurrent addSkill calls on one workspace", async () => {
        const ws = await open();
        const dir = await hostTemp();
        try {
          const paths = await Promise.all(
            Array.from({ length: 12 }, (_, i) => writeSkill(path.join(dir, `s${i}`), { name: `skill-${i}`, description: `number ${i}` })),
          );
          const results = await Promise.all(
            [...paths, ...paths.slice(0, 4), skillPath("alpha"), skillPath("alpha"), skillPath("alpha-copy")].map((p) => ws.addSkill(p)),
          );
          expect(results.filter((r) => r !== undefined)).toHaveLength(13);
          const idx = await index(ws, "default");
          expect(idx.dirs.sort()).toEqual([...paths.map((_, i) => `skill-${i}`), "alpha"].sort());
          expect((await names(ws, "skills/default")).filter((n) => n !== ".index").sort()).toEqual(idx.dirs.sort());
          expect(await ws.listSkills()).toHaveLength(13);
        } finally {
          await fs.rm(dir, { recursive: true, force: true });
        }
        await expectClean(ws);
      });
    });

    describe("reconciling with folders changed behind the index", () => {
      it("indexes a skill folder written directly and forgets one deleted directly", async () => {
        const ws = await open();
        await ws.addSkill(skillPath("alpha"));
        await ws.getBackend().writeFile("skills/default/manual/SKILL.md", skillMd("alpha", "hand-made, same name", "Manual."));
        await ws.getBackend().writeFile("skills/default/broken/SKILL.md", "no front matter");
        expect((await ws.listSkills()).map((s) => [s.name, s.dir.split("/").pop()])).toEqual([
          ["alpha", "alpha"],
          ["alpha (1)", "manual"],
        ]);
        expect((await index(ws, "default")).dirs).toEqual(["alpha", "manual"]);
        await ws.getBackend().remove("skills/default/alpha");
        expect((await ws.listSkills()).map((s) => s.name)).toEqual(["alpha (1)"]);
        expect((await index(ws, "default")).dirs).toEqual(["manual"]);
      });

      it("skips an indexed skill whose SKILL.md went missing or lost its description", async () => {
        const ws = await open();
        await ws.addSkill(skillPath("alpha"));
        await ws.addSkill(skillPath("beta"));
        await ws.getBackend().remove("skills/default/alpha/SKILL.md");
        await ws.getBackend().writeFile("skills/default/beta/SKILL.md", "---\nname: beta\n---\n");
        expect(await ws.listSkills()).toEqual([]);
        expect((await index(ws, "default")).dirs).toEqual(["alpha", "beta"]);
      });

      it("rebuilds an unparsable .index from the folders", async () => {
        const ws = await open();
        await ws.addSkill(skillPath("alpha"));
        await ws.getBackend().writeFile("skills/default/.index", "{ not json");
        expect((await ws.listSkills()).map((s) => s.name)).toEqual(["alpha"]);
        expect((await index(ws, "default")).skills.alpha!.hash).toBe(await fixtureHash("alpha"));
      });
    });

    describe("removeSkill", () => {
      it("removes by agent-facing name from one partition only; a removed seed skill does not come back", async () => {
        const ws = await open({ skillPaths: [skillPath("alpha"), skillPath("beta")] });
        await ws.listSkills({ agentId: "other" });
        expect(await ws.removeSkill("alpha")).toBe(true);
        expect(await exists(ws, "skills/default/alpha")).toBe(false);
        expect((await index(ws, "default")).dirs).toEqual(["beta"]);
        expect((await ws.listSkills()).map((s) => s.name)).toEqual(["beta"]);
        expect((await ws.listSkills({ agentId: "other" })).map((s) => s.name)).toEqual(["alpha", "beta"]);
        expect(await names(ws, "skills/.seed")).toContain("alpha");
        expect(await ws.removeSkill("alpha")).toBe(false);
        expect(await ws.removeSkill("no such skill")).toBe(false);
      });
    });

    describe("addSkillArchive", () => {
      const good = () => zipOf({ "pack/SKILL.md": skillMd("zipped", "from a zip", "Zip body."), "pack/scripts/go.sh": "echo go\n", "pack/docs/": "" });

      it("installs a zip whose skill sits in a top-level folder, named after its front matter", async () => {
        const ws = await open();
        const skill = await ws.addSkillArchive(good(), { format: "zip" });
        expect(skill).toMatchObject({
          name: "zipped",
          description: "from a zip",
          markdown: "Zip body.",
          dir: path.posix.join(ws.workdir, "skills/default/zipped"),
        });
        expect(await readText(ws, "skills/default/zipped/scripts/go.sh")).toBe("echo go\n");
        expect((await index(ws, "default")).skills.zipped!.hash).toBe(sha256(skillMd("zipped", "from a zip", "Zip body.")));
        expect(await ws.addSkillArchive(good(), { format: "zip" })).toBeUndefined();
        expect(await names(ws, "skills/default")).toEqual([".index", "zipped"]);
        await expectClean(ws);
      });

      it("installs tar and tar.gz streams, with SKILL.md at the archive root, into the agent's partition", async () => {
        const ws = await open();
        const tarball = await tarOf([
          { name: "SKILL.md", data: skillMd("tarred", "from a tar") },
          { name: "lib", type: "directory" },
          { name: "lib/tool.py", data: "print(1)\n", mode: 0o755 },
        ]);
        expect(await ws.addSkillArchive(chunked(tarball, 333), { format: "tar", agentId: "t" })).toMatchObject({ name: "tarred" });
        expect(await readText(ws, "skills/t/tarred/lib/tool.py")).toBe("print(1)\n");
        const gz = await tarOf([{ name: "./g/SKILL.md", data: skillMd("gzipped", "from a tar.gz") }], true);
        expect(await ws.addSkillArchive(chunked(gz, 100), { format: "tar.gz", agentId: "t" })).toMatchObject({ name: "gzipped" });
        expect((await ws.listSkills({ agentId: "t" })).map((s) => s.name)).toEqual(["tarred", "gzipped"]);
      });

      it("uses dirName as the folder name when given, and refuses one with path separators", async () => {
        const ws = await open();
        expect(await ws.addSkillArchive(good(), { format: "zip", dirName: "my-pack" })).toMatchObject({
          dir: path.posix.join(ws.workdir, "skills/default/my-pack"),
        });
        for (const dirName of ["../x", "a/b", "..", ".", ""])
          await expectCode(ws.addSkillArchive(good(), { format: "zip", dirName }), "invalid_argument", /dirName/);
        await expectCode(ws.addSkillArchive(good(), { format: "rar" as "zip" }), "invalid_argument", /format/);
        await expectCode(ws.addSkillArchive(good(), { format: "zip", maxExtractedBytes: -1 }), "invalid_argument", /maxExtractedBytes/);
      });

      const bad: Array<[string, () => Promise<{ data: Uint8Array; format: "zip" | "tar" | "tar.gz"; max?: number }>, string, RegExp]> = [
        [
          "zip traversal",
          async () => ({ data: zipOf({ "SKILL.md": skillMd("z", "d"), "../evil.txt": "x" }), format: "zip" }),
          "path_escape",
          /'\.\.\/evil\.txt'.*'\.\.'/,
        ],
        [
          "zip nested traversal",
          async () => ({ data: zipOf({ "a/SKILL.md": skillMd("z", "d"), "a/../../evil.txt": "x" }), format: "zip" }),
          "path_escape",
          /evil/,
        ],
        ["zip absolute name", async () => ({ data: zipOf({ "SKILL.md": skillMd("z", "d"), "/tmp/abs.txt": "x" }), format: "zip" }), "path_escape", /absolute/],
        [
          "zip symlink",
          async () => ({ data: zipOf({ "SKILL.md": skillMd("z", "d"), link: { data: "/etc/passwd", mode: 0o120777 } }), format: "zip" }),
          "invalid_argument",
          /'link' is a symlink/,
        ],
        [
          "zip over the limit",
          async () => ({ data: zipOf({ "SKILL.md": skillMd("z", "d"), "big.bin": "x".repeat(5000) }), format: "zip", max: 1000 }),
          "too_large",
          /expands to \d+ bytes, over the limit of 1000/,
        ],
        ["zip with a lying size header", async () => ({ data: lyingZip(), format: "zip", max: 1000 }), "too_large", /declared/],
        ["corrupt zip", async () => ({ data: new Uint8Array(300).fill(7), format: "zip" }), "invalid_argument", /not a readable zip/],
        [
          "tar traversal",
          async () => ({
            data: await tarOf([
              { name: "SKILL.md", data: skillMd("t", "d") },
              { name: "../evil", data: "x" },
            ]),
            format: "tar",
          }),
          "path_escape",
          /'\.\.\/evil'/,
        ],
        ["tar absolute name", async () => ({ data: await tarOf([{ name: "/etc/cron.d/evil", data: "x" }]), format: "tar" }), "path_escape", /absolute/],
        [
          "tar symlink",
          async () => ({
            data: await tarOf([
              { name: "SKILL.md", data: skillMd("t", "d") },
              { name: "out", type: "symlink", linkname: "/etc" },
            ]),
            format: "tar",
          }),
          "invalid_argument",
          /'out' is a symlink/,
        ],
        [
          "tar hard link",
          async () => ({
            data: await tarOf([
              { name: "SKILL.md", data: skillMd("t", "d") },
              { name: "hl", type: "link", linkname: "/etc/passwd" },
            ]),
            format: "tar",
          }),
          "invalid_argument",
          /hard link/,
        ],
        [
          "tar fifo",
          async () => ({
            data: await tarOf([
              { name: "SKILL.md", data: skillMd("t", "d") },
              { name: "pipe", type: "fifo" },
            ]),
            format: "tar",
          }),
          "invalid_argument",
          /only files and folders/,
        ],
        [
          "tar over the limit",
          async () => ({
            data: await tarOf([
              { name: "SKILL.md", data: skillMd("t", "d") },
              { name: "big", data: "y".repeat(4000) },
            ]),
            format: "tar",
            max: 1000,
          }),
          "too_large",
          /over the limit of 1000/,
        ],
        [
          "tar.gz over the limit",
          async () => ({
            data: await tarOf(
              [
                { name: "SKILL.md", data: skillMd("t", "d") },
                { name: "big", data: "y".repeat(40000) },
              ],
              true,
            ),
            format: "tar.gz",
            max: 10000,
          }),
          "too_large",
          /over the limit of 10000/,
        ],
        [
          "truncated tar.gz",
          async () => ({ data: (await tarOf([{ name: "SKILL.md", data: skillMd("t", "d") }], true)).subarray(0, 30), format: "tar.gz" }),
          "invalid_argument",
          /not a readable tar/,
        ],
        [
          "archive without SKILL.md",
          async () => ({ data: zipOf({ "readme.txt": "hi", "deep/er/SKILL.md": skillMd("deep", "too deep") }), format: "zip" }),
          "invalid_argument",
          /no SKILL\.md/,
        ],
        [
          "archive with an invalid SKILL.md",
          async () => ({ data: zipOf({ "p/SKILL.md": "---\nname: p\n---\n" }), format: "zip" }),
          "invalid_argument",
          /archive folder 'p'.*SKILL\.md is missing 'description'/,
        ],
      ];
      for (const [title, make, code, pattern] of bad)
        it(`refuses ${title} and leaves nothing behind`, async () => {
          const ws = await open({ skillPaths: [skillPath("beta")] });
          const before = await ws.listSkills();
          const { data, format, max } = await make();
          await expectCode(ws.addSkillArchive(data, { format, ...(max ? { maxExtractedBytes: max } : {}) }), code as "invalid_argument", pattern);
          expect(await ws.listSkills()).toEqual(before);
          expect(await names(ws, "skills/default")).toEqual([".index", "beta"]);
          await expectClean(ws);
        });
    });

    describe("legacy layout", () => {
      it("moves skill folders and .skills from skills/ into skills/.seed on initialize", async () => {
        const workspaceId = uniqueId();
        const first = await open({ workspaceId });
        if (!first.getBackend().persistent) return;
        await first.getBackend().remove("skills");
        const legacyIndex = `{\n  "skills_dir_mtime": 0.0,\n  "skills": {\n    "old": {\n      "hash": "${sha256(skillMd("old", "legacy"))}",\n      "skill_name": "old"\n    }\n  }\n}`;
        await first.getBackend().writeFile("skills/old/SKILL.md", skillMd("old", "legacy"));
        await first.getBackend().writeFile("skills/.skills", legacyIndex);
        await first.getBackend().writeFile("skills/notes.txt", "left alone");
        await first.close();
        const ws = await open({ workspaceId, skillPaths: [skillPath("alpha")] });
        expect(await names(ws, "skills")).toEqual([".seed", "notes.txt"]);
        expect((await index(ws, ".seed")).dirs).toEqual(["old", "alpha"]);
        expect((await ws.listSkills({ agentId: "n" })).map((s) => s.name)).toEqual(["old", "alpha"]);
      });
    });
  });
}

/** A zip whose central directory says an entry holds 10 bytes while it inflates to 5000. */
function lyingZip(): Uint8Array {
  const zip = Buffer.from(zipOf({ "SKILL.md": skillMd("liar", "lies about sizes"), "bomb.bin": "z".repeat(5000) }));
  for (let p = zip.length - 22; p >= 0; p--) {
    if (zip.readUInt32LE(p) !== 0x02014b50) continue;
    const nameLen = zip.readUInt16LE(p + 28);
    if (zip.subarray(p + 46, p + 46 + nameLen).toString() === "bomb.bin") zip.writeUInt32LE(10, p + 24);
  }
  return zip;
}
