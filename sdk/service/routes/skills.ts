import { createRoute, z, type OpenAPIHono } from "@hono/zod-openapi";
import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { Readable } from "node:stream";
import type { Context } from "hono";
import tar from "tar-stream";
import { ConflictError, InvalidArgumentError, NotFoundError, TooLargeError, fromZodError } from "../../errors.js";
import type { ArchiveFormat } from "../../workspace/archive.js";
import type { Skill } from "../../workspace/skills.js";
import type { Workspace } from "../../workspace/workspace.js";
import { resolve, Semaphore, workspacePath, type ServiceContext, type ServiceEnv, type ServiceLimits } from "../context.js";
import { SessionParams, SkillUploadForm, SkillView } from "../schemas.js";
import { spoolMultipart, type SpooledFile, type SpooledForm, type SpoolLimits } from "../uploads.js";
import { WORKSPACE, json, problem, problemResponses } from "./openapi-common.js";

const ManifestSchema = z.strictObject({
  entries: z.array(z.strictObject({ path: z.string().min(1).max(4096), size: z.number().int().min(0) })).min(1, "a skill upload needs at least one file"),
});

/** `dir` workspace-relative: the skill's absolute dir is a host path on host backends. */
export const skillView = (ws: Workspace, s: Skill) => ({
  name: s.name,
  description: s.description,
  dir: workspacePath(ws, s.dir),
  markdown: s.markdown,
  updatedAt: new Date(s.updatedAt).toISOString(),
});

/**
 * The agent's skills: list, upload (a folder as multipart `manifest` + `files` parts as the
 * reference sends it, or one `archive` part: zip, tar or tar.gz), remove. Uploads keep their folder
 * name (the reference installs every sandboxed upload as `skill`, `skill-1`, ...); an unknown name
 * to remove is a 404 (the reference answers 500 on sandboxes and nothing on Local).
 */
export function skillRoutes(app: OpenAPIHono<ServiceEnv>, svc: ServiceContext): void {
  const parsing = new Semaphore(svc.limits.maxConcurrentUploads);
  app.openapi(
    createRoute({
      method: "get",
      path: "/sessions/{sessionId}/workspace/skills",
      operationId: "listSkills",
      tags: ["workspace"],
      summary: "Skills of the session's agent",
      request: { params: SessionParams },
      responses: { 200: json(z.array(SkillView), "Skills of the session's agent"), ...problemResponses(...WORKSPACE) },
    }),
    async (c) => {
      const { record, ws } = await resolve(svc, c);
      return c.json(
        (await ws.listSkills({ agentId: record.agentId })).map((s) => skillView(ws, s)),
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/sessions/{sessionId}/workspace/skills",
      operationId: "uploadSkill",
      tags: ["workspace"],
      summary: "Upload a skill: multipart `manifest` (JSON {entries:[{path,size}]}) + `files` parts in order, or one `archive` part (+ optional `format`)",
      // A plain schema, not zod: the route reads the multipart body itself (no validator parses it first).
      request: {
        params: SessionParams,
        body: {
          required: true,
          content: {
            "multipart/form-data": {
              schema: SkillUploadForm,
              encoding: { manifest: { contentType: "application/json, text/plain" }, files: { contentType: "application/octet-stream" } },
            },
          },
        },
      },
      responses: {
        201: json(SkillView, "Installed"),
        ...problemResponses(...WORKSPACE, 413),
        400: problem("Bad input: not multipart/form-data, a bad manifest or archive (`field` names it)"),
        409: problem("A skill with the same SKILL.md is already installed; nothing was changed"),
        413: problem("Over the upload limits (files, bytes per file, bytes in all)"),
      },
    }),
    async (c) => {
      const type = c.req.header("content-type") ?? "";
      if (!/^multipart\/form-data/i.test(type)) throw new InvalidArgumentError("must be multipart/form-data", { field: "body" });
      const maxBody = svc.limits.maxUploadBytes + MULTIPART_SLACK;
      // An announced size over the limit is refused before a byte is read.
      if (Number(c.req.header("content-length") ?? 0) > maxBody) throw new TooLargeError(`the request body is over the limit of ${maxBody} bytes`);
      const { record, ws } = await resolve(svc, c);
      // At most maxConcurrentUploads bodies are read at once; the others wait unread (TCP backpressure holds their bytes).
      const form = await parsing.run(() => spoolMultipart(bodyOf(c), type, spoolLimits(svc.limits)));
      try {
        const { data, format, dirName } = await uploadOf(form, svc.limits);
        const skill = await svc.installs.run(() =>
          ws.addSkillArchive(data, {
            format,
            ...(dirName ? { dirName } : { keepFolderName: true }),
            maxExtractedBytes: svc.limits.maxUploadBytes,
            agentId: record.agentId,
          }),
        );
        // The workspace dedups by SKILL.md content: an identical skill is already there and nothing was copied.
        if (!skill)
          throw new ConflictError("a skill with the same SKILL.md content is already installed for this agent; nothing was changed", { field: "SKILL.md" });
        return c.json(skillView(ws, skill), 201);
      } finally {
        await form[Symbol.asyncDispose]();
      }
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: "/sessions/{sessionId}/workspace/skills/{name}",
      operationId: "removeSkill",
      tags: ["workspace"],
      summary: "Remove a skill of the session's agent (an unknown name is a 404)",
      request: { params: SessionParams.extend({ name: z.string().min(1).max(256) }) },
      responses: { 204: { description: "Removed" }, ...problemResponses(...WORKSPACE) },
    }),
    async (c) => {
      const { record, ws } = await resolve(svc, c);
      const name = c.req.valid("param").name;
      if (!(await ws.removeSkill(name, { agentId: record.agentId }))) throw new NotFoundError(`skill '${name}' not found`, { field: "name" });
      return c.body(null, 204);
    },
  );
}

