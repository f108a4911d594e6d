import { mkdtempSync, rmSync, promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LocalWorkspace } from "../../sdk/backends/local/index.js";
import { parseSkillMarkdown } from "../../sdk/workspace/frontmatter.js";

/** The documented caps (sdk/workspace/frontmatter.ts), spelled out so this file also runs against code that predates them. */
const MAX_SKILL_MD_BYTES = 1024 * 1024;
const MAX_FRONT_MATTER_BYTES = 64 * 1024;

/**
 * Attack: an agent plants a SKILL.md whose front matter is huge (60 MiB) or has tens of thousands of
 * keys (the YAML parser's duplicate-key check was quadratic) in its own skills folder; the next
 * listSkills must not stall the service or take gigabytes. The hostile skill is skipped and
 * reported; the good one is still listed.
 */
const base = mkdtempSync(path.join(os.tmpdir(), "agentws-sec-skill-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));

const good = "---\nname: good\ndescription: a fine skill\n---\nbody\n";

async function plant(workdir: string, dir: string, text: string | Buffer): Promise<void> {
  await fs.mkdir(path.join(workdir, "skills", "default", dir), { recursive: true });
  await fs.writeFile(path.join(workdir, "skills", "default", dir, "SKILL.md"), text);
}

function manyKeys(n: number): string {
  const lines = ["---", "name: bomb", "description: many keys"];
  for (let i = 0; i < n; i++) lines.push(`k${i}: v${i}`);
  return `${lines.join("\n")}\n---\nbody\n`;
}

async function openWith(id: string, planted: Array<[string, string | Buffer]>) {
  const workdir = path.join(base, id);
  const warnings: Array<Record<string, unknown>> = [];
  const logger = { debug() {}, info() {}, error() {}, warn: (_m: string, f?: Record<string, unknown>) => void warnings.push(f ?? {}) };
  const ws = new LocalWorkspace({ workspaceId: id, workdir, logger });
  await ws.initialize();
  await plant(workdir, "good", good);
  for (const [dir, text] of planted) await plant(workdir, dir, text);
  return { ws, warnings };
}

describe("SKILL.md bombs planted by an agent", () => {
  it("40,000 front-matter keys: listSkills skips the file, names it, and keeps the good skill", async () => {
    const text = manyKeys(40_000);
    expect(Buffer.byteLength(text)).toBeGreaterThan(MAX_FRONT_MATTER_BYTES);
    const { ws, warnings } = await openWith("keys", [["bomb", text]]);
    try {
      const skills = await ws.listSkills();
      expect(skills.map((s) => s.name)).toEqual(["good"]);
      expect(JSON.stringify(warnings)).toMatch(/skills\/default\/bomb\/SKILL\.md/);
      expect(JSON.stringify(warnings)).toMatch(/front matter/);
    } finally {
      await ws.close();
    }
  }, 20_000);

  it("a key count under the byte cap still parses in linear time (a hang guard, not a timing test)", () => {
    // 5,000 short keys fit in 64 KiB; the quadratic duplicate-key check took seconds on this size.
    const lines = ["---", "name: wide", "description: d"];
    for (let i = 0; i < 5_000; i++) lines.push(`k${i}: ${i}`);
    const text = `${lines.join("\n")}\n---\n`;
    expect(Buffer.byteLength(text)).toBeLessThan(MAX_FRONT_MATTER_BYTES);
    const parsed = parseSkillMarkdown(text);
    expect(parsed.ok).toBe(true);
  }, 5_000);

  it("60 MiB of front matter: listSkills refuses it without reading it all (RSS stays bounded)", async () => {
    const filler = Buffer.alloc(60 * 1024 * 1024, "a");
    const text = Buffer.concat([Buffer.from("---\nname: huge\ndescription: x\nblob: "), filler, Buffer.from("\n---\nbody\n")]);
    const { ws, warnings } = await openWith("huge", [["huge", text]]);
    try {
      const before = process.memoryUsage().rss;
      const skills = await ws.listSkills();
      const grown = process.memoryUsage().rss - before;
      expect(skills.map((s) => s.name)).toEqual(["good"]);
      expect(JSON.stringify(warnings)).toMatch(/skills\/default\/huge\/SKILL\.md/);
      expect(JSON.stringify(warnings)).toMatch(new RegExp(String(MAX_SKILL_MD_BYTES)));
      // Reading and parsing 60 MiB costs hundreds of MiB; the cap keeps it to well under that.
      expect(grown).toBeLessThan(64 * 1024 * 1024);
    } finally {
      await ws.close();
    }
  }, 20_000);

  it("addSkill refuses an over-cap SKILL.md with an error naming the file", async () => {
    const { ws } = await openWith("add", []);
    const src = path.join(base, "src-skill");
    await fs.mkdir(src, { recursive: true });
    await fs.writeFile(path.join(src, "SKILL.md"), manyKeys(40_000));
    try {
      await expect(ws.addSkill(src)).rejects.toMatchObject({ code: "invalid_argument", message: expect.stringContaining(path.join(src, "SKILL.md")) });
      await fs.writeFile(path.join(src, "SKILL.md"), Buffer.alloc(MAX_SKILL_MD_BYTES + 1, "a"));
      await expect(ws.addSkill(src)).rejects.toMatchObject({ code: "too_large", message: expect.stringContaining(path.join(src, "SKILL.md")) });
      expect((await ws.listSkills()).map((s) => s.name)).toEqual(["good"]);
    } finally {
      await ws.close();
    }
  }, 20_000);

  it("70 skills of 1 MB each: the listing stops at its total budget and says so", async () => {
    const body = "b".repeat(1_040_000);
    const planted: Array<[string, string]> = [];
    for (let i = 0; i < 70; i++) planted.push([`big${i}`, `---\nname: big${i}\ndescription: d\n---\n${body}\n`]);
    const { ws, warnings } = await openWith("many", planted);
    try {
      const skills = await ws.listSkills();
      expect(skills.length).toBeGreaterThan(1);
      expect(skills.length).toBeLessThan(71);
      expect(JSON.stringify(warnings)).toMatch(/skipped/);
    } finally {
      await ws.close();
    }
  }, 60_000);
});
