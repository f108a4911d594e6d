import { describe, expect, it } from "vitest";
import { SandboxApiException, SandboxError } from "@alibaba-group/opensandbox";
import { RateLimitedError } from "../../sdk/errors.js";
import { openSandboxError } from "../../sdk/backends/opensandbox/errors.js";
import { OpenSandboxDriver } from "../../sdk/backends/opensandbox/driver.js";
import { secretFieldPaths } from "../../sdk/contract/fleet.js";

const api = (statusCode: number, code: string, rawBody: unknown = { code, message: "m" }) =>
  new SandboxApiException({ message: "m", statusCode, error: new SandboxError(code, "m"), rawBody });

describe("OpenSandbox error mapping", () => {
  it("maps 429 and quota answers to rate_limited with the server's retry-after", () => {
    const e = openSandboxError(api(429, "RATE_LIMITED", { code: "RATE_LIMITED", message: "slow down", retry_after: 7 }), "create a sandbox");
    expect(e).toBeInstanceOf(RateLimitedError);
    expect(e).toMatchObject({ code: "rate_limited", retryable: true, retryAfterMs: 7000 });
    const q = openSandboxError(api(403, "DOCKER::QUOTA_EXCEEDED"), "create a sandbox");
    expect(q).toMatchObject({ code: "rate_limited", retryAfterMs: undefined });
  });

  it("maps auth, missing sandboxes, server errors and the rest", () => {
    expect(openSandboxError(api(401, "MISSING_API_KEY"), "list")).toMatchObject({ code: "unauthenticated" });
    expect(openSandboxError(api(404, "DOCKER::SANDBOX_NOT_FOUND"), "read")).toMatchObject({ code: "not_found" });
    expect(openSandboxError(api(500, "DOCKER::SANDBOX_IMAGE_PULL_FAILED"), "create")).toMatchObject({ code: "unavailable" });
    expect(openSandboxError(api(400, "VOLUME::HOST_PATH_NOT_ALLOWED"), "create").message).toContain("VOLUME::HOST_PATH_NOT_ALLOWED");
    expect(openSandboxError(new TypeError("fetch failed"), "list")).toMatchObject({ code: "unavailable" });
  });

  it("keeps the API key out of the driver's spec, and marks it a secret field for Pulumi", () => {
    const key = "k-0123456789abcdef";
    const d = new OpenSandboxDriver({ apiKey: key, domain: "127.0.0.1:1" });
    expect(JSON.stringify(d.spec)).not.toContain(key);
    expect(d.connection.apiKey).toBe(key);
    expect(secretFieldPaths({ backend: { kind: "opensandbox", apiKey: key } })).toEqual([["backend", "apiKey"]]);
  });

  it("names the field at fault for bad options", () => {
    expect(() => new OpenSandboxDriver({ timeoutSeconds: 5 })).toThrow(/backend\.timeoutSeconds/);
    expect(() => new OpenSandboxDriver({ extraPip: ["a b"] })).toThrow(/backend\.extraPip\[0\]/);
  });
});
