import { promises as fs } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapDriver } from "../../../sdk/backends/bubblewrap/driver.js";
import { dockerClient } from "../../../sdk/backends/docker/client.js";
import { DockerDriver } from "../../../sdk/backends/docker/driver.js";
import type { Sandbox } from "../../../sdk/sandbox.js";
import { uniqueId } from "../../contract/fixture.js";
import { BASE_IMAGE, dockerEngine } from "../../support/docker-engine.js";
import { ROOT } from "../../support/sandbox-fixtures.js";

/**
 * What a sandboxed workspace can reach: host files outside /workspace are invisible or read-only,
 * and with the network cut nothing connects out. Each "cut" check has a positive control (the
 * same probe with the network shared succeeds), so a broken probe cannot pass by failing.
 */
const engine = await dockerEngine();

let tmp: string;
let secretDir: string;
let server: net.Server;
let port: number;

beforeAll(async () => {
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-isolation-"));
  secretDir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-host-secret-"));
  await fs.writeFile(path.join(secretDir, "secret.txt"), "host secret");
  server = net.createServer((s) => {
    s.on("error", () => undefined);
    s.end("hello from host\n");
  });
  await new Promise<void>((r) => server.listen(0, "0.0.0.0", r));
  port = (server.address() as net.AddressInfo).port;
});
afterAll(async () => {
  server.close();
  await fs.rm(tmp, { recursive: true, force: true });
  await fs.rm(secretDir, { recursive: true, force: true });
});

/** Connects from inside the sandbox; prints "connected" or the error code. */
async function probeConnect(sb: Sandbox, host: string): Promise<string> {
  const js = `const s=require("net").connect(${port},${JSON.stringify(host)});s.setTimeout(3000,()=>{console.log("ETIMEDOUT");process.exit(2)});s.on("connect",()=>{console.log("connected");process.exit(0)});s.on("error",e=>{console.log(e.code);process.exit(1)})`;
  const r = await sb.exec(["node", "-e", js], { timeoutMs: 15_000 });
  return r.stdout.toString().trim() || r.stderr.toString().trim();
}

async function expectHostFilesShielded(sb: Sandbox, opts: { hostRoot: boolean }): Promise<void> {
  const secret = path.join(secretDir, "secret.txt");
  const read = await sb.exec(["cat", secret]);
  expect(read.exitCode).not.toBe(0);
  expect(read.stdout.toString()).not.toContain("host secret");
  expect((await sb.exec(["ls", secretDir])).exitCode).not.toBe(0);
  // The host's home is not mounted (a container's /root is its own image's).
  if (opts.hostRoot) expect((await sb.exec(["sh", "-c", "ls -A /root 2>/dev/null | wc -l"])).stdout.toString().trim()).toBe("0");
  // Host folders that are visible are read-only: the repo bound for tools, and (bubblewrap) the host's /usr.
  for (const target of [`${ROOT}/agentws-probe`, ...(opts.hostRoot ? ["/usr/agentws-probe"] : [])]) {
    const w = await sb.exec(["sh", "-c", `echo x > ${target}`]);
    expect(w.exitCode, `writing ${target} must fail`).not.toBe(0);
  }
  // Whatever a process writes outside /workspace never reaches the host.
  await sb.exec(["sh", "-c", "echo x > /etc/agentws-probe; echo x > /agentws-probe"]);
  for (const p of ["/etc/agentws-probe", "/agentws-probe", "/usr/agentws-probe", path.join(ROOT, "agentws-probe")]) await expect(fs.stat(p)).rejects.toThrow();
  // /workspace itself is writable.
  expect((await sb.exec(["sh", "-c", "echo ok > /workspace/inside.txt && cat /workspace/inside.txt"])).stdout.toString()).toBe("ok\n");
}

describe("Bubblewrap isolation", () => {
  const open = async (network: "none" | "host") => {
    const d = new BubblewrapDriver({ basedir: tmp, network, readOnlyPaths: [ROOT] });
    const w = uniqueId("iso");
    await d.create({ workspaceId: w, managedBy: "runtime" });
    return d.connect(w);
  };

  it("hides host files outside /workspace and keeps the visible ones read-only", async () => {
    const sb = await open("none");
    try {
      await expectHostFilesShielded(sb, { hostRoot: true });
      // Outside /workspace and /tmp the sandbox's own root is read-only too.
      expect((await sb.exec(["sh", "-c", "echo x > /etc/probe"])).exitCode).not.toBe(0);
      // The host's /tmp is not the sandbox's /tmp.
      expect((await sb.exec(["ls", tmp])).exitCode).not.toBe(0);
    } finally {
      await sb.close();
    }
  });

  it("with the network cut, connecting out fails; shared, the same probe connects", async () => {
    const cut = await open("none");
    const shared = await open("host");
    try {
      expect(await probeConnect(shared, "127.0.0.1")).toBe("connected");
      expect(await probeConnect(cut, "127.0.0.1")).toMatch(/^E[A-Z]+$/);
      const external = Object.values(os.networkInterfaces())
        .flat()
        .find((i) => i && i.family === "IPv4" && !i.internal)?.address;
      if (external) {
        expect(await probeConnect(shared, external)).toBe("connected");
        expect(await probeConnect(cut, external)).toMatch(/^E[A-Z]+$/);
      }
      expect((await cut.exec(["sh", "-c", "ls /sys/class/net 2>/dev/null || cat /proc/net/dev"])).stdout.toString()).not.toMatch(/eth|ens|enp/);
    } finally {
      await Promise.all([cut.close(), shared.close()]);
    }
  });
});

describe.skipIf(!engine)("Docker isolation", () => {
  const made: DockerDriver[] = [];
  const ids: string[] = [];
  const open = async (network: "none" | "bridge") => {
    const d = new DockerDriver({ basedir: tmp, network, baseImage: BASE_IMAGE, readOnlyPaths: [ROOT] });
    const w = uniqueId("iso");
    made.push(d);
    ids.push(w);
    await d.create({ workspaceId: w, managedBy: "runtime" });
    return d.connect(w);
  };
  afterAll(async () => {
    await Promise.all(ids.map((w, i) => made[i]!.destroy(w).catch(() => undefined)));
  });

  it("hides host files outside /workspace and keeps the bound ones read-only", async () => {
    const sb = await open("none");
    await expectHostFilesShielded(sb, { hostRoot: false });
    expect((await fs.readFile(path.join(tmp, ids[0]!, "inside.txt"), "utf8")).trim()).toBe("ok");
  });

  it("with the network cut, connecting out fails; on the bridge, the same probe connects", async () => {
    const bridged = await open("bridge");
    const networks = (await dockerClient().getContainer(bridged.containerId).inspect()).NetworkSettings.Networks;
    const gateway = networks.bridge?.Gateway;
    expect(gateway, "the bridge network has a gateway").toBeTruthy();
    const cut = await open("none");
    expect(await probeConnect(bridged, gateway!)).toBe("connected");
    expect(await probeConnect(cut, gateway!)).toMatch(/^E[A-Z]+$/);
    expect(await probeConnect(cut, "127.0.0.1")).toMatch(/^E[A-Z]+$/);
  });
});
