import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dockerClient } from "../../../sdk/backends/docker/client.js";
import { containerName, DockerDriver } from "../../../sdk/backends/docker/driver.js";
import { DockerWorkspace } from "../../../sdk/backends/docker/index.js";
import { pauseUnlessLeased } from "../../../sdk/kit/lease.js";
import { newReplicaId } from "../../../sdk/contract/leases.js";
import { uniqueId } from "../../contract/fixture.js";
import { expectCode } from "../../contract/helpers.js";
import { BASE_IMAGE, dockerEngine } from "../../support/docker-engine.js";

/** Transparent resume: what another replica (or an operator) did to the container is undone by the next operation. */
const engine = await dockerEngine();

describe.skipIf(!engine)("Docker: operations resume a container paused or stopped under them", () => {
  let basedir: string;
  const ids: string[] = [];
  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-dkresume-test-"));
  });
  afterAll(async () => {
    const d = new DockerDriver({ basedir });
    await Promise.all(ids.map((w) => d.destroy(w).catch(() => undefined)));
    await fs.rm(basedir, { recursive: true, force: true });
  });
  const open = async () => {
    const w = uniqueId("resume");
    ids.push(w);
    const ws = new DockerWorkspace({ workspaceId: w, basedir, baseImage: BASE_IMAGE });
    await ws.initialize();
    return ws;
  };
  const state = async (w: string) => (await new DockerDriver({ basedir }).find(w))?.state;

  it("paused by someone else: concurrent operations resume it once and all succeed", async () => {
    await using ws = await open();
    const sb = ws.getBackend();
    await dockerClient().getContainer(containerName(ws.workspaceId)).pause();
    expect(await state(ws.workspaceId)).toBe("paused");
    const results = await Promise.all([sb.exec(["echo", "a"]), sb.exec(["echo", "b"]), sb.writeFile("x.txt", "x").then(() => sb.readFile("x.txt"))]);
    expect(results.map((r) => ("stdout" in r ? r.stdout.toString() : r.toString()))).toEqual(["a\n", "b\n", "x"]);
    expect(await state(ws.workspaceId)).toBe("running");
  });

  it("paused by someone else right after initialize connected: initialize resumes it and succeeds", async () => {
    const w = uniqueId("resume");
    ids.push(w);
    await using ws = new DockerWorkspace({ workspaceId: w, basedir, baseImage: BASE_IMAGE });
    // Another replica's sweep pausing between the connect and initialize's first operation.
    const connect = ws.driver.connect.bind(ws.driver);
    let paused = 0;
    ws.driver.connect = async (...args) => {
      const sandbox = await connect(...args);
      if (paused++ === 0) await dockerClient().getContainer(containerName(w)).pause();
      return sandbox;
    };
    await ws.initialize();
    expect(paused).toBe(1);
    expect(await state(w)).toBe("running");
    expect((await ws.getBackend().exec(["ls", "-d", "data", "sessions"])).stdout.toString()).toBe("data\nsessions\n");
  });

  it("stopped by someone else: the next operation starts it again", async () => {
    await using ws = await open();
    await dockerClient().getContainer(containerName(ws.workspaceId)).stop({ t: 0 });
    expect(await state(ws.workspaceId)).toBe("stopped");
    expect((await ws.getBackend().exec(["echo", "up"])).stdout.toString()).toBe("up\n");
  });

  it("really gone: the operation fails naming the workspace, nothing is recreated behind the caller", async () => {
    await using ws = await open();
    await dockerClient().getContainer(containerName(ws.workspaceId)).remove({ force: true });
    await expectCode(ws.getBackend().exec(["true"]), "not_found", new RegExp(`${ws.workspaceId}.*gone`));
    expect(await state(ws.workspaceId)).toBeUndefined();
  });

  it("replicas racing: two resumes, and a guarded pause against a replica holding a lease, end running", async () => {
    await using ws = await open();
    const w = ws.workspaceId;
    const [d1, d2] = [new DockerDriver({ basedir }), new DockerDriver({ basedir })];
    await d1.pause(w);
    await Promise.all([d1.resume(w), d2.resume(w), d2.resume(w)]);
    expect(await state(w)).toBe("running");
    // Pause and resume are idempotent.
    await Promise.all([d1.pause(w), d2.pause(w)]);
    expect(await state(w)).toBe("paused");
    await d1.resume(w);
    // Replica B holds a lease and resumes while replica A's idle sweep tries to pause.
    const [a, b] = [newReplicaId(), newReplicaId()];
    await d2.leases.renew(w, b, 60_000);
    const [outcome] = await Promise.all([pauseUnlessLeased(d1, w, { replicaId: a }), d2.resume(w)]);
    expect(outcome).toBe("kept");
    expect(await state(w)).toBe("running");
    await d2.leases.release(w, b);
    expect(await pauseUnlessLeased(d1, w, { replicaId: a })).toBe("paused");
    expect(await state(w)).toBe("paused");
  });
});
