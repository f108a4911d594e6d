import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll } from "vitest";
import { LocalWorkspace } from "../../sdk/backends/local/index.js";
import { uniqueId, type WorkspaceFixture } from "../contract/fixture.js";

/** LocalWorkspace over `<tmp>/<workspaceId>`; the tmp folder is removed after the file's tests. */
export function localFixture(): WorkspaceFixture & { base: string } {
  const base = mkdtempSync(path.join(os.tmpdir(), "agentws-local-"));
  afterAll(() => rmSync(base, { recursive: true, force: true }));
  return {
    name: "local",
    base,
    async create(opts = {}) {
      const workspaceId = opts.workspaceId ?? uniqueId();
      return new LocalWorkspace({ ...opts, workspaceId, workdir: path.join(base, workspaceId) });
    },
  };
}
