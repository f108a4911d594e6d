import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LocalWorkspace } from "../../../sdk/backends/local/index.js";
import { extractArchive, safeMemberPath, spoolInput } from "../../../sdk/workspace/archive.js";
import { parseSkillMarkdown } from "../../../sdk/workspace/frontmatter.js";
import { DEFAULT_WORKSPACE_INSTRUCTIONS, renderInstructions } from "../../../sdk/workspace/instructions.js";
import { extensionFor, sanitizeId } from "../../../sdk/workspace/offload.js";
import { parseIndex, partitionName, sanitizeSkillDirName, serializeIndex } from "../../../sdk/workspace/skill-index.js";
import { chunked, expectCode, skillMd, skillPath, tarOf, zipOf } from "../../contract/helpers.js";

let base: string;
const opened: LocalWorkspace[] = [];
beforeAll(async () => {
  base = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-lw-"));
});
afterEach(async () => {
  await Promise.all(opened.splice(0).map((ws) => ws.close()));
});
afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});
async function open(name: string, extra: Record<string, unknown> = {}): Promise<LocalWorkspace> {
  const ws = new LocalWorkspace({ workdir: path.join(base, name), ...extra });
  opened.push(ws);
  await ws.initialize();
  return ws;
}

describe("LocalWorkspace options", () => {
  it("validates options and names the bad field", () => {
    expect(() => new LocalWorkspace({} as never)).toThrow(/options\.workdir/);
    expect(() => new LocalWorkspace({ workdir: "" })).toThrow(/options\.workdir/);
    expect(() => new LocalWorkspace({ workdir: "/tmp/x", bogus: true } as never)).toThrow(/bogus/);
    expect(() => new LocalWorkspace({ workdir: "/tmp/x", maxLiveStatefulMcps: 0 })).toThrow(/maxLiveStatefulMcps/);
    expect(() => new LocalWorkspace({ workdir: "/tmp/x", instructions: "Hi {user}" })).toThrow(/instructions: unknown placeholder '\{user\}'/);
  });

  it("expands ~, makes workdir absolute and renders instructions with backend 'local'", () => {
    expect(new LocalWorkspace({ workdir: "~/agentws-x" }).workdir).toBe(path.join(os.homedir(), "agentws-x"));
    expect(new LocalWorkspace({ workdir: "rel/dir" }).workdir).toBe(path.resolve("rel/dir"));
    const ws = new LocalWorkspace({ workdir: "/srv/w", workspaceId: "abc" });
    expect(ws.workspaceId).toBe("abc");
    expect(ws.getInstructions()).toContain("You are working in a local workspace rooted at /srv/w.");
    expect(new LocalWorkspace({ workdir: "/srv/w", instructions: "Workdir: {workdir} {{literal}}" }).getInstructions()).toBe("Workdir: /srv/w {literal}");
    expect(new LocalWorkspace({ workdir: "/srv/w" }).workspaceId).toMatch(/^[0-9a-f]{32}$/);
  });

  it("creates the workdir on initialize and lists only skills/ there (no .mcp, data/, sessions/)", async () => {
    const ws = await open("fresh/nested");
    expect((await fs.readdir(ws.workdir)).sort()).toEqual(["skills"]);
    expect(await fs.readdir(path.join(ws.workdir, "skills"))).toEqual([".seed"]);
    await ws.addSkillArchive(zipOf({ "SKILL.md": skillMd("z", "d") }), { format: "zip" });
    expect((await fs.readdir(ws.workdir)).sort()).toEqual(["skills"]);
  });
});

