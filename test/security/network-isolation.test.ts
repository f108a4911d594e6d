import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import net from "node:net";
import os from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dockerClient } from "../../sdk/backends/docker/client.js";
import { DockerDriver } from "../../sdk/backends/docker/driver.js";
import type { Sandbox } from "../../sdk/sandbox.js";
import { uniqueId } from "../contract/fixture.js";
import { BASE_IMAGE, containersFor, dockerEngine } from "../support/docker-engine.js";

/**
 * Attack: a hostile agent in one Docker workspace reaches another workspace (a server there holds
 * a secret) or a service of the engine's host (listening on every address, the bridge gateway
 * included). Under the default network neither is reachable; `network: "internet"` gives outbound
 * access and still neither; only the explicit `network: "bridge"` opt-in allows both (the positive
 * control: the same probes succeed there, so a broken probe cannot pass by failing).
 */
const engine = await dockerEngine();
const SECRET = `secret-${randomBytes(8).toString("hex")}`;
const PORT = 8000;

let hostServer: net.Server;
let hostPort: number;
const drivers: [DockerDriver, string][] = [];
/** Every create started, so clean-up waits for one still running when a sibling failed (Promise.all does not). */
const creating: Promise<unknown>[] = [];

beforeAll(async () => {
  hostServer = net.createServer((s) => {
    s.on("error", () => undefined);
    s.end("hello from host\n");
  });
  await new Promise<void>((r) => hostServer.listen(0, "0.0.0.0", r));
  hostPort = (hostServer.address() as net.AddressInfo).port;
});
afterAll(async () => {
  hostServer.close();
  await Promise.allSettled(creating);
  await Promise.all(drivers.map(([d, id]) => d.destroy(id).catch(() => undefined)));
});

async function open(network?: "none" | "internet" | "bridge", id = uniqueId("net")): Promise<{ sb: Sandbox; id: string; driver: DockerDriver }> {
  const driver = new DockerDriver({ baseImage: BASE_IMAGE, ...(network ? { network } : {}) });
  drivers.push([driver, id]);
  const created = driver.create({ workspaceId: id, managedBy: "runtime" });
  creating.push(created);
  await created;
  return { sb: await driver.connect(id), id, driver };
}

/** The container's addresses on every network it has. */
async function addresses(id: string): Promise<{ ips: string[]; gateways: string[] }> {
  const info = await dockerClient().getContainer(`agentws-${id}`).inspect();
  const nets = Object.values(info.NetworkSettings.Networks ?? {});
  return { ips: nets.map((n) => n.IPAddress).filter(Boolean), gateways: nets.map((n) => n.Gateway).filter(Boolean) };
}

/** Docker networks labelled with the workspace id. */
function networksOf(id: string): Promise<{ Id: string; Name: string }[]> {
  return dockerClient().listNetworks({ filters: { label: [`agent-workspaces.workspace-id=${id}`] } });
}

/** A TCP connect from inside: "connected", or the errno name (ECONNREFUSED, EHOSTUNREACH, ETIMEDOUT...). */
async function probe(sb: Sandbox, host: string, port: number): Promise<string> {
  const py = `import errno, socket, sys
s = socket.socket(); s.settimeout(3)
try:
    s.connect((sys.argv[1], int(sys.argv[2]))); print("connected")
except socket.timeout:
    print("ETIMEDOUT")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e)))`;
  const r = await sb.exec(["python3", "-c", py, host, String(port)], { timeoutMs: 20_000 });
  return r.stdout.toString().trim() || r.stderr.toString().trim();
}

async function fetchFrom(sb: Sandbox, host: string): Promise<string> {
  const py = `import sys, urllib.request
try:
    print(urllib.request.urlopen("http://%s:${PORT}/secret.txt" % sys.argv[1], timeout=3).read().decode())
except Exception as e:
    print("failed:", type(e).__name__)`;
  return (await sb.exec(["python3", "-c", py, host], { timeoutMs: 20_000 })).stdout.toString().trim();
}

/** Workspace A serves a secret on every address it has; returns once it answers from inside A. */
async function serveSecret(sb: Sandbox): Promise<void> {
  await sb.exec(["sh", "-c", `mkdir -p /tmp/srv && printf %s ${SECRET} > /tmp/srv/secret.txt`]);
  // A long-lived process is a spawn: a command's background children die with the command.
  sb.spawn(["python3", "-m", "http.server", String(PORT), "--bind", "0.0.0.0", "--directory", "/tmp/srv"]);
  for (let i = 0; i < 100; i++) {
    if ((await fetchFrom(sb, "127.0.0.1")) === SECRET) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("the secret server in workspace A never answered");
}

/** The engine host's own addresses a container might aim at: its interfaces (docker0 and every bridge gateway included). */
function hostAddresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flat()
    .filter((i) => i && i.family === "IPv4" && !i.internal)
    .map((i) => i!.address);
}

