import { z } from "zod";
import { MAX_TEXT_BYTES, defineTool, resolvePath, type ToolContext, type WorkspaceTool } from "./common.js";
import { unifiedDiff } from "./diff.js";
import { failure } from "./read.js";

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
      if (!st) return { ok: false, output: `File does not exist: ${abs}` };
      if (st.type === "dir") return { ok: false, output: `${abs} is a directory, not a file` };
      if (old_string === new_string) return { ok: false, output: "old_string and new_string are identical; there is nothing to change" };
      let before: string;
      try {
        before = (await ctx.sandbox.readFile(rel, { maxBytes: MAX_TEXT_BYTES })).toString("utf8");
      } catch (e) {
        return failure(e, abs);
      }
      const parts = before.split(old_string);
      const occurrences = parts.length - 1;
      if (occurrences === 0) return { ok: false, output: `old_string was not found in ${abs}; Read the file and copy the text exactly` };
      if (occurrences > 1 && !replace_all)
        return {
          ok: false,
          output: `old_string occurs ${occurrences} times in ${abs}; add surrounding lines to make it unique, or set replace_all to true`,
        };
      // split/join and indexOf: no `$&` replacement-pattern surprises.
      const at = before.indexOf(old_string);
      const after = replace_all ? parts.join(new_string) : before.slice(0, at) + new_string + before.slice(at + old_string.length);
      await ctx.sandbox.writeFile(rel, after);
      const output =
        occurrences === 1 ? `Successfully replaced 1 occurrence in ${abs}` : `Successfully replaced all ${occurrences} occurrences in ${abs}`;
      return { ok: true, output, metadata: { diff: unifiedDiff(before, after, abs, abs), file_path: abs, occurrences } };
    },
  });
}