describe("LocalWorkspace objects sharing one folder (like two service replicas)", () => {
  it("equip a partition once between them: the atomic rename decides, the loser cleans up", async () => {
    const a = await open("shared", { skillPaths: [skillPath("alpha"), skillPath("beta")] });
    const b = await open("shared");
    const lists = await Promise.all([0, 1, 2, 3].map((i) => (i % 2 ? a : b).listSkills({ agentId: "both" })));
    for (const l of lists) expect(l.map((s) => s.name)).toEqual(["alpha", "beta"]);
    expect((await fs.readdir(path.join(a.workdir, "skills"))).sort()).toEqual([".seed", "both"]);
    expect((await fs.readdir(path.join(a.workdir, "skills", "both"))).sort()).toEqual([".index", "alpha", "beta"]);
  });

  it("claim distinct tool-result names through exclusive writes", async () => {
    const a = await open("shared-offload");
    const b = await open("shared-offload");
    const paths = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).offloadToolResult("s", { id: "same", output: `body ${i}` })));
    expect(new Set(paths).size).toBe(10);
    const bodies = await Promise.all(paths.map((p) => fs.readFile(p, "utf8")));
    expect(bodies.sort()).toEqual(Array.from({ length: 10 }, (_, i) => `body ${i}`).sort());
  });
});

describe("LocalWorkspace host-level confinement", () => {
  it("refuses offloads through a host symlink leading out of the workspace and writes nothing outside", async () => {
    const ws = await open("sym-sessions");
    const outside = await fs.mkdtemp(path.join(base, "outside-"));
    await fs.mkdir(path.join(ws.workdir, "sessions"), { recursive: true });
    await fs.symlink(outside, path.join(ws.workdir, "sessions", "s1"));
    await expectCode(ws.offloadToolResult("s1", { id: "t", output: "secret" }), "path_escape", /symlink outside the workspace/);
    await expectCode(ws.offloadContext("s1", [{ role: "user", content: "secret" }]), "path_escape");
    await fs.symlink(outside, path.join(ws.workdir, "data"));
    await expectCode(ws.offloadData({ type: "data", source: { type: "base64", data: "AAECAwQF", media_type: "image/png" } }), "path_escape");
    expect(await fs.readdir(outside)).toEqual([]);
  });

  it("refuses a skill partition that is a host symlink leading out, leaving the target untouched", async () => {
    const ws = await open("sym-skills", { skillPaths: [skillPath("alpha")] });
    const outside = await fs.mkdtemp(path.join(base, "outside-"));
    await fs.symlink(outside, path.join(ws.workdir, "skills", "evil"));
    await expectCode(ws.listSkills({ agentId: "evil" }), "path_escape");
    await expectCode(ws.addSkill(skillPath("beta"), { agentId: "evil" }), "path_escape");
    await expectCode(ws.addSkillArchive(zipOf({ "SKILL.md": skillMd("z", "d") }), { format: "zip", agentId: "evil" }), "path_escape");
    expect(await fs.readdir(outside)).toEqual([]);
  });

  it("keeps a host symlink inside a skill folder from being followed when the folder itself is a symlink", async () => {
    const ws = await open("sym-source");
    const link = path.join(base, "alpha-link");
    await fs.symlink(skillPath("alpha"), link);
    expect(await ws.addSkill(link)).toMatchObject({ name: "alpha" });
    expect((await fs.readdir(path.join(ws.workdir, "skills/default/alpha"))).sort()).toEqual(["SKILL.md", "scripts"]);
    expect((await fs.lstat(path.join(ws.workdir, "skills/default/alpha"))).isSymbolicLink()).toBe(false);
  });

  it("leaves no temporary folder behind after archive installs, failed or not", async () => {
    const tmp = await fs.mkdtemp(path.join(base, "tmpdir-"));
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = tmp;
    try {
      const ws = await open("tmp-clean");
      await ws.addSkillArchive(zipOf({ "SKILL.md": skillMd("ok", "fine") }), { format: "zip" });
      await expectCode(ws.addSkillArchive(zipOf({ "../x": "x" }), { format: "zip" }), "path_escape");
      await expectCode(ws.addSkillArchive(await tarOf([{ name: "big", data: "x".repeat(3000) }]), { format: "tar", maxExtractedBytes: 100 }), "too_large");
      expect(await fs.readdir(tmp)).toEqual([]);
    } finally {
      process.env.TMPDIR = saved;
    }
  });
});

