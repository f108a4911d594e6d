// PDF text for the Read tool, as the reference gives it: one `--- Page i/N ---` block per page.
// pdfjs is large and slow to load (about 0.4 s), so it is imported on the first PDF only.

/** A PDF longer than this must be read with `pages`. */
export const PDF_PAGES_WITHOUT_RANGE = 10;
/** At most this many pages per Read call. */
export const PDF_MAX_PAGES_PER_CALL = 20;
/** Bigger files are refused before parsing. */
export const PDF_MAX_BYTES = 32 * 1024 * 1024;

export type PdfText = { ok: true; text: string; totalPages: number; first: number; last: number } | { ok: false; error: string };

/**
 * The page range a `pages` value asks for ("3" or "1-5"), checked against the document; a
 * string is the problem, worded for the model.
 */
export function pageRange(pages: string | undefined, totalPages: number): { first: number; last: number } | string {
  if (pages === undefined) {
    if (totalPages > PDF_PAGES_WITHOUT_RANGE)
      return `the PDF has ${totalPages} pages; pass pages (e.g. "1-5") to read at most ${PDF_MAX_PAGES_PER_CALL} of them per call`;
    return { first: 1, last: totalPages };
  }
  const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(pages);
  const first = m ? Number(m[1]) : NaN;
  const last = m ? Number(m[2] ?? m[1]) : NaN;
  if (!m || first < 1 || last < first || last > totalPages) return `invalid pages "${pages}": give a page ("3") or a range ("1-5") within 1-${totalPages}`;
  if (last - first + 1 > PDF_MAX_PAGES_PER_CALL) return `pages "${pages}" asks for ${last - first + 1} pages; at most ${PDF_MAX_PAGES_PER_CALL} per call`;
  return { first, last };
}

/** Extracts the text of the asked pages. Malformed or encrypted files give an error, never a throw. */
export async function pdfText(data: Uint8Array, pages: string | undefined): Promise<PdfText> {
  const pdfjs = await import("pdfjs-dist/legacy/build/pdf.mjs");
  // No eval, no font loading, no console noise: text extraction of an untrusted file needs none.
  const task = pdfjs.getDocument({ data: new Uint8Array(data), isEvalSupported: false, disableFontFace: true, useSystemFonts: false, verbosity: 0 });
  let doc: Awaited<typeof task.promise>;
  try {
    doc = await task.promise;
  } catch (e) {
    await task.destroy().catch(() => undefined);
    const name = (e as { name?: string })?.name;
    if (name === "PasswordException") return { ok: false, error: "the PDF is password-protected" };
    return { ok: false, error: `not a readable PDF (${(e as Error)?.message ?? String(e)})` };
  }
  try {
    const range = pageRange(pages, doc.numPages);
    if (typeof range === "string") return { ok: false, error: range };
    const blocks: string[] = [];
    for (let i = range.first; i <= range.last; i++) {
      const page = await doc.getPage(i);
      const content = await page.getTextContent();
      let text = "";
      for (const item of content.items) {
        if (!("str" in item)) continue;
        text += item.str;
        if (item.hasEOL) text += "\n";
      }
      page.cleanup();
      blocks.push(`--- Page ${i}/${doc.numPages} ---\n${text.trimEnd()}`);
    }
    return { ok: true, text: blocks.join("\n\n"), totalPages: doc.numPages, first: range.first, last: range.last };
  } catch (e) {
    return { ok: false, error: `not a readable PDF (${(e as Error)?.message ?? String(e)})` };
  } finally {
    await doc.destroy();
  }
}