/** Multipart framing (boundaries, part headers) allowed beyond maxUploadBytes of content. */
const MULTIPART_SLACK = 1024 * 1024;
const MAX_MANIFEST_BYTES = 1024 * 1024;

const spoolLimits = (limits: ServiceLimits): SpoolLimits => ({
  maxBytes: limits.maxUploadBytes + MULTIPART_SLACK,
  maxPartBytes: { archive: limits.maxUploadBytes, files: limits.maxUploadFileBytes, manifest: MAX_MANIFEST_BYTES },
  maxFiles: limits.maxUploadFiles + 2,
  maxFieldBytes: MAX_MANIFEST_BYTES,
});

/**
 * The request body as a Node stream. Under @hono/node-server that is the IncomingMessage itself:
 * Node 20's Readable.toWeb (behind `c.req.raw.body`) queues up to 16,384 chunks before it pauses
 * the socket, which is hundreds of MiB of a fast upload.
 */
function bodyOf(c: Context<ServiceEnv>): Readable {
  const incoming = (c.env as { incoming?: unknown } | undefined)?.incoming;
  if (incoming instanceof Readable) return incoming;
  const body = c.req.raw.body;
  if (!body) throw new InvalidArgumentError("is empty", { field: "body" });
  return Readable.fromWeb(body as import("node:stream/web").ReadableStream<Uint8Array>, { highWaterMark: 1 });
}

