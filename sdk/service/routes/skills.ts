import { createRoute, z, type OpenAPIHono } from "@hono/zod-openapi";
import tar from "tar-stream";
import { ConflictError, InvalidArgumentError, NotFoundError, TooLargeError, fromZodError } from "../../errors.js";
import type { ArchiveFormat } from "../../workspace/archive.js";
import type { Skill } from "../../workspace/skills.js";
import type { Workspace } from "../../workspace/workspace.js";
import { resolve, workspacePath, type ServiceContext, type ServiceEnv, type ServiceLimits } from "../context.js";
import { SessionParams, SkillUploadForm, SkillView } from "../schemas.js";
import { WORKSPACE, json, problem, problemResponses } from "./openapi-common.js";

const ManifestSchema = z.strictObject({
  entries: z.array(z.strictObject({ path: z.string().min(1).max(4096), size: z.number().int().min(0) })).min(1, "a skill upload needs at least one file"),
});

/** `dir` workspace-relative: the skill's absolute dir is a host path on host backends. */
export const skillView = (ws: Workspace, s: Skill) => ({ name: s.name, description: s.description, dir: workspacePath(ws, s.dir), markdown: s.markdown, updatedAt: new Date(s.updatedAt).toISOString() });

/**
 * The agent's skills: list, upload (a folder as multipart `manifest` + `files` parts as the
 * reference sends it, or one `archive` part: zip, tar or tar.gz), remove. Uploads keep their folder
 * name (the reference installs every sandboxed upload as `skill`, `skill-1`, ...); an unknown name
 * to remove is a 404 (the reference answers 500 on sandboxes and nothing on Local).
 */
export function skillRoutes(app: OpenAPIHono<ServiceEnv>, svc: ServiceContext): void {
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
      return c.json((await ws.listSkills({ agentId: record.agentId })).map((s) => skillView(ws, s)), 200);
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
          content: { "multipart/form-data": { schema: SkillUploadForm, encoding: { manifest: { contentType: "application/json, text/plain" }, files: { contentType: "application/octet-stream" } } } },
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
      if (!/^multipart\/form-data/i.test(type)) throw new InvalidArgumentError("body", "must be multipart/form-data");
      const { record, ws } = await resolve(svc, c);
      const form = await c.req.parseBody({ all: true }).catch((e: unknown) => {
        throw new InvalidArgumentError("body", `is not a readable multipart body: ${e instanceof Error ? e.message : String(e)}`);
      });
      const { data, format, dirName } = await uploadOf(form, svc.limits);
      const skill = await svc.installs.run(() =>
        ws.addSkillArchive(data, { format, ...(dirName ? { dirName } : {}), maxExtractedBytes: svc.limits.maxUploadBytes, agentId: record.agentId }),
      );
      // The workspace dedups by SKILL.md content: an identical skill is already there and nothing was copied.
      if (!skill) throw new ConflictError("a skill with the same SKILL.md content is already installed for this agent; nothing was changed", { field: "SKILL.md" });
      return c.json(skillView(ws, skill), 201);
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
      if (!(await ws.removeSkill(name, { agentId: record.agentId }))) throw new NotFoundError(`skill '${name}'`, { field: "name" });
      return c.body(null, 204);
    },
  );
}

type Form = Record<string, string | File | (string | File)[]>;

const list = (v: Form[string] | undefined): (string | File)[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

async function uploadOf(form: Form, limits: ServiceLimits): Promise<{ data: Uint8Array | AsyncIterable<Uint8Array>; format: ArchiveFormat; dirName?: string }> {
  const archive = list(form.archive);
  if (archive.length > 0) {
    const file = archive[0];
    if (archive.length > 1 || !(file instanceof File)) throw new InvalidArgumentError("archive", "must be exactly one file part");
    const format = list(form.format)[0] ?? formatOf(file.name);
    if (format !== "zip" && format !== "tar" && format !== "tar.gz") throw new InvalidArgumentError("format", "must be zip, tar or tar.gz (or name the archive *.zip, *.tar, *.tar.gz, *.tgz)");
    return { data: new Uint8Array(await file.arrayBuffer()), format };
  }
  const manifestPart = list(form.manifest)[0];
  if (manifestPart === undefined) throw new InvalidArgumentError("manifest", "is required (or send one `archive` part)");
  const text = typeof manifestPart === "string" ? manifestPart : await manifestPart.text();
  let raw: unknown;
  try {
    raw = JSON.parse(text.slice(0, 1024 * 1024));
  } catch {
    throw new InvalidArgumentError("manifest", "is not valid JSON");
  }
  const parsed = ManifestSchema.safeParse(raw);
  if (!parsed.success) throw fromZodError("manifest", parsed.error);
  const files = list(form.files);
  const root = checkManifest(parsed.data.entries, files, limits);
  return { data: tarOf(parsed.data.entries, files as File[]), format: "tar", dirName: root };
}

/** The reference's manifest rules (section 9.6), in its order; returns the skill's folder name. */
function checkManifest(entries: Array<{ path: string; size: number }>, files: (string | File)[], limits: ServiceLimits): string {
  if (entries.length !== files.length) throw new InvalidArgumentError("files", `the manifest lists ${entries.length} entries but ${files.length} file parts were sent`);
  if (entries.length > limits.maxUploadFiles) throw new TooLargeError(`a skill upload holds at most ${limits.maxUploadFiles} files, got ${entries.length}`);
  let total = 0;
  const roots = new Set<string>();
  entries.forEach((e, i) => {
    const field = `manifest.entries[${i}]`;
    const f = files[i];
    if (!(f instanceof File)) throw new InvalidArgumentError(`files[${i}]`, "must be a file part");
    if (e.size > limits.maxUploadFileBytes) throw new TooLargeError(`${field}.size: ${e.size} bytes is over the per-file limit of ${limits.maxUploadFileBytes}`);
    if (f.size !== e.size) throw new InvalidArgumentError(`${field}.size`, `declares ${e.size} bytes but the part holds ${f.size}`);
    const segments = e.path.replace(/\\/g, "/").split("/");
    if (e.path.startsWith("/") || segments.length < 2 || segments.some((s) => s === "" || s === "." || s === ".." || s.includes("\0")))
      throw new InvalidArgumentError(`${field}.path`, `'${e.path}' must be <folder>/<file> with no empty, '.' or '..' segment and not absolute`);
    total += e.size;
    roots.add(segments[0]!);
  });
  if (total > limits.maxUploadBytes) throw new TooLargeError(`the upload totals ${total} bytes, over the limit of ${limits.maxUploadBytes}`);
  if (roots.size !== 1) throw new InvalidArgumentError("manifest.entries", "a skill must be a single folder (every path starts with the same folder)");
  const root = [...roots][0]!;
  if (!entries.some((e) => e.path.replace(/\\/g, "/") === `${root}/SKILL.md`)) throw new InvalidArgumentError("manifest.entries", `has no '${root}/SKILL.md'`);
  return root;
}

/** The folder as a tar stream, one part at a time (never the whole upload twice in memory). */
async function* tarOf(entries: Array<{ path: string; size: number }>, files: File[]): AsyncIterable<Uint8Array> {
  const pack = tar.pack();
  const feed = (async () => {
    for (const [i, e] of entries.entries()) {
      const bytes = Buffer.from(await files[i]!.arrayBuffer());
      await new Promise<void>((ok, fail) => pack.entry({ name: e.path.replace(/\\/g, "/"), size: bytes.length, mtime: new Date(0) }, bytes, (err) => (err ? fail(err) : ok())));
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
