/**
 * The parity scenario: one list of calls that both implementations replay against an empty folder
 * (reference_ops.py and ours.ts each interpret it). Inputs use the reference's JSON shapes; the
 * TS side maps them to our API. `full` covers every on-disk artefact (seeding, partitions, .index,
 * dedup and name clashes, .mcp scopes, tool results with collisions, data/ with several media
 * types, context.jsonl appends, purges); `reduced` is the quick subset the test suite runs.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { zipSync, strToU8 } from "fflate";
import path from "node:path";
import { bytes, skillMd, writeSkill, FIXED_TIME, type RefDataBlock, type RefMsg, type RefToolResult } from "./fixtures.js";

/** The reference's MCPClient JSON (what `.mcp` stores). */
export interface RefMcpJson {
  name: string;
  is_stateful: boolean;
  mcp_config: { type: "http_mcp"; url: string; headers: Record<string, string> | null; timeout: number | null };
  enable_tools: string[] | null;
  disable_tools: string[] | null;
  execution_timeout: number | null;
}

export type Step =
  | { call: "init"; workspaceId: string; skillPaths: string[]; defaultMcps: RefMcpJson[] }
  | { call: "close" }
  | { call: "listSkills"; agentId?: string }
  | { call: "addSkill"; path: string; agentId?: string }
  | { call: "removeSkill"; name: string; agentId?: string }
  | { call: "addMcp"; spec: RefMcpJson; agentId?: string; sessionId?: string }
  | { call: "removeMcp"; name: string; agentId?: string; sessionId?: string }
  | { call: "listMcps"; agentId?: string; sessionId?: string }
  | { call: "purgeSession"; agentId: string; sessionId: string }
  | { call: "purgeAgent"; agentId: string }
  | { call: "offloadToolResult"; sessionId: string; result: RefToolResult }
  | { call: "offloadData"; block: RefDataBlock }
  | { call: "offloadContext"; sessionId: string; messages: RefMsg[] }
  /** Installs a skill archive read from a host file. */
  | { call: "addSkillArchive"; file: string; format: "zip" | "tar" | "tar.gz"; dirName: string; agentId?: string }
  | { call: "reset" }
  /** Not an API call: copies the workspace folder to `<workdir>@<label>`; parity.ts compares each copy pair. */
  | { call: "snapshot"; label: string }
  /** Not an API call: writes a file into the workspace folder directly (legacy layouts, corrupt files). */
  | { call: "writeFile"; path: string; content: string };

export type StepResult = { ok: true; value: unknown } | { ok: false; error: string };

/** Stateless HTTP MCPs: declaring one connects nothing, so the scenario needs no server. */
export function httpMcp(name: string, extra: Partial<RefMcpJson> = {}): RefMcpJson {
  return {
    name,
    is_stateful: false,
    mcp_config: { type: "http_mcp", url: `http://127.0.0.1:9/${name}/mcp`, headers: null, timeout: 30.0 },
    enable_tools: null,
    disable_tools: null,
    execution_timeout: null,
    ...extra,
  };
}

function b64(seed: number, n: number): string {
  return bytes(seed, n).toString("base64");
}
function dataBlock(id: string, name: string | null, mediaType: string, data: string): RefDataBlock {
  return { type: "data", id, name, source: { type: "base64", data, media_type: mediaType }, created_at: FIXED_TIME, finished_at: null };
}
function text(id: string, t: string) {
  return { type: "text" as const, text: t, id, created_at: FIXED_TIME, finished_at: null };
}

interface ScenarioSkills {
  alpha: string;
  beta: string;
  alphaCopy: string;
  alphaClash: string;
  unicode: string;
  invalid: string;
  extra1: string;
  extra1Copy: string;
  extra1Clash: string;
  extra2: string;
}

