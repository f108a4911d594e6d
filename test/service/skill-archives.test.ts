/**
 * Issue 26 item 8: an uploaded archive's skill keeps its folder name, as the README says, and
 * nothing in an archive is silently dropped: several skill folders, or files beside the skill
 * folder, are a 400 naming them, with nothing installed.
 */
import { zipSync } from "fflate";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type Running } from "./service-fixture.js";
import { skillMd } from "./upload-streams.js";

const enc = new TextEncoder();
const zipOf = (files: Record<string, string>) => zipSync(Object.fromEntries(Object.entries(files).map(([k, v]) => [k, enc.encode(v)])));

describe("skill archives over HTTP", () => {
  let svc: Running;
  let w: string;
  beforeAll(async () => {
    svc = await startTestService();
    const { sessionId } = (await (await svc.call("alice", "POST", "/sessions", { agentId: "arch" })).json()) as { sessionId: string };
    w = `/sessions/${sessionId}/workspace/skills`;
  });
  afterAll(() => svc.close());

  const post = (files: Record<string, string>, filename = "skill.zip") => {
    const form = new FormData();
    form.append("archive", new Blob([zipOf(files)]), filename);
    return svc.call("alice", "POST", w, form);
  };
  const names = async () =>
    ((await (await svc.call("alice", "GET", w)).json()) as Array<{ name: string; dir: string }>).map((s) => `${s.name}@${s.dir.split("/").pop()}`).sort();

  it("installs an archive's one top-level folder under that folder's name (zip metadata ignored)", async () => {
    const r = await post({ "release-notes/SKILL.md": skillMd("Release Notes"), "release-notes/tmpl/a.md": "A", "__MACOSX/release-notes/._SKILL.md": "junk" });
    expect(r.status).toBe(201);
    expect(await r.json()).toMatchObject({ name: "Release Notes", dir: "skills/arch/release-notes" });
    // SKILL.md at the archive root: there is no folder name, so the front matter names it.
    const root = await post({ "SKILL.md": skillMd("rooted"), "lib/x.py": "x" });
    expect(await root.json()).toMatchObject({ name: "rooted", dir: "skills/arch/rooted" });
  });

  it("refuses several skill folders in one archive, naming them, and installs none", async () => {
    const before = await names();
    const r = await post({ "alpha/SKILL.md": skillMd("alpha"), "beta/SKILL.md": skillMd("beta") });
    expect(r.status).toBe(400);
    expect(await r.json()).toMatchObject({
      title: "invalid_argument",
      field: "archive",
      detail: expect.stringMatching(/2 skill folders \('alpha', 'beta'\); upload one skill per archive/),
    });
    expect(await names()).toEqual(before);
  });

  it("refuses files or folders beside the skill folder instead of dropping them", async () => {
    const before = await names();
    const file = await post({ "gamma/SKILL.md": skillMd("gamma"), "README.md": "read me" });
    expect(file.status).toBe(400);
    expect(await file.json()).toMatchObject({ field: "archive", detail: expect.stringMatching(/'README\.md' beside the skill folder 'gamma'/) });
    const folder = await post({ "gamma/SKILL.md": skillMd("gamma"), "assets/logo.svg": "<svg/>" });
    expect(folder.status).toBe(400);
    expect(await folder.json()).toMatchObject({ field: "archive", detail: expect.stringMatching(/'assets' beside the skill folder 'gamma'/) });
    expect(await names()).toEqual(before);
  });
});
