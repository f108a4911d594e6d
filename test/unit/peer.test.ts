import { describe, expect, it } from "vitest";
import { loadDockerode } from "../../sdk/backends/docker/client.js";
import { isWorkspaceError } from "../../sdk/errors.js";

describe("optional peer packages", () => {
  it("loads dockerode when installed", () => {
    expect(typeof loadDockerode()).toBe("function");
  });

  it("names the package to install when the import fails as a missing install does", () => {
    const missing = (name: string) => {
      throw Object.assign(new Error(`Cannot find module '${name}'\nRequire stack:\n- /x.js`), { code: "MODULE_NOT_FOUND" });
    };
    let caught: unknown;
    try {
      loadDockerode(missing);
    } catch (e) {
      caught = e;
    }
    expect(isWorkspaceError(caught, "unavailable")).toBe(true);
    expect((caught as Error).message).toContain("npm install dockerode");
    expect((caught as { retryable: boolean }).retryable).toBe(false);
  });

  it("lets other load failures through unchanged (a broken install is not a missing one)", () => {
    const broken = new SyntaxError("Unexpected token");
    expect(() =>
      loadDockerode(() => {
        throw broken;
      }),
    ).toThrow(broken);
    // A missing dependency *of* dockerode is not dockerode missing.
    const inner = Object.assign(new Error("Cannot find module 'ssh2'"), { code: "MODULE_NOT_FOUND" });
    expect(() =>
      loadDockerode(() => {
        throw inner;
      }),
    ).toThrow(inner);
  });
});
