// The contract suites on ephemeral Docker workspaces: no bind mount, so every file operation runs
// inside the container (realpath-confined sh scripts) instead of through the host folder. The MCP
// suite is left out: an ephemeral workspace does not persist `.mcp` (as in the reference), which
// that suite checks byte for byte; stdio MCP over spawn is covered on the persistent fixture.
import { afterAll, describe } from "vitest";
import { DockerDriver } from "../../../sdk/backends/docker/driver.js";
import { DockerWorkspace } from "../../../sdk/backends/docker/index.js";
import { uniqueId, type WorkspaceFixture } from "../../contract/fixture.js";
import { BASE_IMAGE, dockerEngine } from "../../support/docker-engine.js";
import { ECHO_SERVER, ROOT, runContractSuites } from "../../support/sandbox-fixtures.js";

const engine = await dockerEngine();

describe.skipIf(!engine)("Docker backend, file operations through exec", () => {
  const made: string[] = [];
  afterAll(async () => {
    const d = new DockerDriver({ baseImage: BASE_IMAGE });
    await Promise.all(made.map((w) => d.destroy(w).catch(() => undefined)));
  });
  const fixture: WorkspaceFixture = {
    name: "docker-exec",
    async create(opts = {}) {
      const workspaceId = opts.workspaceId ?? uniqueId("dx");
      made.push(workspaceId);
      return new DockerWorkspace({
        workspaceId,
        baseImage: BASE_IMAGE,
        readOnlyPaths: [ROOT],
        ...(opts.defaultMcps ? { defaultMcps: opts.defaultMcps } : {}),
        ...(opts.skillPaths ? { skillPaths: opts.skillPaths } : {}),
        ...(opts.egress ? { egress: opts.egress } : {}),
      });
    },
    mcpServerCommand: () => ["node", ECHO_SERVER],
  };
  runContractSuites(fixture, { skip: ["mcp"] });
});
