import { posix } from "node:path";
import { walkDirectoryTree } from "../../util/listing.js";
import { treePath, type Sandbox } from "../../sandbox.js";
import { absPath } from "./common.js";
import { GREP_TIMEOUT_MS, MAX_COLUMNS, VCS_DIRS, splitGlobs, type GrepInput } from "./grep-input.js";
import { compilePathGlob, expandBraces, type PathMatcher } from "./glob-match.js";
import { MAX_WALK_ENTRIES, WALK_CONCURRENCY, join, limiter } from "./walk.js";
import { readCapped } from "../capped-read.js";

/** Files bigger than this are skipped by the scan (ripgrep would stream them). */
const MAX_SCAN_FILE_BYTES = 16 * 1024 * 1024;

/** A few ripgrep file types; anything else is reported as unknown, as rg does. */
const TYPES: Record<string, string[]> = {
  js: ["js", "jsx", "mjs", "cjs", "vue"],
  ts: ["ts", "tsx", "mts", "cts"],
  py: ["py", "pyi"],
  rust: ["rs"],
  go: ["go"],
  java: ["java"],
  c: ["c", "h"],
  cpp: ["cpp", "cc", "cxx", "hpp", "hh", "hxx", "h", "inl"],
  md: ["md", "markdown", "mdx", "mkd"],
  markdown: ["md", "markdown", "mdx", "mkd"],
  json: ["json"],
  yaml: ["yaml", "yml"],
  toml: ["toml"],
  sh: ["sh", "bash", "zsh", "ksh"],
  html: ["html", "htm"],
  css: ["css", "scss", "sass", "less"],
  txt: ["txt"],
  sql: ["sql"],
  xml: ["xml"],
  ruby: ["rb"],
  php: ["php"],
};

/**
 * A ripgrep emulation over the Sandbox file API for sandboxes without `rg`: same output shapes
 * (`path:line:text`, `path-line-context`, `--` between groups, `path:count`), hidden files searched,
 * VCS directories and binary files skipped, symlinks not followed below the search root.
 */
export async function scanGrep(sandbox: Sandbox, input: GrepInput, target: string, isDir: boolean): Promise<{ lines: string[] } | { error: string }> {
  const flags = `g${input.i || input.case_insensitive ? "i" : ""}m${input.multiline ? "s" : ""}`;
  let re: RegExp;
  try {
    re = new RegExp(input.pattern, flags);
  } catch (e) {
    return { error: `ripgrep error (code 2): regex parse error: ${(e as Error).message}` };
  }
  let types: string[] | undefined;
  if (input.type) {
    types = TYPES[input.type];
    if (!types) return { error: `ripgrep error (code 2): unrecognized file type: ${input.type}` };
  }
  let globs: CompiledGlob[];
  try {
    globs = splitGlobs(input.glob).map(compileGlob);
  } catch (e) {
    return { error: `ripgrep error (code 2): ${(e as Error).message}` };
  }
  const deadline = Date.now() + GREP_TIMEOUT_MS;
  const files = isDir ? await listFiles(sandbox, target, deadline) : [target];
  const limit = limiter(WALK_CONCURRENCY);
  const selected = files.filter((file) => !isDir || passesFilters(target === "" ? file : file.slice(target.length + 1), types, globs));
  // Read in parallel (bounded), collect in path order.
  const results = await Promise.all(
    selected.map((file) =>
      limit(async () => {
        // Past the deadline the remaining files are skipped: the search answers with what it has.
        if (Date.now() > deadline) return [];
        let data: Buffer;
        try {
          data = await readCapped(sandbox, file, MAX_SCAN_FILE_BYTES);
        } catch {
          return [];
        }
        if (data.subarray(0, 8192).includes(0)) return [];
        const shown = absPath(sandbox, file);
        return searchText(data.toString("utf8"), re, input, shown, isDir ? shown : undefined);
      }),
    ),
  );
  const out: string[] = [];
  for (const found of results) {
    // With context, rg also separates consecutive files' groups with "--".
    if (found.length && out.length && input.output_mode === "content" && hasContext(input)) out.push("--");
    out.push(...found);
  }
  return { lines: input.output_mode === "content" ? out : out.sort() };
}

function hasContext(input: GrepInput): boolean {
  return (input.context ?? input["-C"] ?? input["-B"] ?? 0) > 0 || (input.context ?? input["-C"] ?? input["-A"] ?? 0) > 0;
}

