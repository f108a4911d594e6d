import { z } from "@hono/zod-openapi";
import { WORKSPACE_ID_PATTERN } from "../contract/schema.js";
import { DEFAULT_LIST_PAGE, MAX_LIST_PAGE } from "../sandbox.js";
import { MAX_EDGE_ID_BYTES, edgeIdProblem, hasControlChar, type IdentityField } from "../util/identity-id.js";

/**
 * Request and response bodies: the one source of truth for validation and for /openapi.json.
 * Identity ids follow the one edge rule (sdk/util/identity-id.ts), so nothing stored is refused
 * later; the user never comes from a body, only from the token.
 */
const identityId = (field: IdentityField) =>
  z
    .string()
    .max(MAX_EDGE_ID_BYTES)
    .superRefine((value, ctx) => {
      const problem = edgeIdProblem(value, field);
      if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
    })
    .openapi({ description: `1-${MAX_EDGE_ID_BYTES} UTF-8 bytes, not blank, no control characters, no '/' or '\\', not starting with '.'` });

/** A display name: bounded, no control characters (PostgreSQL refuses NUL; logs and consoles show the rest). */
const displayName = z
  .string()
  .max(256)
  .refine((v) => !hasControlChar(v), "must not contain control characters");

export const SessionIdParam = z
  .string()
  // Within the edge rule for ids (no leading '.'); the service mints 32 hex characters.
  .regex(/^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$/, "must be 1-128 characters of [A-Za-z0-9_.-], not starting with '.'")
  .openapi({ param: { name: "sessionId", in: "path" }, example: "5f0c3c1e9a2b4d6e8f10a2b3c4d5e6f7" });

export const SessionParams = z.object({ sessionId: SessionIdParam });

/** A workspace-relative path (or absolute under the workspace root); checked again before any I/O. */
const relPath = z.string().max(4096);

export const CreateSessionBody = z
  .strictObject({
    agentId: identityId("agentId"),
    /** A workspace of yours (one of your sessions' or declared for you); see POST /sessions. */
    workspaceId: z.string().regex(WORKSPACE_ID_PATTERN, "must be 1-63 chars of [A-Za-z0-9_.-], starting with a letter or digit").optional(),
    name: displayName.optional(),
    cwd: relPath.nullable().optional(),
  })
  .openapi("CreateSession");

export const PatchSessionBody = z
  .strictObject({
    name: displayName.optional(),
    cwd: relPath.nullable().optional(),
  })
  .openapi("PatchSession");

export const Session = z
  .object({
    sessionId: z.string(),
    agentId: z.string(),
    workspaceId: z.string(),
    name: z.string(),
    cwd: z.string().nullable(),
    createdAt: z.string().openapi({ format: "date-time" }),
    updatedAt: z.string().openapi({ format: "date-time" }),
  })
  .openapi("Session");

export const SessionList = z.object({ sessions: z.array(Session), total: z.number().int() }).openapi("SessionList");

export const ListSessionsQuery = z.object({
  agentId: identityId("agentId").optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
  offset: z.coerce.number().int().min(0).max(1_000_000).default(0),
});

export const Problem = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    field: z.string().optional(),
    retryable: z.boolean(),
    retryAfterMs: z.number().optional().openapi({ description: "With a 429: milliseconds until a retry may pass (also the Retry-After header, in seconds)" }),
    limit: z
      .string()
      .optional()
      .openapi({ description: "With a 429: the limit reached (user_rate, global_rate, sessions_per_user, live_workspaces_per_user, live_workspaces)" }),
    requestId: z.string().optional(),
  })
  .openapi("Problem");

export const McpServerStatus = z
  .object({
    name: z.string(),
    stateful: z.boolean(),
    transport: z.enum(["stdio", "http"]),
    isHealthy: z.boolean(),
    tools: z.array(z.object({ name: z.string(), description: z.string() })),
    error: z.string().optional(),
  })
  .openapi("McpServerStatus");

export const SkillView = z.object({ name: z.string(), description: z.string(), dir: z.string(), markdown: z.string(), updatedAt: z.string() }).openapi("Skill");

export const PathQuery = z.object({ path: relPath.default("") });

export const FileQuery = z.object({
  path: relPath.min(1),
  download: z.enum(["true", "false", "1", "0"]).optional(),
  token: z.string().max(1024).optional(),
});

