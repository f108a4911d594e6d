import { posix } from "node:path";
import { z } from "zod";
import { PathEscapeError } from "../../errors.js";
import { toWorkspacePath } from "../../paths.js";
import type { Sandbox } from "../../sandbox.js";
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
        throw new PathEscapeError(pattern, "(pattern) must not contain '..'");
      }
      if (!(await isDirectory(ctx.sandbox, baseRel))) return { ok: false, output: `Directory not found: ${absPath(ctx.sandbox, baseRel)}` };
      const { matches, truncated } = await globFiles(ctx.sandbox, baseRel, relPattern);
      if (matches.length === 0) return { ok: true, output: `No files found matching pattern: ${pattern}`, metadata: { count: 0 } };
      matches.sort((x, y) => y.mtimeMs - x.mtimeMs || (x.path < y.path ? -1 : x.path > y.path ? 1 : 0));
      const page = paginate(matches.map((m) => absPath(ctx.sandbox, m.path)), head_limit, offset);
      const capped = capOutput(page.text);
      return { ok: true, output: capped.text, metadata: { count: matches.length, truncated: page.truncated || capped.truncated || truncated } };
    },
  });
}

export interface GlobMatch {
  path: string;
  mtimeMs: number;
}

/**
 * Regular files under `base` matching `pattern` (relative to base), as the reference's helper:
 * wildcards match hidden names too, `**` spans directories. Symlinks are neither matched nor
 * entered (no loops, no way out of the workspace).
 */
export async function globFiles(sandbox: Sandbox, base: string, pattern: string): Promise<{ matches: GlobMatch[]; truncated: boolean }> {
  const segments = posix.normalize(pattern).split("/").filter((s) => s !== "" && s !== ".");
  // Compiled up front: a bad pattern fails before any listing, wherever its bad segment is.
  const matchers = segments.map((s): SegmentMatcher | null => (s !== "**" && hasMagic(s) ? compileSegment(s) : null));
  const found = new Map<string, GlobMatch>();
  const seen = new Set<string>();
  let visited = 0;
  let truncated = false;
  const limit = limiter(WALK_CONCURRENCY);
  const list = (dir: string) => limit(() => listDir(sandbox, dir));

  const walk = async (dir: string, i: number): Promise<void> => {
    const key = `${dir}\0${i}`;
    if (seen.has(key) || truncated) return;
    seen.add(key);
    const segment = segments[i];
    if (segment === undefined) return;
    const last = i === segments.length - 1;
    if (segment === "**") {
      // `**` = zero or more directories; as the last segment, every file below.
      const entries = await list(dir);
      if (!entries) return;
      visited += entries.length;
      if (visited > MAX_WALK_ENTRIES) return void (truncated = true);
      if (last) {
        for (const e of entries) if (e.type === "file") found.set(join(dir, e.name), { path: join(dir, e.name), mtimeMs: e.mtimeMs });
      }
      // Directories are listed in parallel (bounded): remote sandboxes pay a round trip per list.
      await Promise.all([...(last ? [] : [walk(dir, i + 1)]), ...entries.filter((e) => e.type === "dir").map((e) => walk(join(dir, e.name), i))]);
      return;
    }
    const entries = await list(dir);
    if (!entries) return;
    visited += entries.length;
    if (visited > MAX_WALK_ENTRIES) return void (truncated = true);
    const matcher = matchers[i];
    const next: Array<Promise<void>> = [];
    for (const e of entries) {
      const matches = matcher ? matcher(e.name) : e.name === segment;
      if (!matches) continue;
      const p = join(dir, e.name);
      if (last) {
        if (e.type === "file") found.set(p, { path: p, mtimeMs: e.mtimeMs });
      } else if (e.type === "dir") next.push(walk(p, i + 1));
    }
    await Promise.all(next);
  };

  if (segments.length > 0) await walk(base, 0);
  return { matches: [...found.values()], truncated };
}
