import { afterAll, describe } from "vitest";
import { OpenSandboxDriver } from "../../sdk/backends/opensandbox/driver.js";
import { OpenSandboxWorkspace } from "../../sdk/backends/opensandbox/index.js";
import { uniqueId, type WorkspaceFixture } from "../contract/fixture.js";
import { runContractSuites } from "../support/sandbox-fixtures.js";

/**
 * The shared contract suites against a real OpenSandbox deployment (with the real execd), run when
 * OPEN_SANDBOX_DOMAIN and OPEN_SANDBOX_API_KEY are set. OPEN_SANDBOX_IMAGE picks the image (default
 * python:3.11-slim; the MCP suite runs only with an image of your choice, as it needs `node`).
 */
const domain = process.env.OPEN_SANDBOX_DOMAIN;
const apiKey = process.env.OPEN_SANDBOX_API_KEY;
const missing = [!domain && "OPEN_SANDBOX_DOMAIN", !apiKey && "OPEN_SANDBOX_API_KEY"].filter(Boolean);
if (missing.length) console.warn(`[opensandbox live] skipped: ${missing.join(" and ")} not set (a real OpenSandbox deployment is needed)`);
const image = process.env.OPEN_SANDBOX_IMAGE ?? "python:3.11-slim";

describe.skipIf(missing.length > 0)("OpenSandbox live deployment", () => {
  const made: string[] = [];
  afterAll(async () => {
    const d = new OpenSandboxDriver({ domain, apiKey, image });
    for (const w of made) await d.destroy(w).catch(() => undefined);
    await d.close();
  });
  const fixture: WorkspaceFixture = {
    name: "opensandbox-live",
    async create(opts = {}) {
      const workspaceId = opts.workspaceId ?? uniqueId("ol");
      made.push(workspaceId);
      return new OpenSandboxWorkspace({
        workspaceId,
        domain,
        apiKey,
        image,
        ...(opts.defaultMcps ? { defaultMcps: opts.defaultMcps } : {}),
        ...(opts.skillPaths ? { skillPaths: opts.skillPaths } : {}),
        ...(opts.egress ? { egress: opts.egress } : {}),
      });
    },
  };
  runContractSuites(fixture, { skip: process.env.OPEN_SANDBOX_IMAGE ? [] : ["mcp"] });
});