describe("archive extraction", () => {
  const dest = async () => fs.mkdtemp(path.join(base, "x-"));
  const spool = async (data: Uint8Array) => {
    const dir = await fs.mkdtemp(path.join(base, "spool-"));
    const file = path.join(dir, "a");
    await spoolInput(data, file, 10 * 1024 * 1024);
    return file;
  };

  it("checks declared sizes before writing anything", async () => {
    for (const [data, format] of [
      [zipOf({ "a.txt": "small", "b.bin": "x".repeat(5000) }), "zip"],
      [
        await tarOf([
          { name: "a.txt", data: "small" },
          { name: "b.bin", data: "x".repeat(5000) },
        ]),
        "tar",
      ],
      [
        await tarOf(
          [
            { name: "a.txt", data: "small" },
            { name: "b.bin", data: "x".repeat(5000) },
          ],
          true,
        ),
        "tar.gz",
      ],
    ] as const) {
      const out = await dest();
      await expectCode(extractArchive(await spool(data), format, out, 1000), "too_large", /expands to \d+ bytes/);
      expect(await fs.readdir(out), format).toEqual([]);
    }
  });

  it("refuses an unsafe member before writing the safe ones listed before it", async () => {
    const out = await dest();
    await expectCode(extractArchive(await spool(zipOf({ "fine.txt": "ok", "../escape.txt": "x" })), "zip", out, 1 << 20), "path_escape");
    expect(await fs.readdir(out)).toEqual([]);
    await expectCode(
      extractArchive(
        await spool(
          await tarOf([
            { name: "fine.txt", data: "ok" },
            { name: "l", type: "symlink", linkname: "/" },
          ]),
        ),
        "tar",
        out,
        1 << 20,
      ),
      "invalid_argument",
      /symlink/,
    );
    expect(await fs.readdir(out)).toEqual([]);
  });

  it("extracts files, folders and executable bits; auto-detects gzip for 'tar'", async () => {
    const out = await dest();
    await extractArchive(
      await spool(
        await tarOf(
          [
            { name: "d/run.sh", data: "echo", mode: 0o755 },
            { name: "d/x.txt", data: "x" },
          ],
          true,
        ),
      ),
      "tar",
      out,
      1 << 20,
    );
    expect((await fs.stat(path.join(out, "d/run.sh"))).mode & 0o111).not.toBe(0);
    expect((await fs.stat(path.join(out, "d/x.txt"))).mode & 0o111).toBe(0);
    const zout = await dest();
    await extractArchive(await spool(zipOf({ "z/run.sh": { data: "echo", mode: 0o100755 }, "z/empty/": "" })), "zip", zout, 1 << 20);
    expect((await fs.stat(path.join(zout, "z/run.sh"))).mode & 0o111).not.toBe(0);
    expect((await fs.stat(path.join(zout, "z/empty"))).isDirectory()).toBe(true);
  });

  it("caps the spooled input", async () => {
    const dir = await fs.mkdtemp(path.join(base, "cap-"));
    await expectCode(spoolInput(chunked(new Uint8Array(5000), 512), path.join(dir, "a"), 4000), "too_large", /larger than 4000 bytes/);
  });

  it("names unsafe members", () => {
    expect(safeMemberPath("./a//b/./c")).toBe("a/b/c");
    expect(safeMemberPath("./")).toBeNull();
    for (const bad of ["../a", "a/../../b", "/abs", "C:/x", "a\\..\\b", "a\0b"]) expect(() => safeMemberPath(bad)).toThrow(/unsafe archive member/);
  });
});

