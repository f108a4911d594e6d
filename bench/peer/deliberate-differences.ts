/**
 * Every way our workspace tree or call results may differ from the reference's after the parity
 * scenario, each with its reason. parity.ts accepts a difference only when its key
 * ("<kind>:<target>", see compare.ts) matches one entry here; anything else fails the check.
 * Keep this list short and honest: an entry is a decision, not a way to silence a bug.
 */
export interface DeliberateDifference {
  /** Matched against the difference key, e.g. "content:.mcp" or "result:#12 listSkills". */
  match: RegExp;
  /** Optional: matched against the detail too, so an entry cannot hide an unrelated change. */
  detail?: RegExp;
  reason: string;
}

export const DELIBERATE_DIFFERENCES: DeliberateDifference[] = [];

/** Normalisations compare.ts applies before comparing (necessary, not tolerated, differences). */
export const NORMALISATIONS: string[] = [
  "`.index` `skills_dir_mtime`: the folder's mtime float at write time; two trees written moments apart cannot share it, so only its presence and type are compared.",
  "`context.jsonl`: a data block moved to data/ is re-stamped with a fresh `created_at` by both implementations; those stamps are compared by format only.",
  "Paths returned by calls (skill `dir`, offload paths) are compared relative to each workspace root, since the two roots are different temp folders.",
  "Error results are compared as 'failed' vs 'succeeded'; the wording of messages is ours (they name the field and say what to do).",
  "Ids: the scenario passes fixed workspace, message, block and tool-call ids to both sides, so no random id reaches the trees.",
];
