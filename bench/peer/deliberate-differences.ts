/**
 * Every way our workspace tree or call results may differ from the reference's after the parity
 * scenario, each with its reason. parity.ts accepts a difference only when its key
 * ("<kind>:<target>", see compare.ts) and detail match one entry here; anything else fails.
 *
 * - "deliberate": we differ on purpose (usually a fault of the reference, section 11 of
 *   shared/reference/agentscope-workspace.md) and say why.
 * - "open": a parity bug on our side that is known and reported, with the file that has to change.
 *   It is printed on every run and should be fixed, then removed from here.
 * Keep this list short and honest: an entry is a decision, not a way to silence a bug.
 */
export interface DeliberateDifference {
  status: "deliberate" | "open";
  /** Matched against the difference key, e.g. "content:.mcp" or "result:#12 listSkills". */
  match: RegExp;
  /** Matched against the detail too, so an entry cannot hide an unrelated change in the same file. */
  detail?: RegExp;
  reason: string;
  /** For open gaps: where the fix goes. */
  owner?: string;
}

export const DELIBERATE_DIFFERENCES: DeliberateDifference[] = [
  {
    status: "deliberate",
    match: /^only-ours:sessions\/team_7_a-[0-9a-f]{12}(\/tool_result-call_1-[0-9a-f]{12}\.txt)?$/,
    reason:
      "Session and tool-call ids are sanitised into one path segment ([A-Za-z0-9_.-], else '_' plus a 12-hex SHA-256 suffix). " +
      "The reference uses them raw (section 11, item 11): 'team:7/a' nests folders, and '../x' would leave sessions/.",
  },
  {
    status: "deliberate",
    match: /^only-reference:sessions\/team:7(\/a(\/tool_result-call 1\.txt)?)?$/,
    reason: "The reference's folders for the same call, named with the raw ids ('team:7/a' became two nested folders).",
  },
  {
    status: "deliberate",
    match: /^result:#\d+ offloadToolResult$/,
    detail: /team_7_a-[0-9a-f]{12}.*team:7\/a/,
    reason: "The path returned by offloadToolResult names the sanitised folder and file, as on disk.",
  },
  {
    status: "deliberate",
    match: /^(content:skills\/[^/]+\/\.index|result:#\d+ listSkills)$/,
    detail: /legacy/,
    reason:
      "Skill folders moved into skills/.seed by the legacy-layout migration are indexed (and so listed) by ours. The reference " +
      "never indexes them: .seed/.index is rebuilt from skill_paths only, and a partition copied from the seed inherits the seed's " +
      "folder mtime, which equals the copied index's skills_dir_mtime, so the partition is never reconciled and the migrated skill stays invisible.",
  },
  {
    status: "deliberate",
    match: /^only-reference:skills\/[^/]+\/\.index$/,
    reason:
      "No .index is written for a partition that holds no skill and whose index did not change. The reference writes one only to " +
      "record the folder mtime it uses to detect changes; ours re-checks the folder against the index instead (index writes are " +
      "renames that change the folder mtime themselves), so the file would carry nothing.",
  },
  {
    status: "deliberate",
    match: /^(only-ours|only-reference):skills\/[^/]+\/(skill|uploaded_skill)(\/.*)?$|^content:skills\/[^/]+\/\.index$/,
    detail: /(dir|file) only in (ours|the reference)|uploaded_skill/,
    reason:
      "addSkillArchive with an explicit dirName names the folder dirName (here 'skill'); the reference's LocalWorkspace ignores " +
      "dirName and uses the front-matter name (uploaded_skill) while its sandboxed workspaces honour it. One implementation " +
      "serves every backend here, so a name the caller gives is kept everywhere; without dirName the front-matter name is used.",
  },
];

/** Normalisations compare.ts applies before comparing (necessary, not tolerated, differences). */
export const NORMALISATIONS: string[] = [
  "`.index` `skills_dir_mtime`: the folder's mtime float at write time; two trees written moments apart cannot share it, so only its presence and type are compared.",
  'Generated values in `context.jsonl` and call results: uuid4-hex ids and "now" timestamps (e.g. the fresh `created_at` both sides stamp on a data block moved to data/; ours UTC ISO-8601 with `Z`, the reference naive local `isoformat()`) are compared by shape only. Fixed ids and timestamps given by the scenario must survive byte for byte.',
  "Paths returned by calls (skill `dir`, offload paths) are compared relative to each workspace root, since the two roots are different temp folders.",
  "Error results are compared as 'failed' vs 'succeeded'; the wording of messages is ours (they name the field and say what to do).",
];