async function uploadOf(form: SpooledForm, limits: ServiceLimits): Promise<{ data: AsyncIterable<Uint8Array>; format: ArchiveFormat; dirName?: string }> {
  const archive = form.files.filter((f) => f.field === "archive");
  if (archive.length > 0) {
    const file = archive[0]!;
    if (archive.length > 1 || form.files.length > 1) throw new InvalidArgumentError("must be exactly one file part, and the only one", { field: "archive" });
    const format = form.fields.get("format")?.[0] ?? formatOf(file.filename);
    if (format !== "zip" && format !== "tar" && format !== "tar.gz")
      throw new InvalidArgumentError("must be zip, tar or tar.gz (or name the archive *.zip, *.tar, *.tar.gz, *.tgz)", { field: "format" });
    return { data: createReadStream(file.path), format };
  }
  const manifestFile = form.files.find((f) => f.field === "manifest");
  const text = form.fields.get("manifest")?.[0] ?? (manifestFile ? await readFile(manifestFile.path, "utf8") : undefined);
  if (text === undefined) throw new InvalidArgumentError("is required (or send one `archive` part)", { field: "manifest" });
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new InvalidArgumentError("is not valid JSON", { field: "manifest" });
  }
  const parsed = ManifestSchema.safeParse(raw);
  if (!parsed.success) throw fromZodError("manifest", parsed.error);
  const files = form.files.filter((f) => f.field === "files");
  const root = checkManifest(parsed.data.entries, files, limits);
  return { data: tarOf(parsed.data.entries, files), format: "tar", dirName: root };
}

/** The reference's manifest rules (section 9.6), in its order; returns the skill's folder name. */
function checkManifest(entries: Array<{ path: string; size: number }>, files: SpooledFile[], limits: ServiceLimits): string {
  if (entries.length !== files.length)
    throw new InvalidArgumentError(`the manifest lists ${entries.length} entries but ${files.length} file parts were sent`, { field: "files" });
  if (entries.length > limits.maxUploadFiles) throw new TooLargeError(`a skill upload holds at most ${limits.maxUploadFiles} files, got ${entries.length}`);
  let total = 0;
  const roots = new Set<string>();
  entries.forEach((e, i) => {
    const field = `manifest.entries[${i}]`;
    const f = files[i]!;
    if (e.size > limits.maxUploadFileBytes)
      throw new TooLargeError(`${field}.size: ${e.size} bytes is over the per-file limit of ${limits.maxUploadFileBytes}`);
    if (f.size !== e.size) throw new InvalidArgumentError(`declares ${e.size} bytes but the part holds ${f.size}`, { field: `${field}.size` });
    const segments = e.path.replace(/\\/g, "/").split("/");
    if (e.path.startsWith("/") || segments.length < 2 || segments.some((s) => s === "" || s === "." || s === ".." || s.includes("\0")))
      throw new InvalidArgumentError(`'${e.path}' must be <folder>/<file> with no empty, '.' or '..' segment and not absolute`, { field: `${field}.path` });
    total += e.size;
    roots.add(segments[0]!);
  });
  if (total > limits.maxUploadBytes) throw new TooLargeError(`the upload totals ${total} bytes, over the limit of ${limits.maxUploadBytes}`);
  if (roots.size !== 1)
    throw new InvalidArgumentError("a skill must be a single folder (every path starts with the same folder)", { field: "manifest.entries" });
  const root = [...roots][0]!;
  if (!entries.some((e) => e.path.replace(/\\/g, "/") === `${root}/SKILL.md`))
    throw new InvalidArgumentError(`has no '${root}/SKILL.md'`, { field: "manifest.entries" });
  return root;
}

/** The folder as a tar stream, each file streamed from its spooled part. */
async function* tarOf(entries: Array<{ path: string; size: number }>, files: SpooledFile[]): AsyncIterable<Uint8Array> {
  const pack = tar.pack();
  const feed = (async () => {
    for (const [i, e] of entries.entries()) {
      await new Promise<void>((ok, fail) => {
        const entry = pack.entry({ name: e.path.replace(/\\/g, "/"), size: e.size, mtime: new Date(0) }, (err) => (err ? fail(err) : ok()));
        createReadStream(files[i]!.path)
          .on("error", fail)
          .pipe(entry as unknown as NodeJS.WritableStream);
      });
    }
    pack.finalize();
  })();
  feed.catch((e: unknown) => pack.destroy(e as Error));
  for await (const chunk of pack) yield chunk as Uint8Array;
  await feed;
}

function formatOf(name: string): string | undefined {
  const n = name.toLowerCase();
  return n.endsWith(".zip") ? "zip" : n.endsWith(".tar.gz") || n.endsWith(".tgz") ? "tar.gz" : n.endsWith(".tar") ? "tar" : undefined;
}
