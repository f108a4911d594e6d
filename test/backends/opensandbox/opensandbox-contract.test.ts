import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe } from "vitest";
import { OpenSandboxDriver } from "../../../sdk/backends/opensandbox/driver.js";
import { OpenSandboxWorkspace } from "../../../sdk/backends/opensandbox/index.js";
import { uniqueId, type WorkspaceFixture } from "../../contract/fixture.js";
import { OPENSANDBOX_TEST_IMAGE, openSandboxServer } from "../../support/opensandbox-server.js";
import { runContractSuites } from "../../support/sandbox-fixtures.js";

/** The shared workspace contract suites on OpenSandbox, through the real server (scripts/opensandbox-server.sh). */
const server = await openSandboxServer();

describe.skipIf(!server)("OpenSandbox backend: contract through the real server", () => {
  let basedir: string;
  const made: string[] = [];
  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-osb-contract-"));
  });
  afterAll(async () => {
    const d = new OpenSandboxDriver({ basedir, image: OPENSANDBOX_TEST_IMAGE });
    await Promise.all(made.map((w) => d.destroy(w).catch(() => undefined)));
    await d.close();
    await fs.rm(basedir, { recursive: true, force: true });
  });
  const fixture: WorkspaceFixture = {
    name: "opensandbox",
    async create(opts = {}) {
      const workspaceId = opts.workspaceId ?? uniqueId("os");
      made.push(workspaceId);
      return new OpenSandboxWorkspace({
        workspaceId,
        basedir,
        image: OPENSANDBOX_TEST_IMAGE,
        // Files live in the bind mount, so a reopened workspace gets them back; removing sandboxes on
        // close keeps the server's listing short on a busy engine (pause is covered in opensandbox.test.ts).
        teardown: "destroy",
        ...(opts.defaultMcps ? { defaultMcps: opts.defaultMcps } : {}),
        ...(opts.skillPaths ? { skillPaths: opts.skillPaths } : {}),
        ...(opts.egress ? { egress: opts.egress } : {}),
      });
    },
  };
  runContractSuites(fixture);
});