async function writeScenarioSkills(root: string): Promise<ScenarioSkills> {
  const dir = (n: string) => path.join(root, "scenario-skills", n);
  const alphaMd = skillMd("seed-alpha", "The first seed.", "Alpha body.");
  const extra1Md = skillMd("extra-one", "An added skill.", "Extra one body.");
  const s: ScenarioSkills = {
    alpha: dir("alpha"),
    beta: dir("beta"),
    alphaCopy: dir("alpha-copy"),
    alphaClash: dir("alpha-clash"),
    unicode: dir("unicode"),
    invalid: dir("invalid"),
    extra1: dir("extra1"),
    extra1Copy: dir("extra1-copy"),
    extra1Clash: dir("extra1-clash"),
    extra2: dir("extra2"),
  };
  await writeSkill(s.alpha, alphaMd, 1);
  await writeSkill(s.beta, skillMd("seed-beta", "The second seed.", "Beta body."), 2);
  await writeSkill(s.alphaCopy, alphaMd, 3);
  await writeSkill(s.alphaClash, skillMd("seed-alpha", "Same name, other text.", "Clash body."), 4);
  await writeSkill(s.unicode, skillMd("My Skill.v2/é中", "Needs a sanitised folder name.", "Unicode body."), 5);
  await mkdir(s.invalid, { recursive: true });
  await writeFile(path.join(s.invalid, "SKILL.md"), "---\nname: no-description\n---\nbody\n");
  await writeSkill(s.extra1, extra1Md, 6);
  await writeSkill(s.extra1Copy, extra1Md, 7);
  await writeSkill(s.extra1Clash, skillMd("extra-one", "Another skill called extra-one.", "Clash."), 8);
  await writeSkill(s.extra2, skillMd("extra-two", "Bob's skill.", "Extra two body."), 9);
  // An upload as a browser would zip it: one top folder holding the skill.
  await writeFile(
    path.join(root, "scenario-skills", "upload.zip"),
    zipSync({
      "Uploaded Skill/SKILL.md": strToU8(skillMd("uploaded skill", "Came in a zip.", "Zip body.")),
      "Uploaded Skill/scripts/run.sh": strToU8("#!/bin/sh\necho zipped\n"),
    }),
  );
  return s;
}