/** The host's default gateway: an address outside the host ("the internet" for this test); reached means any answer, even a refusal. */
function defaultGateway(): string | null {
  try {
    const m = /default via (\S+)/.exec(execFileSync("ip", ["-4", "route", "show", "default"], { encoding: "utf8" }));
    return m?.[1] ?? null;
  } catch {
    return null;
  }
}
const REACHED = /^(connected|ECONNREFUSED)$/;

describe.skipIf(!engine)("Docker network isolation", () => {
  it("under the default network, workspace B cannot fetch workspace A's secret; on the shared bridge (opt-in) it can", async () => {
    const [a, b] = await Promise.all([open(), open()]);
    await serveSecret(a.sb);
    const targets = [...(await addresses(a.id)).ips, ...(await addresses(b.id)).gateways];
    for (const ip of targets) expect(await fetchFrom(b.sb, ip), `B fetching from ${ip}`).not.toContain(SECRET);
    // Nothing to aim at: the default leaves both with loopback only.
    for (const w of [a, b]) expect((await w.sb.exec(["ls", "/sys/class/net"])).stdout.toString().split(/\s+/).filter(Boolean)).toEqual(["lo"]);
    // Positive control: the same attack between two "bridge" workspaces succeeds.
    const [c, d] = await Promise.all([open("bridge"), open("bridge")]);
    await serveSecret(c.sb);
    const cIp = (await addresses(c.id)).ips[0]!;
    expect(await fetchFrom(d.sb, cIp)).toBe(SECRET);
  });

  it("with network 'internet', each workspace has its own network: B cannot fetch A's secret", async () => {
    const [a, b] = await Promise.all([open("internet"), open("internet")]);
    await serveSecret(a.sb);
    const aIps = (await addresses(a.id)).ips;
    expect(aIps.length, "A has an address on its own network").toBeGreaterThan(0);
    // Positive control: A's server answers on that address from inside A.
    expect(await fetchFrom(a.sb, aIps[0]!)).toBe(SECRET);
    for (const ip of aIps) expect(await fetchFrom(b.sb, ip), `B fetching from ${ip}`).not.toContain(SECRET);
    const [own] = await networksOf(a.id);
    expect(own, "A's network carries its workspace id").toBeTruthy();
    const info = await dockerClient().getNetwork(own!.Id).inspect();
    expect(Object.keys(info.Containers ?? {})).toHaveLength(1);
    expect(info.Options?.["com.docker.network.bridge.enable_icc"]).toBe("false");
  });

  it("a host service on every address (bridge gateways included) is unreachable from the default and from 'internet'; 'bridge' reaches it", async () => {
    const [none, internet, bridge] = await Promise.all([open(), open("internet"), open("bridge")]);
    const gateways = [...(await addresses(internet.id)).gateways, ...(await addresses(bridge.id)).gateways];
    const targets = [...new Set([...gateways, ...hostAddresses()])];
    expect(targets.length).toBeGreaterThan(0);
    for (const host of targets) {
      expect(await probe(none.sb, host, hostPort), `default -> host ${host}`).not.toMatch(REACHED);
      expect(await probe(internet.sb, host, hostPort), `internet -> host ${host}`).not.toMatch(REACHED);
    }
    // Positive control: the opt-in shared bridge reaches the host's service on its gateway.
    expect(await probe(bridge.sb, (await addresses(bridge.id)).gateways[0]!, hostPort)).toBe("connected");
    // Link-local metadata addresses are refused by the host firewall, not left to whatever answers there.
    expect(await probe(internet.sb, "169.254.169.254", 80)).toBe("EHOSTUNREACH");
  });

  it("outbound access only where the option asks for it: 'internet' reaches past the host, the default does not", async (ctx) => {
    const outside = defaultGateway();
    if (!outside) ctx.skip("this host has no default route: nothing outside to reach");
    const [none, internet] = await Promise.all([open(), open("internet")]);
    for (const port of [443, 80]) {
      const r = await probe(internet.sb, outside!, port);
      if (REACHED.test(r)) break;
      if (port === 80) expect(r, `internet -> ${outside}`).toMatch(REACHED);
    }
    expect(await probe(none.sb, outside!, 443)).not.toMatch(REACHED);
    expect(await probe(none.sb, outside!, 80)).not.toMatch(REACHED);
  });

  it("two replicas creating one 'internet' workspace at once end with one container and one network; destroy removes the network", async () => {
    const id = uniqueId("netrace");
    const replicas = [0, 1, 2].map(() => new DockerDriver({ baseImage: BASE_IMAGE, network: "internet" }));
    drivers.push([replicas[0]!, id]);
    const created = Promise.all(replicas.map((d) => d.create({ workspaceId: id, managedBy: "runtime" })));
    creating.push(created);
    await created;
    expect(await containersFor(id)).toHaveLength(1);
    const nets = await networksOf(id);
    expect(nets).toHaveLength(1);
    const info = await dockerClient().getContainer(`agentws-${id}`).inspect();
    expect(Object.keys(info.NetworkSettings.Networks ?? {})).toEqual([nets[0]!.Name]);
    await replicas[1]!.destroy(id);
    expect(await networksOf(id)).toHaveLength(0);
  });
});
