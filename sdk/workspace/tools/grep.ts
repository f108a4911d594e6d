import { isWorkspaceError } from "../../errors.js";
import type { Sandbox } from "../../sandbox.js";
import { capOutput, defineTool, paginate, resolvePath, type ToolContext, type ToolResult, type WorkspaceTool } from "./common.js";
import { scanGrep } from "./grep-scan.js";
import { GREP_TIMEOUT_MS, GrepInputSchema, MAX_COLUMNS, VCS_DIRS, splitGlobs, type GrepInput } from "./grep-input.js";

export { GREP_DEFAULT_HEAD_LIMIT, GREP_TIMEOUT_MS, GrepInputSchema, MAX_COLUMNS, VCS_DIRS, splitGlobs, type GrepInput } from "./grep-input.js";
import { isDirectory } from "./walk.js";

export type GrepEngine = "auto" | "rg" | "scan";

const rgAvailable = new WeakMap<Sandbox, Promise<boolean>>();

/** Whether `rg` runs in the sandbox (probed once per sandbox). */
export function hasRipgrep(sandbox: Sandbox): Promise<boolean> {
  let probe = rgAvailable.get(sandbox);
  if (!probe) {
    probe = sandbox.exec(["rg", "--version"], { timeoutMs: 10_000 }).then(
      (r) => r.exitCode === 0,
      () => false,
    );
    rgAvailable.set(sandbox, probe);
  }
  return probe;
}

/**
 * Grep: ripgrep inside the sandbox when it has one and runs confined there, else an equivalent scan
 * over the Sandbox file API.
 */
export function grepTool(ctx: ToolContext, engine: GrepEngine = "auto"): WorkspaceTool {
  return defineTool(ctx, {
    name: "Grep",
    description:
      "Searches file contents with a regular expression (ripgrep syntax) under a path of the workspace (default: its root). " +
      "output_mode selects matching lines, file paths (default) or counts; head_limit/offset page through results.",
    inputSchema: GrepInputSchema,
    run: async (input) => {
      const target = resolvePath(ctx.sandbox, input.path ?? "", "path");
      const st = target.rel === "" ? null : await ctx.sandbox.stat(target.rel);
      if (target.rel !== "" && !st) return { ok: false, output: `Path does not exist: ${target.abs}` };
      // Also the confinement check for a symlinked target (rg would follow it): throws path_escape.
      const isDir = await isDirectory(ctx.sandbox, target.rel);
      // A FIFO (or device) named as the target would hold rg in open() until its timeout: the sandbox's own
      // non-blocking open decides what it is first (a 0-byte cap reads nothing from a regular file).
      if (!isDir && (await isSpecialFile(ctx.sandbox, target.rel)))
        return { ok: false, output: `Not a regular file (a FIFO, socket or device): ${target.abs}` };
      // rg walks by name: only where it runs confined to the sandbox's own view can a swap not lead it out.
      const useRg = engine === "rg" || (engine === "auto" && !ctx.sandbox.unconfinedProcesses && (await hasRipgrep(ctx.sandbox)));
      let lines: string[];
      if (useRg) {
        const r = await runRipgrep(ctx.sandbox, input, target.abs);
        if ("error" in r) return { ok: false, output: r.error };
        lines = r.lines;
      } else {
        const r = await scanGrep(ctx.sandbox, input, target.rel, isDir);
        if ("error" in r) return { ok: false, output: r.error };
        lines = r.lines;
      }
      return pageResult(lines, input, useRg ? "rg" : "scan");
    },
  });
}

/** Whether `rel` is something other than a regular file or folder, found without blocking on it. */
async function isSpecialFile(sandbox: Sandbox, rel: string): Promise<boolean> {
  try {
    await sandbox.readFile(rel, { maxBytes: 0 });
    return false;
  } catch (e) {
    // too_large: a regular file with content; not_found and the rest: rg reports them as it always did.
    return isWorkspaceError(e, "invalid_argument");
  }
}

/** The reference's argv, verbatim. */
export function ripgrepArgv(input: GrepInput, searchPath: string): string[] {
  const argv = ["rg", "--hidden"];
  for (const d of VCS_DIRS) argv.push("--glob", `!${d}`);
  argv.push("--max-columns", String(MAX_COLUMNS));
  if (input.multiline) argv.push("-U", "--multiline-dotall");
  if (input.i || input.case_insensitive) argv.push("-i");
  if (input.output_mode === "files_with_matches") argv.push("-l");
  else if (input.output_mode === "count") argv.push("-c");
  if (input.output_mode === "content") {
    if (input.n) argv.push("-n");
    if (input.context !== undefined) argv.push("-C", String(input.context));
    else if (input["-C"] !== undefined) argv.push("-C", String(input["-C"]));
    else {
      if (input["-B"] !== undefined) argv.push("-B", String(input["-B"]));
      if (input["-A"] !== undefined) argv.push("-A", String(input["-A"]));
    }
  }
  if (input.pattern.startsWith("-")) argv.push("-e");
  argv.push(input.pattern);
  if (input.type) argv.push("--type", input.type);
  for (const g of splitGlobs(input.glob)) argv.push("--glob", g);
  argv.push(searchPath);
  return argv;
}

async function runRipgrep(sandbox: Sandbox, input: GrepInput, searchPath: string): Promise<{ lines: string[] } | { error: string }> {
  const r = await sandbox.exec(ripgrepArgv(input, searchPath), { cwd: "", timeoutMs: GREP_TIMEOUT_MS, maxOutputBytes: 16 * 1024 * 1024 });
  if (r.timedOut) return { error: `Ripgrep search timed out after ${GREP_TIMEOUT_MS / 1000} seconds. Try a more specific path or pattern.` };
  if (r.exitCode !== 0 && r.exitCode !== 1) return { error: `ripgrep error (code ${r.exitCode}): ${r.stderr.toString("utf8").trim()}` };
  return { lines: splitOutput(r.stdout.toString("utf8"), input.output_mode) };
}

function splitOutput(stdout: string, mode: GrepInput["output_mode"]): string[] {
  const lines = stdout.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  // rg searches in parallel, so file order varies run to run; path and count listings are sorted.
  return mode === "content" ? lines : lines.sort();
}

function pageResult(lines: string[], input: GrepInput, engine: string): ToolResult {
  if (lines.length === 0) return { ok: true, output: `No matches found for pattern: ${input.pattern}`, metadata: { total: 0, engine } };
  const page = paginate(lines, input.head_limit, input.offset);
  const capped = capOutput(page.text);
  return { ok: true, output: capped.text, metadata: { total: lines.length, engine, truncated: page.truncated || capped.truncated } };
}
