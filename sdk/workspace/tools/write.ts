import { z } from "zod";
import { MAX_TEXT_BYTES, defineTool, resolvePath, type ToolContext, type WorkspaceTool } from "./common.js";
import { splitLinesKeepEnds, unifiedDiff } from "./diff.js";
import { failure } from "./read.js";
import { readCapped } from "../capped-read.js";

export const WriteInputSchema = z.object({
  file_path: z.string().min(1, "file_path must not be empty").describe("Absolute path of the file (under the workspace), or a workspace-relative path."),
  content: z.string().describe("The full new content of the file."),
});

/** Write: replaces (or creates, with parents) a file atomically; the result carries a unified diff. */
export function writeTool(ctx: ToolContext): WorkspaceTool {
  return defineTool(ctx, {
    name: "Write",
    description: "Writes a file in the workspace, creating parent directories and replacing any existing content.",
    inputSchema: WriteInputSchema,
    run: async ({ file_path, content }) => {
      const { rel, abs } = resolvePath(ctx.sandbox, file_path, "file_path");
      if (rel === "") return { ok: false, output: `Error: Path is a directory, not a file: ${abs}` };
      const st = await ctx.sandbox.stat(rel);
      if (st?.type === "dir") return { ok: false, output: `Error: Path is a directory, not a file: ${abs}` };
      let before = "";
      if (st) {
        try {
          before = (await readCapped(ctx.sandbox, rel, MAX_TEXT_BYTES)).toString("utf8");
        } catch (e) {
          return failure(e, abs);
        }
      }
      await ctx.sandbox.writeFile(rel, content);
      const lines = splitLinesKeepEnds(content).length;
      return {
        ok: true,
        output: `The file ${abs} has been written successfully (${lines} lines).`,
        metadata: { diff: unifiedDiff(before, content, st ? `a/${abs}` : "/dev/null", `b/${abs}`), file_path: abs, occurrences: 1 },
      };
    },
  });
}
