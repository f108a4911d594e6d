import { z } from "zod";

/** Grep's input and the limits both of its engines (ripgrep in the sandbox, the scan fallback) apply. */
export const GREP_TIMEOUT_MS = 30_000;
export const GREP_DEFAULT_HEAD_LIMIT = 250;
export const VCS_DIRS = [".git", ".svn", ".hg", ".bzr", ".jj", ".sl"];
export const MAX_COLUMNS = 500;

const count = z.number().int().min(0);
export const GrepInputSchema = z.object({
  pattern: z.string().min(1, "pattern must not be empty").describe("Regular expression to search for."),
  path: z.string().optional().describe("File or directory to search (default: the workspace root)."),
  output_mode: z
    .enum(["content", "files_with_matches", "count"])
    .default("files_with_matches")
    .describe("content: matching lines; files_with_matches (default): file paths; count: matches per file."),
  glob: z.string().optional().describe("Only search files matching these globs, e.g. '*.ts' or '*.{ts,tsx}' (space/comma separated)."),
  type: z.string().optional().describe("Only search files of this ripgrep type, e.g. 'js', 'py', 'rust'."),
  "-A": count.optional().describe("Lines of context after each match (content mode)."),
  "-B": count.optional().describe("Lines of context before each match (content mode)."),
  "-C": count.optional().describe("Lines of context around each match (content mode)."),
  context: count.optional().describe("Same as -C."),
  n: z.boolean().default(true).describe("Show line numbers (content mode; default true)."),
  i: z.boolean().optional().describe("Case-insensitive search."),
  case_insensitive: z.boolean().optional().describe("Same as -i."),
  multiline: z.boolean().optional().describe("Let patterns span lines ('.' matches newlines)."),
  head_limit: count.default(GREP_DEFAULT_HEAD_LIMIT).describe(`Return at most this many lines/entries (default ${GREP_DEFAULT_HEAD_LIMIT}; 0 = no limit).`),
  offset: count.default(0).describe("Skip this many lines/entries first (for paging)."),
});
export type GrepInput = z.output<typeof GrepInputSchema>;

/** Whitespace-separated; commas also separate unless the piece has a {…} alternation. */
export function splitGlobs(glob: string | undefined): string[] {
  if (!glob) return [];
  const out: string[] = [];
  for (const piece of glob.split(/\s+/).filter(Boolean)) {
    if (piece.includes("{") && piece.includes("}")) out.push(piece);
    else out.push(...piece.split(",").filter(Boolean));
  }
  return out;
}
