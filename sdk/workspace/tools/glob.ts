import { posix } from "node:path";
import { z } from "zod";
import { PathEscapeError } from "../../errors.js";
import { toWorkspacePath } from "../../paths.js";
import { walkDirectoryTree } from "../../util/listing.js";
import { treePath, type Sandbox, type WalkTreeResult } from "../../sandbox.js";
import { absPath, capOutput, defineTool, paginate, resolvePath, type ToolContext, type WorkspaceTool } from "./common.js";
import { compileSegment, type SegmentMatcher } from "./glob-match.js";
import { MAX_WALK_ENTRIES, WALK_CONCURRENCY, hasMagic, isDirectory, join, limiter, listDir } from "./walk.js";

export const GlobInputSchema = z.object({
  pattern: z.string().min(1, "pattern must not be empty").describe("Glob pattern, e.g. '**/*.ts' or 'src/*.json' (supports *, ?, [..] and **)."),
  path: z.string().optional().describe("Directory to search in (default: the workspace root)."),
  head_limit: z.number().int().min(0).default(250).describe("Return at most this many paths (default 250; 0 = no limit)."),
  offset: z.number().int().min(0).default(0).describe("Skip this many paths first (for paging)."),
});

/** Glob: matching files under a base directory, newest first. Never leaves the workspace. */
export function globTool(ctx: ToolContext): WorkspaceTool {
  return defineTool(ctx, {
    name: "Glob",
    description: "Finds files by glob pattern (*, ?, **) under a directory of the workspace (default: its root), newest first.",
    inputSchema: GlobInputSchema,
    run: async ({ pattern, path, head_limit, offset }) => {
      const base = resolvePath(ctx.sandbox, path ?? "", "path");
      let relPattern = pattern;
      let baseRel = base.rel;
      if (pattern.startsWith("/")) {
        // An absolute pattern must itself lie in the workspace; it then replaces the base.
        relPattern = toWorkspacePath(ctx.sandbox.workdir, pattern, "pattern");
        baseRel = "";
      } else if (pattern.split("/").includes("..")) {
        throw new PathEscapeError(`path '${pattern}' (pattern) must not contain '..'`, { field: "pattern" });
      }
      if (!(await isDirectory(ctx.sandbox, baseRel))) return { ok: false, output: `Directory not found: ${absPath(ctx.sandbox, baseRel)}` };
      const { matches, truncated } = await globFiles(ctx.sandbox, baseRel, relPattern);
      const note = truncated
        ? `\n\n[Search stopped early (over ${MAX_WALK_ENTRIES} entries or ${GLOB_TIMEOUT_MS / 1000} s): results are incomplete; narrow the path or pattern]`
        : "";
      if (matches.length === 0)
        return { ok: true, output: `No files found matching pattern: ${pattern}${note}`, metadata: { count: 0, truncated, walkTruncated: truncated } };
      // Only the page is ordered (a 200,000-match sort would hold the event loop): the rest stays out of it.
      const shown = head_limit > 0 ? await newestFirst(matches, offset + head_limit) : matches.sort(byNewest);
      const page = paginate(
        shown.map((m) => absPath(ctx.sandbox, m.path)),
        head_limit,
        offset,
      );
      const more = head_limit > 0 && matches.length - offset > head_limit;
      const text =
        more && !page.truncated
          ? `${page.text}\n\n[Showing results with pagination = limit: ${head_limit}${offset > 0 ? `, offset: ${offset}` : ""}]`
          : page.text;
      const capped = capOutput(text + note);
      return { ok: true, output: capped.text, metadata: { count: matches.length, truncated: more || capped.truncated || truncated, walkTruncated: truncated } };
    },
  });
}

export interface GlobMatch {
  path: string;
  mtimeMs: number;
}

/** Glob stops after this long and answers with what it found, marked truncated. */
export const GLOB_TIMEOUT_MS = 30_000;

export interface GlobResult {
  matches: GlobMatch[];
  /** Stopped at MAX_WALK_ENTRIES entries or at the deadline: more files may match. */
  truncated: boolean;
  /** Segment matcher calls made: at most (entries visited) x (pattern segments), whatever the tree's depth. */
  steps: number;
}

/**
 * Regular files under `base` matching `pattern` (relative to base), as the reference's helper:
 * wildcards match hidden names too, `**` spans directories. Symlinks are neither matched nor
 * entered (no loops, no way out of the workspace).
 *
 * Linear in the entries visited: segments before the first `**` list one folder each (their depth is
 * the pattern's); from the first `**` on, the subtree comes from one walkTree call (a descriptor per
 * level, not a path resolved per folder) and is matched as an automaton, each entry's states derived
 * from its folder's, so a 2,000-deep chain costs what 2,000 entries in one folder cost. Bounded by
 * MAX_WALK_ENTRIES and `timeoutMs` (then truncated).
 */