describe("skill index, names and front matter (reference vectors)", () => {
  it("sanitises skill folder names like the reference", () => {
    expect(sanitizeSkillDirName("My Skill.v2/é中")).toBe("My_Skill_v2_é中");
    expect(sanitizeSkillDirName("a-b_c 9")).toBe("a-b_c_9");
    expect(sanitizeSkillDirName("..")).toBe("__");
    expect(Buffer.byteLength(sanitizeSkillDirName("中".repeat(200)))).toBeLessThanOrEqual(200);
  });

  it("writes .index like Python's json.dumps(indent=2, ensure_ascii=False) and keeps key order on read", () => {
    expect(serializeIndex({ mtime: 0, entries: new Map() })).toBe('{\n  "skills_dir_mtime": 0.0,\n  "skills": {}\n}');
    const text = serializeIndex({
      mtime: 1700000000.25,
      entries: new Map([
        ["b", { hash: "h1", skillName: "B" }],
        ["2048", { hash: "h2", skillName: "数字" }],
      ]),
    });
    expect(text).toBe(
      '{\n  "skills_dir_mtime": 1700000000.25,\n  "skills": {\n    "b": {\n      "hash": "h1",\n      "skill_name": "B"\n    },\n    "2048": {\n      "hash": "h2",\n      "skill_name": "数字"\n    }\n  }\n}',
    );
    const back = parseIndex(text);
    expect([...back.entries.keys()]).toEqual(["b", "2048"]);
    expect(back.mtime).toBe(1700000000.25);
    expect(parseIndex("not json").entries.size).toBe(0);
    expect(parseIndex(undefined).mtime).toBe(0);
  });

  it("maps agent ids to partitions and refuses unusable ones", () => {
    expect(partitionName(undefined)).toBe("default");
    expect(partitionName("")).toBe("default");
    expect(partitionName("agent.1")).toBe("agent.1");
    for (const bad of ["..", "../x", ".seed", "a/b", "a\\b"]) expect(() => partitionName(bad)).toThrow(/not usable as a skill partition name/);
  });

  it("parses front matter with python-frontmatter semantics", () => {
    expect(parseSkillMarkdown("-----\nname: n\ndescription: d\n-----  \n\n  body  \n")).toEqual({
      ok: true,
      manifest: { name: "n", description: "d", markdown: "body" },
    });
    expect(parseSkillMarkdown("---\nname: 12\ndescription: true\n---\n")).toEqual({ ok: true, manifest: { name: "12", description: "True", markdown: "" } });
    expect(parseSkillMarkdown("\n---\nname: n\ndescription: d\n---\n")).toMatchObject({ ok: false });
    expect(parseSkillMarkdown("\ufeff---\nname: n\ndescription: d\n---\nb")).toMatchObject({ ok: true, manifest: { name: "n" } });
    expect(parseSkillMarkdown("---\nname: n\ndescription: ''\n---\n")).toMatchObject({ ok: false, problem: expect.stringContaining("'description'") });
  });
});

describe("offload ids and media types", () => {
  it("keeps safe ids and hashes unsafe ones into one distinct segment", () => {
    expect(sanitizeId("abc-1_2.3", "sessionId")).toBe("abc-1_2.3");
    expect(sanitizeId("0f8e9c2d4b6a4d1e9f3a2b1c0d9e8f7a", "sessionId")).toBe("0f8e9c2d4b6a4d1e9f3a2b1c0d9e8f7a");
    const weird = sanitizeId("../x", "sessionId");
    expect(weird).toMatch(/^_\._x-[0-9a-f]{12}$/);
    expect(sanitizeId("a/b", "s")).not.toBe(sanitizeId("a?b", "s"));
    expect(sanitizeId("x".repeat(500), "s")).toHaveLength(64 + 13);
    expect(() => sanitizeId("", "sessionId")).toThrow(/sessionId/);
  });

  it("follows Python's mimetypes for the reference's types", () => {
    expect(extensionFor("image/jpeg")).toBe(".jpg");
    expect(extensionFor("IMAGE/PNG")).toBe(".png");
    expect(extensionFor("audio/wav")).toBe(".bin");
  });
});

describe("instructions", () => {
  it("renders the default template with closed fences and str.format brace rules", () => {
    const text = renderInstructions(undefined, { backend: "Docker-based", workdir: "/workspace" });
    expect(text).toContain("Docker-based workspace rooted at /workspace");
    expect((text.match(/```/g) ?? []).length % 2).toBe(0);
    expect(DEFAULT_WORKSPACE_INSTRUCTIONS).toContain("{workdir}");
    expect(renderInstructions("{{x}} {backend}", { backend: "b", workdir: "w" })).toBe("{x} b");
    expect(() => renderInstructions("a { b", { backend: "b", workdir: "w" })).toThrow(/single '\{'/);
    expect(() => renderInstructions("{}", { backend: "b", workdir: "w" })).toThrow(/unknown placeholder/);
  });
});
