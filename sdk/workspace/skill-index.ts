import { createHash } from "node:crypto";
import { parse as parseYaml } from "yaml";
import { InvalidArgumentError } from "../errors.js";
import { normalizeNewlines } from "./frontmatter.js";

/**
 * The `.index` file kept in `skills/.seed` and in every partition, byte-compatible with the
 * reference's LocalWorkspace:
 *
 *   { "skills_dir_mtime": <float seconds>,
 *     "skills": { "<dir>": { "hash": "<sha256 of SKILL.md text>", "skill_name": "<agent-facing name>" } } }
 *
 * written as Python's `json.dumps(indent=2, ensure_ascii=False)` would (no trailing newline).
 */
export interface IndexEntry {
  hash: string;
  skillName: string;
}

export interface SkillIndex {
  /** Partition directory mtime in seconds when the index was last written (informational, see skills.ts). */
  mtime: number;
  /** Insertion order is listing order. */
  entries: Map<string, IndexEntry>;
}

export const INDEX_FILE = ".index";

export function emptyIndex(): SkillIndex {
  return { mtime: 0, entries: new Map() };
}

/** Missing or unparsable text gives an empty index (the reference's rule); bad entries are dropped. */
export function parseIndex(text: string | undefined): SkillIndex {
  if (text === undefined) return emptyIndex();
  let data: unknown;
  try {
    data = JSON.parse(text); // Only JSON is accepted, as by the reference.
  } catch {
    return emptyIndex();
  }
  // JSON.parse keeps key order (and Python's rules for repeated keys) except that it moves
  // integer-like keys ("7") first; only then is the slower order-keeping YAML parse needed.
  const skills = isRecord(data) ? data.skills : undefined;
  if (isRecord(skills) && Object.keys(skills).some(isArrayIndex)) return parseIndexOrdered(text);
  if (!isRecord(data)) return emptyIndex();
  const mtime = data.skills_dir_mtime;
  const index: SkillIndex = { mtime: typeof mtime === "number" && Number.isFinite(mtime) ? mtime : 0, entries: new Map() };
  if (!isRecord(skills)) return index;
  for (const dir of Object.keys(skills)) {
    const entry = skills[dir];
    if (!isRecord(entry)) continue;
    const hash = entry.hash;
    const name = entry.skill_name;
    if (typeof hash === "string" && typeof name === "string") index.entries.set(dir, { hash, skillName: name });
  }
  return index;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A key JavaScript objects order numerically: a canonical integer below 2^32 - 1. */
function isArrayIndex(key: string): boolean {
  return /^(?:0|[1-9]\d{0,9})$/.test(key) && Number(key) < 4294967295;
}

/** The same rules over YAML's ordered maps (JSON is YAML), for indexes with integer-like folder names. */
function parseIndexOrdered(text: string): SkillIndex {
  let data: unknown;
  try {
    data = parseYaml(text, { mapAsMap: true, uniqueKeys: false });
  } catch {
    return emptyIndex();
  }
  if (!(data instanceof Map)) return emptyIndex();
  const mtime = data.get("skills_dir_mtime");
  const skills = data.get("skills");
  const index: SkillIndex = { mtime: typeof mtime === "number" && Number.isFinite(mtime) ? mtime : 0, entries: new Map() };
  if (!(skills instanceof Map)) return index;
  for (const [dir, entry] of skills) {
    if (typeof dir !== "string" || !(entry instanceof Map)) continue;
    const hash = entry.get("hash");
    const name = entry.get("skill_name");
    if (typeof hash === "string" && typeof name === "string") index.entries.set(dir, { hash, skillName: name });
  }
  return index;
}

export function serializeIndex(index: SkillIndex): string {
  const s = JSON.stringify;
  if (index.entries.size === 0) return `{\n  "skills_dir_mtime": ${pyFloat(index.mtime)},\n  "skills": {}\n}`;
  const rows = [...index.entries].map(([dir, e]) => `    ${s(dir)}: {\n      "hash": ${s(e.hash)},\n      "skill_name": ${s(e.skillName)}\n    }`);
  return `{\n  "skills_dir_mtime": ${pyFloat(index.mtime)},\n  "skills": {\n${rows.join(",\n")}\n  }\n}`;
}

/** Python's repr of a float: integral values keep a ".0". */
function pyFloat(n: number): string {
  return Number.isInteger(n) ? `${n}.0` : String(n);
}

/** SHA-256 hex of the SKILL.md text as Python reads it (UTF-8, universal newlines). */
export function skillHash(text: string): string {
  return createHash("sha256").update(normalizeNewlines(text), "utf8").digest("hex");
}

/**
 * Directory name for a skill: every character that is not a Unicode letter, digit or `_`
 * (Python's `\w`), not CJK U+4E00–U+9FFF and not `-` becomes `_`. So "My Skill.v2/é中" gives
 * "My_Skill_v2_é中". Names longer than 200 UTF-8 bytes are cut (the reference does not cut, and
 * then fails on ENAMETOOLONG).
 */
export function sanitizeSkillDirName(name: string): string {
  let out = name.replace(/[^\p{L}\p{N}_\u4e00-\u9fff-]/gu, "_");
  while (Buffer.byteLength(out, "utf8") > 200) out = [...out].slice(0, -1).join("");
  return out;
}

/** `name`, then `name (1)`, `name (2)`… until unused. */
export function freeSkillName(name: string, taken: Set<string>): string {
  if (!taken.has(name)) return name;
  for (let i = 1; ; i++) if (!taken.has(`${name} (${i})`)) return `${name} (${i})`;
}

export const SEED_PARTITION = ".seed";
export const DEFAULT_PARTITION = "default";

/**
 * The partition directory name for an agent: "default" for none/"", else the id itself. Ids that
 * start with "." or contain "/", "\" or NUL are refused (covers "..", "../x" and ".seed").
 */
export function partitionName(agentId: string | undefined): string {
  if (agentId === undefined || agentId === null || agentId === "") return DEFAULT_PARTITION;
  if (typeof agentId !== "string" || agentId.startsWith(".") || /[\\/\0]/.test(agentId) || Buffer.byteLength(agentId) > 200)
    throw new InvalidArgumentError(
      `'${String(agentId)}' is not usable as a skill partition name (it must not start with '.', contain '/', '\\' or NUL, or exceed 200 bytes)`,
      { field: "agentId" },
    );
  return agentId;
}