/** `prefix` is the path printed before each line (omitted when a single file is searched, as rg does). */
function searchText(text: string, re: RegExp, input: GrepInput, shown: string, prefix: string | undefined): string[] {
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  // Matching line numbers (0-based) and match counts per line.
  const hits = new Map<number, number>();
  if (input.multiline) {
    const starts: number[] = [];
    let pos = 0;
    for (const l of lines) {
      starts.push(pos);
      pos += l.length + 1;
    }
    const lineOf = (offset: number) => {
      let lo = 0;
      let hi = starts.length - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (starts[mid]! <= offset) lo = mid;
        else hi = mid - 1;
      }
      return lo;
    };
    re.lastIndex = 0;
    for (const m of text.matchAll(re)) {
      const first = lineOf(m.index);
      const last = lineOf(m.index + Math.max(0, m[0].length - 1));
      for (let l = first; l <= last && l < lines.length; l++) hits.set(l, (hits.get(l) ?? 0) + (l === first ? 1 : 0));
    }
  } else {
    lines.forEach((line, i) => {
      const n = [...line.matchAll(re)].length;
      if (n > 0) hits.set(i, n);
    });
  }
  if (hits.size === 0) return [];
  if (input.output_mode === "files_with_matches") return [shown];
  if (input.output_mode === "count") return [prefix ? `${prefix}:${hits.size}` : String(hits.size)];

  const before = input.context ?? input["-C"] ?? input["-B"] ?? 0;
  const after = input.context ?? input["-C"] ?? input["-A"] ?? 0;
  const visible = new Set<number>();
  for (const l of hits.keys()) for (let k = Math.max(0, l - before); k <= Math.min(lines.length - 1, l + after); k++) visible.add(k);
  const order = [...visible].sort((a, b) => a - b);
  const out: string[] = [];
  let previous = -2;
  for (const l of order) {
    // rg separates non-adjacent groups with "--" only when context lines were asked for.
    if ((before > 0 || after > 0) && previous >= 0 && l > previous + 1) out.push("--");
    previous = l;
    const isMatch = hits.has(l);
    const sep = isMatch ? ":" : "-";
    let body = lines[l]!.replace(/\r$/, "");
    if (body.length > MAX_COLUMNS) body = isMatch ? `[Omitted long line with ${hits.get(l)} matches]` : "[Omitted long context line]";
    out.push(`${prefix ? `${prefix}${sep}` : ""}${input.n ? `${l + 1}${sep}` : ""}${body}`);
  }
  return out;
}

/**
 * Regular files below `root` (VCS folders not entered), from one tree walk: a descriptor per level, so
 * a deep chain costs what its entries cost; bounded by MAX_WALK_ENTRIES and the deadline. Only entries
 * the walk saw as regular files are read, and each read refuses anything else without blocking.
 */
async function listFiles(sandbox: Sandbox, root: string, deadline: number): Promise<string[]> {
  let tree;
  try {
    tree = await walkDirectoryTree(sandbox, root, { maxEntries: MAX_WALK_ENTRIES, timeoutMs: Math.max(1, deadline - Date.now()), skipDirs: VCS_DIRS });
  } catch {
    return [];
  }
  const files: string[] = [];
  for (let i = 0; i < tree.entries.length; i++) if (tree.entries[i]!.type === "file") files.push(join(root, treePath(tree.entries, i)));
  // Report files in path order.
  return files.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

interface CompiledGlob {
  negate: boolean;
  /** Any of the brace alternatives. */
  alternatives: PathMatcher[];
  /** No '/' in the glob: it matches the base name at any depth (gitignore style). */
  basename: boolean;
}

function compileGlob(glob: string): CompiledGlob {
  const negate = glob.startsWith("!");
  const body = negate ? glob.slice(1) : glob;
  const basename = !body.includes("/");
  const alternatives = expandBraces(body.replace(/^\//, ""), "glob").map((alt) => compilePathGlob(alt, "glob"));
  return { negate, basename, alternatives };
}

function passesFilters(rel: string, types: string[] | undefined, globs: CompiledGlob[]): boolean {
  const name = posix.basename(rel);
  if (types && !types.includes(posix.extname(name).slice(1).toLowerCase())) return false;
  // As in ripgrep: the last matching glob decides; with any positive glob, a file must match one.
  let decision: boolean | undefined;
  for (const g of globs) {
    const subject = g.basename ? name : rel;
    if (g.alternatives.some((m) => m(subject))) decision = !g.negate;
  }
  if (decision !== undefined) return decision;
  return !globs.some((g) => !g.negate);
}
