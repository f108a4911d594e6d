import { createRoute, type OpenAPIHono } from "@hono/zod-openapi";
import { InvalidArgumentError, NotFoundError, TooLargeError } from "../../errors.js";
import { toProblem } from "../../errors-http.js";
import { listDirectoryPage } from "../../util/listing.js";
import { checkRelativePath, toWorkspacePath } from "../../paths.js";
import { DEFAULT_LIST_PAGE, MAX_LIST_PAGE, type Sandbox } from "../../sandbox.js";
import { resolve, sessionOf, workspaceOf, type ServiceContext, type ServiceEnv } from "../context.js";
import { DirectoryListing, DirectoryQuery, DownloadToken, DownloadTokenBody, FileQuery, SessionParams } from "../schemas.js";
import { BEARER_OR_DOWNLOAD_TOKEN, JSON_BODY, WORKSPACE, json, problem, problemResponses } from "./openapi-common.js";

/** Media types served as themselves; anything else is an octet stream (never HTML or script from a workspace). */
const MEDIA: Record<string, string> = {
  txt: "text/plain; charset=utf-8",
  md: "text/markdown; charset=utf-8",
  json: "application/json",
  jsonl: "application/x-ndjson",
  csv: "text/csv; charset=utf-8",
  log: "text/plain; charset=utf-8",
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  pdf: "application/pdf",
  mp3: "audio/mpeg",
  wav: "audio/wav",
  mp4: "video/mp4",
};

/**
 * Directories and files of the session's workspace, confined to it: every path is checked before
 * any I/O and resolved by the sandbox against its root (the reference deliberately browses the
 * whole reachable filesystem, section 11 item 29). Downloads work with the bearer token or with a
 * signed short-lived token bound to user, session and path.
 */
export function fileRoutes(app: OpenAPIHono<ServiceEnv>, svc: ServiceContext): void {
  app.openapi(
    createRoute({
      method: "get",
      path: "/sessions/{sessionId}/workspace/directories",
      operationId: "listDirectory",
      tags: ["workspace"],
      summary: "One page of a directory's entries (in the directory's own order); follow `nextCursor` for the rest",
      request: { params: SessionParams, query: DirectoryQuery },
      responses: { 200: json(DirectoryListing, "Entries"), ...problemResponses(...WORKSPACE) },
    }),
    async (c) => {
      const { ws } = await resolve(svc, c);
      const q = c.req.valid("query");
      const rel = toWorkspacePath(ws.workdir, q.path);
      const sandbox = ws.getBackend();
      const info = await sandbox.stat(rel);
      if (info === null && rel !== "") throw new NotFoundError(`directory '${rel}' not found`, { field: "path" });
      if (info && info.type === "file") throw new InvalidArgumentError(`'${rel}' is a file, not a directory`, { field: "path" });
      const limit = Math.min(q.limit ?? DEFAULT_LIST_PAGE, svc.limits.maxListEntries, MAX_LIST_PAGE);
      const page = await listDirectoryPage(sandbox, rel, { limit, ...(q.cursor ? { cursor: q.cursor } : {}) });
      const entries = page.entries.map((e) => ({ name: e.name, type: e.type, size: e.size, updatedAt: new Date(e.mtimeMs).toISOString() }));
      return c.json({ path: rel, entries, ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}), truncated: page.nextCursor !== undefined }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/sessions/{sessionId}/workspace/files/download-token",
      operationId: "createDownloadToken",
      tags: ["workspace"],
      summary: "A signed link to one file of this session, valid for a short time (default 60 s)",
      request: { params: SessionParams, body: { content: { "application/json": { schema: DownloadTokenBody } }, required: true } },
      // Signed without touching the workspace: only the session is looked up.
      responses: { 200: json(DownloadToken, "Token"), ...problemResponses(400, 401, 404, ...JSON_BODY) },
    }),
    async (c) => {
      const record = await sessionOf(svc, c.get("userId"), c.req.valid("param").sessionId);
      // Checked (and normalised) now: a token is never minted for a path that could not be served.
      const rel = checkRelativePath(c.req.valid("json").path);
      const { token, expiresAt } = svc.downloads.sign(record.userId, record.sessionId, rel);
      const url = `/sessions/${record.sessionId}/workspace/files?path=${encodeURIComponent(rel)}&download=true&token=${encodeURIComponent(token)}`;
      return c.json({ token, expiresAt, url }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/sessions/{sessionId}/workspace/files",
      operationId: "readFile",
      tags: ["workspace"],
      summary:
        "One file's bytes (bearer token, or a download `token` for exactly this session and path); `Range: bytes=a-b` reads a piece of a file of any size",
      request: { params: SessionParams, query: FileQuery },
      security: BEARER_OR_DOWNLOAD_TOKEN,
      responses: {
        200: {
          description: "The file: a few media types as themselves (text, JSON, images, PDF, ...), else application/octet-stream",
          content: { "application/octet-stream": { schema: { type: "string", format: "binary" } } },
        },
        206: {
          description: "The range asked for (at most maxReadBytes of it), with Content-Range",
          content: { "application/octet-stream": { schema: { type: "string", format: "binary" } } },
        },
        ...problemResponses(...WORKSPACE),
        413: problem("The file is over the download limit: read it in Range pieces"),
        416: problem("The range starts past the end of the file (Content-Range: bytes */size)"),
      },
    }),
    async (c) => {
      const q = c.req.valid("query");
      const { sessionId } = c.req.valid("param");
      // The auth middleware accepted either the bearer token or q.token for this session and path (see app.ts).
      const record = await sessionOf(svc, c.get("userId"), sessionId);
      const ws = await workspaceOf(svc, record);
      const rel = toWorkspacePath(ws.workdir, q.path);
      const sandbox = ws.getBackend();
      const size = await regularFileSize(sandbox, rel);
      const max = svc.limits.maxReadBytes;
      const base = rel.split("/").pop() || "download";
      const ext = /\.([A-Za-z0-9]{1,8})$/.exec(base)?.[1]?.toLowerCase() ?? "";
      const headers: Record<string, string> = {
        "content-type": MEDIA[ext] ?? "application/octet-stream",
        "accept-ranges": "bytes",
        "x-content-type-options": "nosniff",
        "content-security-policy": "sandbox; default-src 'none'",
        "cache-control": "private, no-store",
      };
      if (q.download === "true" || q.download === "1") headers["content-disposition"] = `attachment; filename*=UTF-8''${encodeURIComponent(base)}`;
      // An If-Range validator cannot be checked (no ETag is given out): the whole file, as RFC 9110 says.
      const range = c.req.header("if-range") === undefined ? parseRange(c.req.header("range"), size) : undefined;
      if (range === "unsatisfiable") return notSatisfiable(c.get("requestId"), size);
      if (c.req.method === "HEAD") {
        // The headers a GET would send, without reading the file.
        if (range)
          return c.body(null, 206, {
            ...headers,
            "content-range": `bytes ${range.start}-${Math.min(range.end, range.start + max - 1)}/${size}`,
            "content-length": String(Math.min(range.end - range.start + 1, max)),
          }) as never;
        return c.body(null, 200, { ...headers, "content-length": String(size) }) as never;
      }
      if (!range) {
        if (size > max)
          throw new TooLargeError(
            `file '${rel}' is ${size} bytes, over the download limit of ${max}; fetch it in pieces with a Range header (bytes=start-end)`,
          );
        // The size may change between stat and read: the read itself is capped too.
        const bytes = await sandbox.readFile(rel, { maxBytes: max });
        if (bytes.length > max) throw new TooLargeError(`file '${rel}' is over the download limit of ${max} bytes`, { field: "path" });
        return c.body(new Uint8Array(bytes), 200, { ...headers, "content-length": String(bytes.length) }) as never;
      }
      // A range is served up to maxReadBytes; the client asks again from where Content-Range ends.
      const length = Math.min(range.end - range.start + 1, max);
      const bytes = await readRange(sandbox, rel, range.start, length, size, max);
      // The file shrank under the range since it was measured.
      if (bytes.length === 0) return notSatisfiable(c.get("requestId"), size);
      const end = range.start + bytes.length - 1;
      return c.body(new Uint8Array(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.length), 206, {
        ...headers,
        "content-range": `bytes ${range.start}-${end}/${Math.max(size, end + 1)}`,
        "content-length": String(bytes.length),
      }) as never;
    },
  );
}

