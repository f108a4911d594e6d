import { describe, expect, it } from "vitest";
import { HTTP_STATUS, MCP_ERROR_CODE, retryAfterHeader, toHttpStatus, toMcpError, toProblem } from "../../sdk/errors-http.js";
import {
  ClosedError,
  ConflictError,
  ExecFailedError,
  InternalError,
  InvalidArgumentError,
  McpError,
  NotFoundError,
  PathEscapeError,
  ProvisionFailedError,
  RateLimitedError,
  TimeoutError,
  TooLargeError,
  UnauthenticatedError,
  ForbiddenError,
  UnavailableError,
  UnsupportedError,
  WorkspaceError,
  ERROR_CLASS_FOR_CODE,
  errorForCode,
  fromZodError,
  parseRetryAfter,
  type WorkspaceErrorCode,
} from "../../sdk/errors.js";
import { dockerError } from "../../sdk/backends/docker/errors.js";

const one: Record<WorkspaceErrorCode, WorkspaceError> = {
  invalid_argument: new InvalidArgumentError("bad", { field: "f" }),
  not_found: new NotFoundError("x not found"),
  conflict: new ConflictError("c"),
  path_escape: new PathEscapeError(`path '../x' escapes`),
  unavailable: new UnavailableError("u"),
  timeout: new TimeoutError("t"),
  too_large: new TooLargeError("big"),
  closed: new ClosedError("closed"),
  exec_failed: new ExecFailedError("e"),
  provision_failed: new ProvisionFailedError("p"),
  mcp_error: new McpError("m"),
  rate_limited: new RateLimitedError("slow down", { retryAfterMs: 1500 }),
  unauthenticated: new UnauthenticatedError("who"),
  forbidden: new ForbiddenError("no entry"),
  unsupported: new UnsupportedError("no"),
  internal: new InternalError("bug"),
};

describe("error family", () => {
  it("has a subclass per code, each named after itself and carrying its code", () => {
    for (const [code, e] of Object.entries(one)) {
      expect(e.code).toBe(code);
      expect(e).toBeInstanceOf(WorkspaceError);
      expect(e.name).toBe(e.constructor.name);
      expect(e.name).not.toBe("WorkspaceError");
    }
  });

  it("marks unavailable, timeout and rate_limited retryable and nothing else, unless told", () => {
    const retryable = Object.values(one)
      .filter((e) => e.retryable)
      .map((e) => e.code)
      .sort();
    expect(retryable).toEqual(["rate_limited", "timeout", "unavailable"]);
    expect(new UnavailableError("gone for good", { retryable: false }).retryable).toBe(false);
  });

  it("parses Retry-After as seconds or a date, bounded, and refuses junk", () => {
    expect(parseRetryAfter("3")).toBe(3000);
    expect(parseRetryAfter(new Date(10_000 + 5000).toUTCString(), 10_000)).toBe(5000);
    expect(parseRetryAfter("99999999")).toBe(3_600_000);
    expect(parseRetryAfter("soon")).toBeUndefined();
    expect(parseRetryAfter(undefined)).toBeUndefined();
  });
});

describe("boundary mappings", () => {
  it("maps every code to an HTTP status and an MCP error code (distinct per code in the server range)", () => {
    for (const e of Object.values(one)) {
      expect(toHttpStatus(e)).toBe(HTTP_STATUS[e.code]);
      expect(toMcpError(e).code).toBe(MCP_ERROR_CODE[e.code]);
    }
    expect(toHttpStatus(one.rate_limited)).toBe(429);
    expect(toHttpStatus(one.unauthenticated)).toBe(401);
    expect(toHttpStatus(one.not_found)).toBe(404);
    expect(toHttpStatus(new Error("plain"))).toBe(500);
  });

  it("problem bodies carry code, field and retry hints but never the cause or details", () => {
    const secret = new InvalidArgumentError("bad", { field: "backend.env.TOKEN", cause: new Error("hunter2"), details: { value: "hunter2" } });
    const body = JSON.stringify(toProblem(secret));
    expect(body).not.toContain("hunter2");
    expect(toProblem(secret)).toMatchObject({ status: 400, title: "invalid_argument", field: "backend.env.TOKEN", retryable: false });
    expect(toProblem(one.rate_limited)).toMatchObject({ status: 429, retryable: true, retryAfterMs: 1500 });
    expect(retryAfterHeader(one.rate_limited)).toBe("2");
    expect(toProblem(new Error("internal secret"))).toEqual({
      type: "about:blank",
      title: "internal",
      status: 500,
      detail: "internal error",
      retryable: false,
    });
    expect(JSON.stringify(toMcpError(new Error("internal secret")))).not.toContain("secret");
  });
});

