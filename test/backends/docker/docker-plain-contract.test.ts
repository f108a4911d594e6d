import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dockerClient } from "../../../sdk/backends/docker/client.js";
import { DockerDriver } from "../../../sdk/backends/docker/driver.js";
import { imageExists } from "../../../sdk/backends/docker/image.js";
import type { DockerSandbox } from "../../../sdk/backends/docker/sandbox.js";
import { uniqueId } from "../../contract/fixture.js";
import { BASE_IMAGE, dockerEngine } from "../../support/docker-engine.js";
import { dockerFixture, ROOT, runContractSuites } from "../../support/sandbox-fixtures.js";

/**
 * The plain-exec fallback (an image without python3, so no runner: one engine exec per command and the
 * shared confined sh scripts for files) against every shared contract suite, as the runner path is.
 */
const engine = await dockerEngine();
const NO_PYTHON = `${BASE_IMAGE.split(":")[0]}:no-python3`;

/** The base image with python3 taken away, made once per engine (kept for later runs). */
async function noPythonImage(): Promise<string> {
  const docker = dockerClient();
  if (await imageExists(docker, NO_PYTHON)) return NO_PYTHON;
  const c = await docker.createContainer({ Image: BASE_IMAGE, Cmd: ["sh", "-c", "rm -f /usr/bin/python3 /usr/bin/python3.* /usr/local/bin/python3*"] });
  try {
    await c.start();
    await c.wait();
    const [repo, tag] = NO_PYTHON.split(":");
    await c.commit({ repo, tag, changes: ['CMD ["sleep", "infinity"]'] });
  } finally {
    await c.remove({ force: true });
  }
  return NO_PYTHON;
}

describe.skipIf(!engine)("Docker backend, plain-exec fallback (image without python3)", () => {
  let basedir: string;
  let baseImage: string;
  const made: string[] = [];

  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-docker-plain-"));
    baseImage = await noPythonImage();
  }, 300_000);
  afterAll(async () => {
    const d = new DockerDriver({ basedir, baseImage: BASE_IMAGE });
    await Promise.all(made.map((w) => d.destroy(w).catch(() => undefined)));
    await fs.rm(basedir, { recursive: true, force: true });
  });

  it("really runs without a runner", async () => {
    const d = new DockerDriver({ basedir, baseImage, readOnlyPaths: [ROOT] });
    const w = uniqueId("dkp");
    made.push(w);
    await d.create({ workspaceId: w, managedBy: "runtime" });
    const sb = (await d.connect(w)) as DockerSandbox;
    try {
      expect((await sb.exec(["sh", "-c", "command -v python3 || echo none"])).stdout.toString()).toBe("none\n");
      expect(sb.runnerMode).toBe("plain");
    } finally {
      await sb.close();
    }
  });

  describe("contract", () => {
    runContractSuites(dockerFixture(() => ({ basedir, baseImage, track: (w) => made.push(w) })));
  });
});