/** Writes the scenario's skill folders under `root` and returns the step list. */
export async function buildScenario(root: string, variant: "full" | "reduced"): Promise<Step[]> {
  const k = await writeScenarioSkills(root);
  const png = b64(11, 300);
  const jpeg = b64(12, 200);
  const wav = b64(13, 100);
  const txt = Buffer.from("plain text payload\n").toString("base64");

  if (variant === "reduced") {
    return [
      { call: "init", workspaceId: "parity-ws", skillPaths: [k.alpha, k.beta, k.alphaCopy], defaultMcps: [httpMcp("docs")] },
      { call: "listSkills", agentId: "alice" },
      { call: "addSkill", path: k.extra1, agentId: "alice" },
      { call: "addSkill", path: k.extra1Clash, agentId: "alice" },
      { call: "listSkills", agentId: "alice" },
      { call: "addMcp", spec: httpMcp("search"), agentId: "alice", sessionId: "s1" },
      { call: "offloadToolResult", sessionId: "s1", result: { id: "call-1", name: "t", output: "hello", state: "success" } },
      { call: "offloadToolResult", sessionId: "s1", result: { id: "call-1", name: "t", output: "again", state: "success" } },
      { call: "offloadData", block: dataBlock("d1", "pic.png", "image/png", png) },
      {
        call: "offloadContext",
        sessionId: "s1",
        messages: [
          {
            name: "user",
            role: "user",
            id: "m1",
            content: [text("t1", "hi"), dataBlock("d2", "pic.png", "image/png", png)],
            metadata: {},
            created_at: FIXED_TIME,
          },
          { name: "assistant", role: "assistant", id: "m2", content: [text("t2", "hello")], metadata: {}, created_at: FIXED_TIME },
        ],
      },
      { call: "close" },
    ];
  }

  return [
    // A folder left by an older release: skills/ without partitions (and its .skills index), a v1 .mcp.
    { call: "writeFile", path: "skills/legacy/SKILL.md", content: skillMd("legacy-skill", "From the old layout.", "Legacy body.") },
    { call: "writeFile", path: "skills/.skills", content: '{"skills_dir_mtime": 0.0, "skills": {}}' },
    { call: "writeFile", path: "skills/notes.txt", content: "not a skill\n" },
    { call: "writeFile", path: ".mcp", content: JSON.stringify([httpMcp("old-one")], null, 2) },
    {
      call: "init",
      workspaceId: "parity-ws",
      skillPaths: [k.alpha, k.beta, k.alphaCopy, k.alphaClash, k.unicode, k.invalid],
      defaultMcps: [httpMcp("docs")],
    },
    { call: "listMcps" },
    { call: "listSkills" },
    { call: "listSkills", agentId: "alice" },
    { call: "addSkill", path: k.extra1, agentId: "alice" },
    { call: "addSkill", path: k.extra1Copy, agentId: "alice" },
    { call: "addSkill", path: k.extra1Clash, agentId: "alice" },
    { call: "addSkill", path: k.invalid, agentId: "alice" },
    { call: "addSkill", path: k.extra2, agentId: "bob" },
    { call: "removeSkill", name: "seed-beta", agentId: "alice" },
    { call: "removeSkill", name: "no-such-skill", agentId: "alice" },
    { call: "listSkills", agentId: "alice" },
    { call: "listSkills", agentId: "bob" },
    { call: "listSkills", agentId: "../evil" },
    { call: "addMcp", spec: httpMcp("search", { enable_tools: ["query"] }), agentId: "alice", sessionId: "s1" },
    { call: "addMcp", spec: httpMcp("search"), agentId: "alice", sessionId: "s1" },
    { call: "addMcp", spec: httpMcp("calc", { execution_timeout: 12.5 }), agentId: "alice", sessionId: "s2" },
    { call: "removeMcp", name: "docs", agentId: "alice", sessionId: "s2" },
    { call: "removeMcp", name: "docs", agentId: "bob", sessionId: "s9" },
    { call: "removeMcp", name: "never-added", agentId: "carol", sessionId: "s1" },
    { call: "addMcp", spec: httpMcp("legacy") },
    { call: "listMcps", agentId: "alice", sessionId: "s1" },
    { call: "listMcps", agentId: "dave", sessionId: "s1" },
    { call: "offloadToolResult", sessionId: "s1", result: { id: "call-1", name: "t", output: "first output", state: "success" } },
    { call: "offloadToolResult", sessionId: "s1", result: { id: "call-1", name: "t", output: "second output", state: "success" } },
    { call: "offloadToolResult", sessionId: "s1", result: { id: "call-1", name: "t", output: "third output", state: "success" } },
    {
      call: "offloadToolResult",
      sessionId: "s1",
      result: {
        id: "call-2",
        name: "t",
        output: [
          text("r1", "before "),
          dataBlock("r2", "shot.png", "image/png", png),
          { type: "data", id: "r3", name: null, source: { type: "url", url: "https://example.com/a.png", media_type: "image/png" } },
          text("r4", " after"),
        ],
        state: "success",
      },
    },
    { call: "offloadData", block: dataBlock("d1", "pic.png", "image/png", png) },
    { call: "offloadData", block: dataBlock("d2", "photo.jpg", "image/jpeg", jpeg) },
    { call: "offloadData", block: dataBlock("d3", "sound.wav", "audio/wav", wav) },
    { call: "offloadData", block: dataBlock("d4", null, "text/plain", txt) },
    { call: "offloadData", block: dataBlock("d5", "again.png", "image/png", png) },
    {
      call: "offloadData",
      block: { type: "data", id: "d6", name: "remote", source: { type: "url", url: "https://example.com/x.pdf", media_type: "application/pdf" } },
    },
    {
      call: "offloadContext",
      sessionId: "s1",
      messages: [
        {
          name: "user",
          role: "user",
          id: "m1",
          content: [text("t1", "look at this"), dataBlock("c1", "pic.png", "image/png", png)],
          metadata: {},
          created_at: FIXED_TIME,
        },
        { name: "assistant", role: "assistant", id: "m2", content: [text("t2", 'Ünïcödé and "quotes"\nnewline')], metadata: { k: 1 }, created_at: FIXED_TIME },
        { name: "user", role: "user", id: "m3", content: [dataBlock("c2", null, "image/jpeg", jpeg)], metadata: {}, created_at: FIXED_TIME },
      ],
    },
    {
      call: "offloadContext",
      sessionId: "s1",
      messages: [{ name: "user", role: "user", id: "m4", content: [text("t4", "appended")], metadata: {}, created_at: FIXED_TIME }],
    },
    { call: "offloadContext", sessionId: "s1", messages: [] },
    // Fields left out: each side fills in its own ids and timestamps (compared by shape).
    { call: "offloadContext", sessionId: "s4", messages: [{ name: "user", role: "user", content: [{ type: "text", text: "defaults" }] } as unknown as RefMsg] },
    { call: "offloadData", block: { type: "data", name: null, source: { type: "base64", data: txt, media_type: "text/markdown" } } as unknown as RefDataBlock },
    // Ids that are not safe as one path segment: the reference nests folders ("team:7/a" makes
    // sessions/team:7/a/), we sanitise (see deliberate-differences.ts).
    { call: "offloadToolResult", sessionId: "team:7/a", result: { id: "call 1", name: "t", output: "odd ids", state: "success" } },
    { call: "offloadToolResult", sessionId: "s3", result: { id: "call-9", name: "t", output: "gone soon", state: "success" } },
    { call: "purgeSession", agentId: "alice", sessionId: "s3" },
    { call: "purgeSession", agentId: "alice", sessionId: "s2" },
    { call: "purgeAgent", agentId: "bob" },
    { call: "close" },
    { call: "snapshot", label: "first-session" },
    // Reopen the same folder with the same seeds: nothing is re-seeded or rewritten, .mcp is restored.
    {
      call: "init",
      workspaceId: "parity-ws",
      skillPaths: [k.alpha, k.beta, k.alphaCopy, k.alphaClash, k.unicode, k.invalid],
      defaultMcps: [httpMcp("docs")],
    },
    { call: "listMcps", agentId: "alice", sessionId: "s1" },
    { call: "listMcps", agentId: "alice", sessionId: "s2" },
    { call: "listMcps", agentId: "bob", sessionId: "s9" },
    { call: "listSkills", agentId: "alice" },
    { call: "listSkills", agentId: "bob" },
    { call: "addSkillArchive", file: path.join(root, "scenario-skills", "upload.zip"), format: "zip", dirName: "skill", agentId: "alice" },
    { call: "addSkillArchive", file: path.join(root, "scenario-skills", "upload.zip"), format: "zip", dirName: "skill", agentId: "alice" },
    { call: "listSkills", agentId: "alice" },
    // An index that is not JSON counts as empty: the partition is re-indexed from its folders.
    { call: "writeFile", path: "skills/carol/manual/SKILL.md", content: skillMd("manual", "Put there by hand.", "Manual body.") },
    { call: "writeFile", path: "skills/carol/.index", content: "{not json" },
    { call: "listSkills", agentId: "carol" },
    { call: "close" },
    { call: "snapshot", label: "before-reset" },
    { call: "init", workspaceId: "parity-ws", skillPaths: [k.alpha], defaultMcps: [httpMcp("docs")] },
    { call: "reset" },
    { call: "listSkills", agentId: "alice" },
    { call: "listMcps", agentId: "alice", sessionId: "s1" },
    { call: "offloadToolResult", sessionId: "s1", result: { id: "call-1", name: "t", output: "after reset", state: "success" } },
    { call: "close" },
  ];
}