describe("uniform constructors: (message, { field, cause, details, ... })", () => {
  const cause = new Error("root cause");
  const details = { a: 1 };

  it("every subclass takes the message first and the field, cause and details in the options", () => {
    for (const [code, Class] of Object.entries(ERROR_CLASS_FOR_CODE)) {
      const e = new Class("went wrong", { field: "spec.x", cause, details });
      expect(e).toBeInstanceOf(Class);
      expect(e.code).toBe(code);
      expect(e.field).toBe("spec.x");
      expect(e.cause).toBe(cause);
      expect(e.details).toEqual(details);
      // Only InvalidArgumentError names the field in the message; the rest keep it as given.
      expect(e.message).toBe(code === "invalid_argument" ? "spec.x: went wrong" : "went wrong");
      // The boundary tables: status and JSON-RPC code by code, the field in the problem body.
      expect(toHttpStatus(e)).toBe(HTTP_STATUS[code as WorkspaceErrorCode]);
      expect(toMcpError(e).code).toBe(MCP_ERROR_CODE[code as WorkspaceErrorCode]);
      expect(toProblem(e)).toMatchObject({ title: code, status: HTTP_STATUS[code as WorkspaceErrorCode], detail: e.message, field: "spec.x" });
    }
  });

  it("keeps the HTTP status of each subclass", () => {
    const status = Object.fromEntries(Object.entries(one).map(([code, e]) => [code, toProblem(e).status]));
    expect(status).toEqual({
      invalid_argument: 400,
      not_found: 404,
      conflict: 409,
      path_escape: 400,
      unavailable: 503,
      timeout: 504,
      too_large: 413,
      closed: 409,
      exec_failed: 500,
      provision_failed: 502,
      mcp_error: 502,
      rate_limited: 429,
      unauthenticated: 401,
      forbidden: 403,
      unsupported: 501,
      internal: 500,
    });
  });

  it("InvalidArgumentError: the field from the options prefixes the message, unless fieldPrefix is false", () => {
    const e = new InvalidArgumentError("must be a positive number", { field: "query.limit" });
    expect(e.message).toBe("query.limit: must be a positive number");
    expect(e.field).toBe("query.limit");
    expect(toProblem(e)).toEqual({
      type: "urn:agent-workspaces:error:invalid_argument",
      title: "invalid_argument",
      status: 400,
      detail: "query.limit: must be a positive number",
      field: "query.limit",
      retryable: false,
    });
    expect(new InvalidArgumentError("no field").message).toBe("no field");
    expect(new InvalidArgumentError("no field").field).toBeUndefined();
    const bare = new InvalidArgumentError("'a/b' is a directory", { field: "path", fieldPrefix: false });
    expect(bare.message).toBe("'a/b' is a directory");
    expect(bare.field).toBe("path");
    expect(toProblem(bare)).toMatchObject({ detail: "'a/b' is a directory", field: "path" });
    expect(bare).not.toHaveProperty("fieldPrefix");
  });

  it("PathEscapeError: the caller's path is in the message only; field names the field, 'path' by default", () => {
    const e = new PathEscapeError("path '../etc/passwd' is outside the workspace");
    expect(e.message).toBe("path '../etc/passwd' is outside the workspace");
    expect(e.field).toBe("path");
    expect(toProblem(e)).toMatchObject({ status: 400, title: "path_escape", field: "path", detail: e.message });
    const cwd = new PathEscapeError("path '..' (cwd) must not contain '..'", { field: "cwd", cause });
    expect(cwd.field).toBe("cwd");
    expect(cwd.cause).toBe(cause);
  });

  it("NotFoundError: the message is used as given", () => {
    const e = new NotFoundError("session 's1' not found", { field: "sessionId" });
    expect(e.message).toBe("session 's1' not found");
    expect(toProblem(e)).toMatchObject({ status: 404, title: "not_found", field: "sessionId", detail: "session 's1' not found" });
  });

  it("RateLimitedError keeps retryAfterMs beside the common options", () => {
    const e = new RateLimitedError("slow down", { retryAfterMs: 2500, field: "x", details: { limit: "sessions" } });
    expect(e.retryAfterMs).toBe(2500);
    expect(toProblem(e)).toMatchObject({ status: 429, retryAfterMs: 2500, limit: "sessions", field: "x" });
  });

  it("errorForCode builds the class for a run-time code, the message as given", () => {
    for (const code of Object.keys(ERROR_CLASS_FOR_CODE) as WorkspaceErrorCode[]) {
      const e = errorForCode(code, "as given", { field: "f", cause });
      expect(e).toBeInstanceOf(ERROR_CLASS_FOR_CODE[code]);
      expect(e.code).toBe(code);
      expect(e.message).toBe("as given");
      expect(e.field).toBe("f");
      expect(e.cause).toBe(cause);
    }
    expect(errorForCode("path_escape", "path 'x' escapes").field).toBe("path");
  });

  it("fromZodError names the first bad field in both .field and the message", () => {
    const e = fromZodError("body", { issues: [{ path: ["limit"], message: "must be positive" }] });
    expect(e).toBeInstanceOf(InvalidArgumentError);
    expect(e.field).toBe("body.limit");
    expect(e.message).toBe("body.limit: must be positive");
  });
});

describe("docker error table", () => {
  const api = (statusCode: number, message: string, headers?: Record<string, string>) =>
    Object.assign(new Error(`(HTTP code ${statusCode}) ${message}`), { statusCode, json: { message }, ...(headers ? { headers } : {}) });

  it("maps engine statuses to codes, container states to recovery hints, sockets to unavailable", () => {
    expect((dockerError(api(401, "auth required"), "pull", "engine") as WorkspaceError).code).toBe("unauthenticated");
    const limited = dockerError(api(429, "toomanyrequests", { "retry-after": "7" }), "pull", "engine") as RateLimitedError;
    expect(limited).toBeInstanceOf(RateLimitedError);
    expect(limited.retryAfterMs).toBe(7000);
    expect((dockerError(api(404, "no such image"), "inspect", "engine") as WorkspaceError).code).toBe("not_found");
    expect((dockerError(api(404, "no such container"), "exec") as WorkspaceError).message).toContain("initialize the workspace to recreate it");
    expect((dockerError(api(409, "container is paused"), "exec") as WorkspaceError).code).toBe("unavailable");
    expect((dockerError(api(503, "busy"), "create", "engine") as WorkspaceError).retryable).toBe(true);
    expect((dockerError(Object.assign(new Error("connect"), { code: "ECONNREFUSED" }), "ping") as WorkspaceError).code).toBe("unavailable");
    const own = new ConflictError("mine");
    expect(dockerError(own, "x")).toBe(own);
  });
});
