import { posix } from "node:path";
import { z } from "zod";
import { isWorkspaceError } from "../../errors.js";
import { MAX_TEXT_BYTES, defineTool, normalizeNewlines, resolvePath, type ToolContext, type ToolResult, type WorkspaceTool } from "./common.js";
import { PDF_MAX_BYTES, PDF_MAX_PAGES_PER_CALL, PDF_PAGES_WITHOUT_RANGE, pdfText } from "./pdf.js";
import { readCapped } from "../capped-read.js";

export const READ_MAX_LINES = 2000;
export const READ_MAX_LINE_CHARS = 2000;
const MAX_IMAGE_BYTES = 10 * 1024 * 1024;

const IMAGE_TYPES: Record<string, string> = {
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".bmp": "image/bmp",
  ".tiff": "image/tiff",
  ".tif": "image/tiff",
  ".ico": "image/x-icon",
};

export const ReadInputSchema = z.object({
  file_path: z.string().min(1, "file_path must not be empty").describe("Absolute path of the file (under the workspace), or a workspace-relative path."),
  offset: z.number().int().min(1).default(1).describe("First line to read, 1-based (default 1)."),
  limit: z.number().int().min(1).max(READ_MAX_LINES).default(READ_MAX_LINES).describe(`How many lines to read (default and max ${READ_MAX_LINES}).`),
  pages: z
    .string()
    .optional()
    .describe(`PDF files only: a page ("3") or a range ("1-5"); required above ${PDF_PAGES_WITHOUT_RANGE} pages, at most ${PDF_MAX_PAGES_PER_CALL} per call.`),
});

/** Read: numbered lines (`%6d\t`), long lines cut; images come back as base64 in metadata, PDFs as text per page. */
export function readTool(ctx: ToolContext): WorkspaceTool {
  return defineTool(ctx, {
    name: "Read",
    description:
      `Reads a file from the workspace. Returns up to ${READ_MAX_LINES} lines starting at offset, each prefixed with its line number; ` +
      `lines longer than ${READ_MAX_LINE_CHARS} characters are cut. Image files are returned as base64 data; ` +
      `PDF files as text per page (use pages for long documents).`,
    inputSchema: ReadInputSchema,
    run: async ({ file_path, offset, limit, pages }) => {
      const { rel, abs } = resolvePath(ctx.sandbox, file_path, "file_path");
      const st = await ctx.sandbox.stat(rel);
      if (!st) return { ok: false, output: `Error: File does not exist: ${abs}` };
      if (st.type === "dir") return { ok: false, output: `Error: Path is a directory, not a file: ${abs}` };
      const ext = posix.extname(rel).toLowerCase();
      const isPdf = ext === ".pdf";
      const image = IMAGE_TYPES[ext];
      let data: Buffer;
      try {
        data = await readCapped(ctx.sandbox, rel, isPdf ? PDF_MAX_BYTES : image ? MAX_IMAGE_BYTES : MAX_TEXT_BYTES);
      } catch (e) {
        return failure(e, abs);
      }
      if (isPdf) {
        const pdf = await pdfText(data, pages);
        if (!pdf.ok) return { ok: false, output: `Error: ${abs}: ${pdf.error}` };
        return { ok: true, output: pdf.text, metadata: { file_path: abs, totalPages: pdf.totalPages, firstPage: pdf.first, lastPage: pdf.last } };
      }
      if (image)
        return {
          ok: true,
          output: `[${image} image, ${data.length} bytes: ${abs}]`,
          metadata: { file_path: abs, mediaType: image, data: data.toString("base64") },
        };
      const text = normalizeNewlines(data.toString("utf8"));
      const lines = text === "" ? [] : text.split("\n");
      if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
      const total = lines.length;
      const slice = lines.slice(offset - 1, offset - 1 + limit);
      const output = slice
        .map((line, i) => {
          const cut = line.length > READ_MAX_LINE_CHARS ? `${line.slice(0, READ_MAX_LINE_CHARS)}[truncated]` : line;
          return `${String(offset + i).padStart(6)}\t${cut}`;
        })
        .join("\n");
      return { ok: true, output, metadata: { file_path: abs, totalLines: total, offset, linesRead: slice.length } };
    },
  });
}

/** Missing / directory / too large become results the model can act on; escapes stay errors. */
export function failure(e: unknown, abs: string): ToolResult {
  if (isWorkspaceError(e, "not_found")) return { ok: false, output: `Error: File does not exist: ${abs}` };
  if (isWorkspaceError(e, "invalid_argument")) return { ok: false, output: `Error: ${e.message}` };
  if (isWorkspaceError(e, "too_large"))
    return { ok: false, output: `Error: ${abs} is too large to load (${e.message}); use Bash (head, sed -n) to read parts of it` };
  throw e;
}
