import type { OpenAPIHono } from "@hono/zod-openapi";
import type { ServiceEnv } from "../context.js";
import { JsonRpcMessage, JsonRpcResponse, Problem, SessionParams } from "../schemas.js";

/** The statuses the service answers with a problem body (sdk/errors-http.ts maps the error codes to them). */
export type ProblemStatus = 400 | 401 | 403 | 404 | 409 | 413 | 415 | 429 | 502 | 503 | 504;

const DESCRIPTIONS: Record<ProblemStatus, string> = {
  400: "Bad input: `field` names the field at fault",
  401: "Missing or unknown bearer token",
  403: "Refused: the token lacks the scope the route needs (WWW-Authenticate names it), or a policy refused it",
  404: "No such session of yours (or no such file, skill, ...)",
  409: "Conflict: a name already used, or the workspace was closed meanwhile",
  413: "The request body, the upload or the file is over the service's limit",
  415: "The body's Content-Type is not one this operation takes",
  429: "Too many requests: retry after `Retry-After` seconds when it is given",
  502: "The workspace's backend or an MCP server failed",
  503: "The backend is unavailable for now; retry later",
  504: "The backend did not answer in time",
};

const RETRY_AFTER = { "Retry-After": { description: "Seconds to wait before retrying", schema: { type: "integer" as const, minimum: 0 } } };

/** One problem response, for a route whose own wording is clearer than the default. */
export const problem = (description: string) => ({ description, content: { "application/problem+json": { schema: Problem } } });

/** The problem responses of `statuses`, for a route's `responses` (spread in; override one with `problem(...)`). */
export function problemResponses<S extends ProblemStatus>(...statuses: S[]): Record<S, ReturnType<typeof problem> & { headers?: typeof RETRY_AFTER }> {
  const out = {} as Record<S, ReturnType<typeof problem> & { headers?: typeof RETRY_AFTER }>;
  for (const s of statuses) out[s] = s === 429 ? { ...problem(DESCRIPTIONS[s]), headers: RETRY_AFTER } : problem(DESCRIPTIONS[s]);
  return out;
}

/** Every route under /sessions: its input is checked and it needs a bearer token. */
export const AUTHED = [400, 401, 403, 429] as const;
/** A route that reaches the session's workspace: resolving it may provision, resume or wait on the backend. */
export const WORKSPACE = [...AUTHED, 404, 409, 502, 503, 504] as const;
/** A route that reads a JSON body: over the JSON limit is a 413, another Content-Type a 415. */
export const JSON_BODY = [413, 415] as const;

/** A file read: the bearer token, or a download token for exactly that file (typed wide: a literal here confuses the route's handler types). */
export const BEARER_OR_DOWNLOAD_TOKEN: Array<Record<string, string[]>> = [{ bearer: [] }, { downloadToken: [] }];

export const json = <T>(schema: T, description: string) => ({ description, content: { "application/json": { schema } } });

/**
 * The parts of the document that no `createRoute` describes: routes registered with plain
 * `app.get`/`app.all` (their handlers stay as they are; nothing here validates) and the document's
 * own security schemes.
 */
export function describeUnroutedPaths(registry: OpenAPIHono<ServiceEnv>["openAPIRegistry"]): void {
  registry.registerComponent("securitySchemes", "bearer", { type: "http", scheme: "bearer", description: "A token from `agentws token <user>`" });
  registry.registerComponent("securitySchemes", "downloadToken", {
    type: "apiKey",
    in: "query",
    name: "token",
    description: "A download token from createDownloadToken: opens exactly one file of one session",
  });
  registry.registerPath({
    method: "post",
    path: "/sessions/{sessionId}/mcp",
    operationId: "sendMcpMessage",
    tags: ["mcp"],
    summary: "The session's MCP endpoint (streamable HTTP, stateless): one JSON-RPC message per POST",
    description:
      "Send `Accept: application/json, text/event-stream` (the MCP transport answers 406 without it). Tools: the built-in ones, " +
      "the session's MCP servers' as `mcp__<server>__<tool>`, and `Skill`. Protocol failures are JSON-RPC error bodies.",
    request: { params: SessionParams, body: { required: true, content: { "application/json": { schema: JsonRpcMessage } } } },
    responses: {
      200: json(JsonRpcResponse, "The JSON-RPC response"),
      202: { description: "A notification or response was accepted (no body)" },
      // A bad session id is a problem; a body that is no JSON-RPC is a JSON-RPC error from the transport.
      400: {
        description: "Bad input: a problem for the path, a JSON-RPC error for the body",
        content: { "application/problem+json": { schema: Problem }, "application/json": { schema: JsonRpcResponse } },
      },
      ...problemResponses(401, 404, 413, 429, 502, 503, 504),
      406: json(JsonRpcResponse, "The Accept header does not take both application/json and text/event-stream"),
      415: json(JsonRpcResponse, "The body is not application/json"),
    },
  });
  registry.registerPath({
    method: "get",
    path: "/healthz",
    operationId: "getHealth",
    tags: ["operations"],
    summary: "Liveness: 200 while the process serves requests (no token)",
    security: [],
    responses: { 200: json({ type: "object", properties: { ok: { type: "boolean", const: true } }, required: ["ok"] }, "Serving") },
  });
  registry.registerPath({
    method: "get",
    path: "/openapi.json",
    operationId: "getOpenApiDocument",
    tags: ["operations"],
    summary: "This document (OpenAPI 3.1, no token)",
    security: [],
    responses: { 200: json({ type: "object", properties: { openapi: { type: "string" } }, required: ["openapi"] }, "The OpenAPI document") },
  });
  registry.registerPath({
    method: "get",
    path: "/metrics",
    operationId: "getMetrics",
    tags: ["operations"],
    summary: "Prometheus metrics in the text exposition format (no token)",
    security: [],
    responses: { 200: { description: "Metrics", content: { "text/plain": { schema: { type: "string" } } } } },
  });
}

/** The document's own fields beside its paths (app.ts's doc31). */
export const DOCUMENT = {
  openapi: "3.1.0",
  info: {
    title: "agent-workspaces service",
    version: "0.1.0",
    license: { name: "Apache-2.0", identifier: "Apache-2.0" },
    description: "Sessions and their workspaces. Every route under /sessions needs `Authorization: Bearer <token>`; errors are application/problem+json.",
  },
  // Relative: the paths are served where this document is (a generated client sets its own baseUrl).
  servers: [{ url: "/", description: "This service (the origin that served the document)" }],
  tags: [
    { name: "sessions", description: "Sessions: each bound once to a workspace" },
    { name: "workspace", description: "The session's workspace: MCP servers, skills, files, status, offloading" },
    { name: "mcp", description: "The session's MCP endpoint" },
    { name: "operations", description: "Health, metrics and this document, without a token" },
  ],
  security: [{ bearer: [] }],
};
