import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { REPORT, renderReport } from "../../scripts/api-report.js";

describe("public API report", () => {
  it("api/agent-workspaces.api.md matches the entry points (run `npm run api:update` after a deliberate change)", () => {
    const text = renderReport();
    expect(readFileSync(REPORT, "utf8")).toBe(text);
    // The root lists names explicitly: internal helpers stay off it.
    for (const internal of ["joinField", "toWorkspacePath", "joinRel", "expandHome", "checkRelativePath", "toMcpJson", "fromMcpJson"])
      expect(text).not.toMatch(new RegExp(`\`${internal}\``));
    for (const entry of ["agent-workspaces/local", "agent-workspaces/bubblewrap", "agent-workspaces/docker"]) expect(text).toContain(`## \`${entry}\``);
  }, 300_000); // one type-checker pass over every entry point: tens of seconds on 2 busy cores
});