export async function globFiles(sandbox: Sandbox, base: string, pattern: string, options: { timeoutMs?: number } = {}): Promise<GlobResult> {
  const segments = posix
    .normalize(pattern)
    .split("/")
    .filter((s) => s !== "" && s !== ".");
  // Compiled up front: a bad pattern fails before any listing, wherever its bad segment is.
  const matchers = segments.map((s): SegmentMatcher | null => (s !== "**" && hasMagic(s) ? compileSegment(s) : null));
  const deadline = Date.now() + (options.timeoutMs ?? GLOB_TIMEOUT_MS);
  const found = new Map<string, GlobMatch>();
  let visited = 0;
  let steps = 0;
  let truncated = false;
  const limit = limiter(WALK_CONCURRENCY);
  const list = (dir: string) => limit(() => listDir(sandbox, dir));
  const matchAt = (i: number, name: string): boolean => {
    steps++;
    const m = matchers[i];
    return m ? m(name) : name === segments[i];
  };
  const firstStar = segments.indexOf("**");
  /** Trees already walked from a `**`: two prefixes reaching one folder walk it once. */
  const walkedTrees = new Set<string>();

  /** Segments i.. from folder `dir`, where segments before i held no `**`. */
  const walk = async (dir: string, i: number): Promise<void> => {
    if (truncated || i >= segments.length) return;
    if (Date.now() > deadline) return void (truncated = true);
    if (i === firstStar) return matchTree(dir, i);
    let entries = await list(dir);
    if (!entries) return;
    // Over the walk's budget: what fits is still matched, and the answer says it is partial.
    const room = MAX_WALK_ENTRIES - visited;
    if (entries.length > room) {
      truncated = true;
      entries = entries.slice(0, Math.max(0, room));
    }
    visited += entries.length;
    const last = i === segments.length - 1;
    const next: Array<Promise<void>> = [];
    for (let x = 0; x < entries.length; x++) {
      // A huge folder is matched in slices: the event loop runs in between.
      if (x % YIELD_EVERY === YIELD_EVERY - 1) await new Promise((resolve) => setImmediate(resolve));
      const e = entries[x]!;
      if (!matchAt(i, e.name)) continue;
      const p = join(dir, e.name);
      if (last) {
        if (e.type === "file") found.set(p, { path: p, mtimeMs: e.mtimeMs });
      } else if (e.type === "dir") next.push(walk(p, i + 1));
    }
    await Promise.all(next);
  };

  /** Segments i.. (segments[i] is `**`) over the whole tree below `dir`, fetched in one walk. */
  const matchTree = async (dir: string, i: number): Promise<void> => {
    if (walkedTrees.has(dir)) return;
    walkedTrees.add(dir);
    const budget = MAX_WALK_ENTRIES - visited;
    if (budget <= 0) return void (truncated = true);
    let tree: WalkTreeResult;
    try {
      tree = await limit(() => walkDirectoryTree(sandbox, dir, { maxEntries: budget, timeoutMs: Math.max(1, deadline - Date.now()) }));
    } catch {
      return;
    }
    visited += tree.entries.length;
    if (tree.truncated) truncated = true;
    const n = segments.length;
    // closure: a `**` may match no folder, so its position also stands for the next one.
    const close = (states: number[]): number[] => {
      const out: number[] = [];
      for (const j of states)
        for (let k = j; k < n && !out.includes(k); k++) {
          out.push(k);
          if (segments[k] !== "**") break;
        }
      return out;
    };
    // States of each folder entry: the pattern positions still to match below it.
    const states: Array<number[] | undefined> = new Array(tree.entries.length);
    const rootStates = close([i]);
    for (let x = 0; x < tree.entries.length; x++) {
      // Long trees are matched in slices: the event loop runs in between.
      if (x % YIELD_EVERY === YIELD_EVERY - 1) await new Promise((resolve) => setImmediate(resolve));
      const e = tree.entries[x]!;
      const from = e.parent < 0 ? rootStates : states[e.parent];
      if (!from || from.length === 0) continue;
      const isDir = e.type === "dir";
      const isFile = e.type === "file";
      if (!isDir && !isFile) continue;
      let matched = false;
      const into: number[] = [];
      for (const j of from) {
        if (segments[j] === "**") {
          steps++;
          // `**` takes this folder and stays; as the last segment it takes every file below too.
          if (isDir) into.push(j);
          else if (j === n - 1) matched = true;
        } else if (matchAt(j, e.name)) {
          if (j === n - 1) matched ||= isFile;
          else if (isDir) into.push(j + 1);
        }
      }
      if (isDir && into.length > 0) states[x] = close(into);
      if (matched) {
        const p = join(dir, treePath(tree.entries, x));
        found.set(p, { path: p, mtimeMs: e.mtimeMs });
      }
    }
  };

  if (segments.length > 0) await walk(base, 0);
  return { matches: [...found.values()], truncated, steps };
}

/** Tree entries matched between two turns of the event loop. */
const YIELD_EVERY = 4096;

function byNewest(x: GlobMatch, y: GlobMatch): number {
  return y.mtimeMs - x.mtimeMs || (x.path < y.path ? -1 : x.path > y.path ? 1 : 0);
}

/** The `n` newest matches in order, kept in a bounded sorted window (yielding between slices), not a sort of all. */
async function newestFirst(matches: GlobMatch[], n: number): Promise<GlobMatch[]> {
  if (matches.length <= n) return matches.sort(byNewest);
  const top: GlobMatch[] = [];
  for (let i = 0; i < matches.length; i++) {
    if (i % YIELD_EVERY === YIELD_EVERY - 1) await new Promise((resolve) => setImmediate(resolve));
    const m = matches[i]!;
    if (top.length === n && byNewest(m, top[n - 1]!) >= 0) continue;
    // Binary search for its place in the window.
    let lo = 0;
    let hi = top.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (byNewest(top[mid]!, m) <= 0) lo = mid + 1;
      else hi = mid;
    }
    top.splice(lo, 0, m);
    if (top.length > n) top.pop();
  }
  return top;
}
