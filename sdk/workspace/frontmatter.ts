import { parse as parseYaml } from "yaml";

/**
 * SKILL.md front matter with python-frontmatter semantics (the reference's parser):
 * `\r\n` becomes `\n`; the text must begin with a line of three or more dashes; the front matter
 * ends at the next such line; it is YAML; the body after it, trimmed, is the skill's markdown.
 *
 * An agent can plant a SKILL.md in its own skills folder and the next listing parses it, so the
 * file and its front matter are capped, and the YAML is parsed without the duplicate-key check
 * (quadratic in the key count; without it a repeated key keeps its last value, as PyYAML does).
 * The byte cap bounds the key count too: 64 KiB holds at most ~13,000 `k: v` lines.
 */
/** A SKILL.md larger than this is refused (listings skip it with a warning). */
export const MAX_SKILL_MD_BYTES = 1024 * 1024;
/** Front matter (between the '---' lines) larger than this is refused before YAML parsing. */
export const MAX_FRONT_MATTER_BYTES = 64 * 1024;

export interface SkillManifest {
  name: string;
  description: string;
  markdown: string;
}

export type FrontMatterResult =
  | { ok: true; manifest: SkillManifest }
  /** `problem` completes the sentence "SKILL.md ..." so callers can name the file. */
  | { ok: false; problem: string };

const BOUNDARY = /^-{3,}[ \t]*$/;

/** Newlines normalised the way Python's text-mode read does (universal newlines). */
export function normalizeNewlines(text: string): string {
  return text.replace(/\r\n?/g, "\n");
}

export function parseSkillMarkdown(raw: string): FrontMatterResult {
  // Characters never outnumber UTF-8 bytes: the length test skips the byte count for small files.
  if (raw.length > MAX_SKILL_MD_BYTES || Buffer.byteLength(raw) > MAX_SKILL_MD_BYTES)
    return { ok: false, problem: `is over the ${MAX_SKILL_MD_BYTES}-byte limit for a SKILL.md` };
  // A leading byte-order mark would hide the opening '---' (editors on Windows add one).
  const text = normalizeNewlines(raw).replace(/^\ufeff/, "");
  const lines = text.split("\n");
  if (lines.length === 0 || !BOUNDARY.test(lines[0]!)) return { ok: false, problem: "does not start with a '---' front matter block" };
  const end = lines.findIndex((l, i) => i > 0 && BOUNDARY.test(l));
  if (end < 0) return { ok: false, problem: "has no closing '---' line after its front matter" };

  const block = lines.slice(1, end).join("\n");
  const blockBytes = Buffer.byteLength(block);
  if (blockBytes > MAX_FRONT_MATTER_BYTES)
    return { ok: false, problem: `has ${blockBytes} bytes of front matter, over the ${MAX_FRONT_MATTER_BYTES}-byte limit` };
  let meta: unknown;
  try {
    meta = parseYaml(block, { uniqueKeys: false });
  } catch (e) {
    return { ok: false, problem: `has front matter that is not valid YAML (${firstLine(e)})` };
  }
  if (meta === null || typeof meta !== "object" || Array.isArray(meta)) return { ok: false, problem: "has front matter that is not a YAML mapping" };

  const record = meta as Record<string, unknown>;
  const missing = (["name", "description"] as const).filter((k) => !truthy(record[k]));
  if (missing.length > 0)
    return {
      ok: false,
      problem: `is missing ${missing.map((m) => `'${m}'`).join(" and ")} in its front matter (both 'name' and 'description' are required)`,
    };
  return {
    ok: true,
    manifest: {
      name: asText(record.name),
      description: asText(record.description),
      markdown: lines
        .slice(end + 1)
        .join("\n")
        .trim(),
    },
  };
}

/** Python truthiness for YAML scalars and collections. */
function truthy(v: unknown): boolean {
  if (v === null || v === undefined || v === false || v === 0 || v === "") return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === "object") return Object.keys(v as object).length > 0;
  return true;
}

/** Values are coerced to text like Python's str() for the common scalar cases. */
function asText(v: unknown): string {
  if (typeof v === "string") return v;
  if (v === true) return "True";
  if (v === false) return "False";
  if (typeof v === "number" || typeof v === "bigint") return String(v);
  return JSON.stringify(v);
}

function firstLine(e: unknown): string {
  return String(e instanceof Error ? e.message : e).split("\n")[0]!;
}