/** A directory listing is paged: a folder an agent filled with 200,000 entries costs one bounded page per call. */
export const DirectoryQuery = z.object({
  path: relPath.default(""),
  cursor: z.string().max(64).optional().openapi({ description: "The `nextCursor` of the previous page; leave out for the first page." }),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_LIST_PAGE)
    .optional()
    .openapi({ description: `Entries per page (default ${DEFAULT_LIST_PAGE}, at most ${MAX_LIST_PAGE}, and never more than the service's maxListEntries).` }),
});

export const DirectoryListing = z
  .object({
    path: z.string(),
    entries: z.array(z.object({ name: z.string(), type: z.enum(["file", "dir", "symlink", "other"]), size: z.number(), updatedAt: z.string() })),
    nextCursor: z.string().optional().openapi({ description: "Present when more entries follow: pass it as `cursor` for the next page." }),
    /** Same as `nextCursor` being present (kept for clients written before paging). */
    truncated: z.boolean(),
  })
  .openapi("DirectoryListing");

export const DownloadTokenBody = z.strictObject({ path: relPath.min(1) }).openapi("DownloadTokenRequest");
export const DownloadToken = z.object({ token: z.string(), expiresAt: z.number().int(), url: z.string() }).openapi("DownloadToken");

export const GitStatus = z
  .object({
    branch: z.string().nullable(),
    head: z.string().nullable(),
    ahead: z.number().int().nullable(),
    behind: z.number().int().nullable(),
    staged: z.number().int(),
    unstaged: z.number().int(),
    untracked: z.number().int(),
    conflicted: z.number().int(),
    insertions: z.number().int(),
    deletions: z.number().int(),
  })
  .openapi("GitStatus");

export const WorkspaceStatus = z
  .object({
    workspaceId: z.string(),
    backend: z.string(),
    state: z.enum(["running", "closed"]),
    cwd: z.string().openapi({ description: 'The session\'s cwd, workspace-relative ("" is the root)' }),
    idleSeconds: z.number(),
    inFlight: z.number().int(),
    git: GitStatus.nullable(),
  })
  .openapi("WorkspaceStatus");

/**
 * The skill upload's multipart form, for the document only: a plain schema, so nothing validates
 * (or buffers) the body before the route's own streaming checks. Either a folder or an archive.
 */
const SkillFolderUpload = {
  type: "object" as const,
  title: "SkillFolderUpload",
  description: "A folder, as the reference sends it: the manifest, then one `files` part per entry, in its order",
  properties: {
    manifest: {
      type: "string" as const,
      contentMediaType: "application/json",
      description: 'JSON `{"entries":[{"path":"<folder>/<file>","size":<bytes>}]}`: one folder holding SKILL.md',
    },
    files: { type: "array" as const, items: { type: "string" as const, format: "binary" }, description: "The files' bytes, one part per manifest entry" },
  },
  required: ["manifest", "files"],
};
const SkillArchiveUpload = {
  type: "object" as const,
  title: "SkillArchiveUpload",
  description: "One archive holding the skill's folder",
  properties: {
    archive: { type: "string" as const, format: "binary", description: "A zip, tar or tar.gz" },
    format: { type: "string" as const, enum: ["zip", "tar", "tar.gz"], description: "Default: from the archive's file name (*.zip, *.tar, *.tar.gz, *.tgz)" },
  },
  required: ["archive"],
};
export const SkillUploadForm = { oneOf: [SkillFolderUpload, SkillArchiveUpload] };

/** One JSON-RPC message to the MCP endpoint (for the document; the MCP SDK's transport validates it). */
export const JsonRpcMessage = z
  .object({
    jsonrpc: z.literal("2.0"),
    id: z.union([z.string(), z.number().int()]).optional().openapi({ description: "Absent for a notification" }),
    method: z.string().openapi({ example: "tools/list" }),
    params: z.record(z.string(), z.unknown()).optional(),
  })
  .openapi("JsonRpcMessage");

export const JsonRpcResponse = z
  .object({
    jsonrpc: z.literal("2.0"),
    id: z.union([z.string(), z.number().int(), z.null()]),
    result: z.record(z.string(), z.unknown()).optional(),
    error: z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }).optional(),
  })
  .openapi("JsonRpcResponse");
