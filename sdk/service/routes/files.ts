import { createRoute, type OpenAPIHono } from "@hono/zod-openapi";
import { InvalidArgumentError, NotFoundError, TooLargeError } from "../../errors.js";
import { listDirectoryPage } from "../../util/listing.js";
import { checkRelativePath, toWorkspacePath } from "../../paths.js";
import { DEFAULT_LIST_PAGE, MAX_LIST_PAGE } from "../../sandbox.js";
import type { Workspace } from "../../workspace/workspace.js";
import { resolve, sessionOf, workspaceOf, type ServiceContext, type ServiceEnv } from "../context.js";
import { DirectoryListing, DirectoryQuery, DownloadToken, DownloadTokenBody, FileQuery, SessionParams } from "../schemas.js";
import { BEARER_OR_DOWNLOAD_TOKEN, JSON_BODY, WORKSPACE, json, problem, problemResponses } from "./openapi-common.js";

/** Media types served as themselves; anything else is an octet stream (never HTML or script from a workspace). */
const MEDIA: Record<string, string> = {
  txt: "text/plain; charset=utf-8", md: "text/markdown; charset=utf-8", json: "application/json", jsonl: "application/x-ndjson",
  csv: "text/csv; charset=utf-8", log: "text/plain; charset=utf-8", png: "image/png", jpg: "image/jpeg", jpeg: "image/jpeg",
  gif: "image/gif", webp: "image/webp", pdf: "application/pdf", mp3: "audio/mpeg", wav: "audio/wav", mp4: "video/mp4",
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
      if (info === null && rel !== "") throw new NotFoundError(`directory '${rel}'`, { field: "path" });
      if (info && info.type === "file") throw new InvalidArgumentError("path", `'${rel}' is a file, not a directory`);
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
      summary: "One file's bytes (bearer token, or a download `token` for exactly this session and path)",
      request: { params: SessionParams, query: FileQuery },
      security: BEARER_OR_DOWNLOAD_TOKEN,
      responses: {
        200: { description: "The file: a few media types as themselves (text, JSON, images, PDF, ...), else application/octet-stream", content: { "application/octet-stream": { schema: { type: "string", format: "binary" } } } },
        ...problemResponses(...WORKSPACE, 413),
        413: problem("The file is over the download limit"),
      },
    }),
    async (c) => {
      const q = c.req.valid("query");
      const { sessionId } = c.req.valid("param");
      // The auth middleware accepted either the bearer token or q.token for this session and path (see app.ts).
      const record = await sessionOf(svc, c.get("userId"), sessionId);
      const ws = await workspaceOf(svc, record);
      const rel = toWorkspacePath(ws.workdir, q.path);
      const bytes = await readBounded(ws, rel, svc.limits.maxReadBytes);
      const base = rel.split("/").pop() || "download";
      const ext = /\.([A-Za-z0-9]{1,8})$/.exec(base)?.[1]?.toLowerCase() ?? "";
      const headers: Record<string, string> = {
        "content-type": MEDIA[ext] ?? "application/octet-stream",
        "content-length": String(bytes.length),
        "x-content-type-options": "nosniff",
        "content-security-policy": "sandbox; default-src 'none'",
        "cache-control": "private, no-store",
      };
      if (q.download === "true" || q.download === "1") headers["content-disposition"] = `attachment; filename*=UTF-8''${encodeURIComponent(base)}`;
      return c.body(new Uint8Array(bytes), 200, headers) as never;
    },
  );
}

async function readBounded(ws: Workspace, rel: string, max: number): Promise<Buffer> {
  const sandbox = ws.getBackend();
  const info = await sandbox.stat(rel);
  if (info === null) throw new NotFoundError(`file '${rel}'`, { field: "path" });
  if (info.type === "dir") throw new InvalidArgumentError("path", `'${rel}' is a directory, not a file`);
  if (info.type === "other") throw new InvalidArgumentError("path", `'${rel}' is not a regular file`);
  if (info.size > max) throw new TooLargeError(`file '${rel}' is ${info.size} bytes, over the download limit of ${max}`);
  // The size may change between stat and read: the read itself is capped too.
  const bytes = await sandbox.readFile(rel, { maxBytes: max });
  if (bytes.length > max) throw new TooLargeError(`file '${rel}' is over the download limit of ${max} bytes`, { field: "path" });
  return bytes;
}
