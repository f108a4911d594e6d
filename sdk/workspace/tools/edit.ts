import { z } from "zod";
import { MAX_TEXT_BYTES, defineTool, resolvePath, type ToolContext, type WorkspaceTool } from "./common.js";
import { unifiedDiff } from "./diff.js";
import { failure } from "./read.js";
import { readCapped } from "../capped-read.js";

export const EditInputSchema = z.object({
  file_path: z.string().min(1, "file_path must not be empty").describe("Absolute path of the file (under the workspace), or a workspace-relative path."),
  old_string: z.string().min(1, "old_string must not be empty").describe("The exact text to replace."),
  new_string: z.string().describe("The replacement text."),
  replace_all: z.boolean().default(false).describe("Replace every occurrence (default false: old_string must occur exactly once)."),
});

/** Edit: exact string replacement, unique unless replace_all; the result carries a unified diff. */
export function editTool(ctx: ToolContext): WorkspaceTool {
  return defineTool(ctx, {
    name: "Edit",
    description:
      "Replaces exact text in a workspace file. old_string must occur exactly once unless replace_all is true; " +
      "include surrounding lines to make it unique.",
    inputSchema: EditInputSchema,
    run: async ({ file_path, old_string, new_string, replace_all }) => {
      const { rel, abs } = resolvePath(ctx.sandbox, file_path, "file_path");
      const st = await ctx.sandbox.stat(rel);
      if (!st) return { ok: false, output: `Error: File not found: ${abs}` };
      if (st.type === "dir") return { ok: false, output: `Error: Path is a directory, not a file: ${abs}` };
      if (old_string === new_string) return { ok: false, output: "Error: old_string and new_string are identical. No changes to make." };
      let before: string;
      try {
        before = (await readCapped(ctx.sandbox, rel, MAX_TEXT_BYTES)).toString("utf8");
      } catch (e) {
        return failure(e, abs);
      }
      const parts = before.split(old_string);
      const occurrences = parts.length - 1;
      if (occurrences === 0) return { ok: false, output: `Error: old_string not found in ${abs}` };
      if (occurrences > 1 && !replace_all)
        return {
          ok: false,
          output: `Error: old_string appears ${occurrences} times in ${abs}. Set replace_all=true to replace all occurrences, or make old_string more specific.`,
        };
      // split/join and indexOf: no `$&` replacement-pattern surprises.
      const at = before.indexOf(old_string);
      const after = replace_all ? parts.join(new_string) : before.slice(0, at) + new_string + before.slice(at + old_string.length);
      await ctx.sandbox.writeFile(rel, after);
      const output = replace_all ? `Successfully replaced all ${occurrences} occurrences in ${abs}` : `Successfully replaced 1 occurrence in ${abs}`;
      return { ok: true, output, metadata: { diff: unifiedDiff(before, after, `a/${abs}`, `b/${abs}`), file_path: abs, occurrences } };
    },
  });
}
