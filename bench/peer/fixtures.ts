/**
 * Deterministic inputs for the peer benchmark, written once per run into a folder that both
 * runtimes read: skill folders, tool-result texts, data payloads and context messages. The JSON
 * shapes are the reference's wire shapes (snake_case, as `model_dump(mode="json")` emits them);
 * ours.ts maps them to our API, so both sides get byte-identical content.
 */
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";

export interface FixtureIndex {
  root: string;
  seedSkills: string[];
  addSkills: string[];
}

/** A reference-shaped DataBlock (`source.type` is "base64" or "url"). */
export interface RefDataBlock {
  type: "data";
  id: string;
  name: string | null;
  source: { type: "base64"; data: string; media_type: string } | { type: "url"; url: string; media_type: string };
  created_at?: string;
  finished_at?: string | null;
}
export interface RefTextBlock {
  type: "text";
  text: string;
  id: string;
  created_at: string;
  finished_at: string | null;
}
export interface RefToolResult {
  type?: "tool_result";
  id: string;
  name: string;
  output: string | Array<RefTextBlock | RefDataBlock>;
  state: "success" | "error" | "running";
}
export interface RefMsg {
  name: string;
  role: "user" | "assistant" | "system";
  id: string;
  content: string | Array<RefTextBlock | RefDataBlock>;
  metadata: Record<string, unknown>;
  created_at: string;
}
export interface Payloads {
  smallResults: string[];
  bigResultFile: string;
  bigResultCount: number;
  dataBlocks: RefDataBlock[];
  contextMessages: RefMsg[];
}

export const FIXED_TIME = "2026-01-01 00:00:00.000";

/** mulberry32: a tiny seeded PRNG, so payloads are the same on every run and machine. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function bytes(seed: number, n: number): Buffer {
  const r = prng(seed);
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(r() * 256);
  return b;
}

const WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon".split(" ");
export function words(seed: number, n: number): string {
  const r = prng(seed);
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(WORDS[Math.floor(r() * WORDS.length)]!);
  return out.join(" ");
}

export function skillMd(name: string, description: string, body: string): string {
  return `---\nname: ${name}\ndescription: ${description}\n---\n\n# ${name}\n\n${body}\n`;
}

/** A skill folder with a SKILL.md, a script and a reference file (so copies are trees, not one file). */
export async function writeSkill(dir: string, md: string, seed: number): Promise<void> {
  await mkdir(path.join(dir, "scripts"), { recursive: true });
  await writeFile(path.join(dir, "SKILL.md"), md);
  await writeFile(path.join(dir, "scripts", "run.sh"), `#!/bin/sh\necho ${JSON.stringify(words(seed, 6))}\n`);
  await writeFile(path.join(dir, "reference.md"), `${words(seed + 1, 300)}\n`);
}

const MEDIA = ["image/png", "image/jpeg", "application/pdf", "text/plain", "audio/mpeg"];

export async function writeFixtures(root: string): Promise<FixtureIndex> {
  const skillsRoot = path.join(root, "skills");
  const seedSkills: string[] = [];
  for (let i = 0; i < 20; i++) {
    const id = String(i).padStart(2, "0");
    const dir = path.join(skillsRoot, `seed-${id}`);
    await writeSkill(dir, skillMd(`seed-skill-${id}`, `Seed skill ${id} of the peer benchmark.`, words(100 + i, 80)), 100 + i);
    seedSkills.push(dir);
  }
  // 100 installs: 67 distinct SKILL.md files (the last 7 reuse an earlier name with another body, so
  // names get " (1)" suffixes), then 33 byte-identical duplicates of earlier ones in other folders.
  const addSkills: string[] = [];
  const mds: string[] = [];
  for (let i = 0; i < 100; i++) {
    const id = String(i).padStart(3, "0");
    const dir = path.join(skillsRoot, `add-${id}`);
    let md: string;
    if (i < 60) md = skillMd(`added-skill-${id}`, `Added skill ${id}.`, words(1000 + i, 80));
    else if (i < 67) md = skillMd(`added-skill-${String(i - 60).padStart(3, "0")}`, `Another skill named like ${i - 60}.`, words(2000 + i, 80));
    else md = mds[i - 67]!;
    mds.push(md);
    await writeSkill(dir, md, 1000 + i);
    addSkills.push(dir);
  }

  const smallResults = Array.from({ length: 1000 }, (_, i) => `result ${i}: ${words(5000 + i, 30)}`);
  const big = "0123456789abcdef".repeat(65536); // 1 MiB of ASCII
  await writeFile(path.join(root, "big.txt"), big);

  const distinct = Array.from({ length: 50 }, (_, i) => ({ data: bytes(9000 + i, 16384).toString("base64"), media_type: MEDIA[i % MEDIA.length]! }));
  const dataBlocks: RefDataBlock[] = Array.from({ length: 100 }, (_, i) => {
    const p = distinct[i < 50 ? i : (i * 7) % 50]!;
    return { type: "data", id: `blk-${i}`, name: `file-${i}`, source: { type: "base64", data: p.data, media_type: p.media_type } };
  });

  const ctxPayloads = Array.from({ length: 10 }, (_, i) => bytes(7000 + i, 4096).toString("base64"));
  const contextMessages: RefMsg[] = Array.from({ length: 1000 }, (_, i) => {
    const role = i % 2 === 0 ? "user" : "assistant";
    const content: Array<RefTextBlock | RefDataBlock> = [
      { type: "text", text: words(20000 + i, 60), id: `txt-${i}`, created_at: FIXED_TIME, finished_at: null },
    ];
    if (i % 25 === 0)
      content.push({
        type: "data",
        id: `img-${i}`,
        name: `image-${i}.png`,
        source: { type: "base64", data: ctxPayloads[(i / 25) % 10]!, media_type: "image/png" },
        created_at: FIXED_TIME,
        finished_at: null,
      });
    return { name: role, role, id: `msg-${i}`, content, metadata: {}, created_at: FIXED_TIME };
  });

  const payloads: Payloads = { smallResults, bigResultFile: "big.txt", bigResultCount: 20, dataBlocks, contextMessages };
  await writeFile(path.join(root, "payloads.json"), JSON.stringify(payloads));
  const index: FixtureIndex = { root, seedSkills, addSkills };
  await writeFile(path.join(root, "index.json"), JSON.stringify(index));
  return index;
}