/** The size of the regular file `rel`; NotFoundError or InvalidArgumentError naming `path` otherwise. */
async function regularFileSize(sandbox: Sandbox, rel: string): Promise<number> {
  const info = await sandbox.stat(rel);
  if (info === null) throw new NotFoundError(`file '${rel}' not found`, { field: "path" });
  if (info.type === "dir") throw new InvalidArgumentError(`'${rel}' is a directory, not a file`, { field: "path" });
  if (info.type === "other") throw new InvalidArgumentError(`'${rel}' is not a regular file`, { field: "path" });
  return info.size;
}

/**
 * One `bytes=` range of a file of `size` bytes (RFC 9110 section 14.1.2): `a-b`, `a-` or `-n`. A
 * header that is absent, malformed or asks for several ranges is ignored (the whole file is
 * served), as the RFC allows; a well-formed range starting past the end is "unsatisfiable".
 */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | "unsatisfiable" | undefined {
  const m = header === undefined ? null : /^bytes=(\d{0,16})-(\d{0,16})$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return undefined;
  if (m[1] === "") {
    const n = Number(m[2]);
    return n === 0 || size === 0 ? "unsatisfiable" : { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === "" ? Infinity : Number(m[2]);
  if (end < start) return undefined;
  return start >= size ? "unsatisfiable" : { start, end: Math.min(end, size - 1) };
}

/** 416 with the file's size, so the client can ask again within it. */
function notSatisfiable(requestId: string, size: number): Response {
  const body = { ...toProblem(new InvalidArgumentError(`starts past the end of the file (${size} bytes)`, { field: "range" })), status: 416, requestId };
  return new Response(JSON.stringify(body), { status: 416, headers: { "content-type": "application/problem+json", "content-range": `bytes */${size}` } });
}

/** `length` bytes from `start`: the backend's ranged read, else a piece of a whole (capped) read. */
async function readRange(sandbox: Sandbox, rel: string, start: number, length: number, size: number, max: number): Promise<Buffer> {
  if (sandbox.readRange) return sandbox.readRange(rel, start, length);
  if (size > max) throw new TooLargeError(`file '${rel}' is ${size} bytes; this backend reads ranges only of files up to the download limit of ${max}`);
  return (await sandbox.readFile(rel, { maxBytes: max })).subarray(start, start + length);
}
