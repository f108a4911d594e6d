import { execFile, spawn } from "node:child_process";
import { promises as fs } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RunnerClient, RunnerFiles } from "../../../sdk/kit/runner/index.js";
import { expectConcurrentCallsApart, expectEveryByteAndABigFile } from "../../support/runner-channel-checks.js";
import { httpGatewayScript, startHttpRunner, type HttpRunnerEndpoint } from "../../../sdk/kit/runner/http-channel.js";

const run = promisify(execFile);

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The gateway runs on this host as it would in a sandbox: started by its own script, reached over loopback. */
describe("runner over the HTTP gateway", () => {
  let home: string;
  let root: string;
  let ep: HttpRunnerEndpoint;
  let gatewayPid: number;
  const clients: RunnerClient[] = [];
  const open = async () => {
    const c = new RunnerClient(startHttpRunner(ep));
    clients.push(c);
    await c.ready;
    return c;
  };

  beforeAll(async () => {
    const base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "agentws-http-")));
    home = path.join(base, "home");
    root = path.join(base, "root");
    const port = await freePort();
    const script = httpGatewayScript({ home, port, root });
    const { stdout } = await run("sh", ["-c", script]);
    const token = stdout.trim();
    expect(token).toMatch(/^[0-9a-f]{32}$/);
    ep = { url: `http://127.0.0.1:${port}/proxy/${port}`, token };
    gatewayPid = Number(await fs.readFile(path.join(home, "gateway.pid"), "utf8"));
    // A second start (another replica) finds it running and answers the same token.
    expect((await run("sh", ["-c", script])).stdout.trim()).toBe(token);
    expect(Number(await fs.readFile(path.join(home, "gateway.pid"), "utf8"))).toBe(gatewayPid);
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.stop()));
    if (gatewayPid && alive(gatewayPid)) process.kill(gatewayPid, "SIGKILL");
    await fs.rm(path.dirname(home), { recursive: true, force: true });
  });

  it("carries every byte value both ways, and big files in one piece", async () => {
    const client = await open();
    await expectEveryByteAndABigFile(client, new RunnerFiles(async () => ({ client })), root);
  });

  it("multiplexes concurrent calls, on several channels at once", async () => {
    const [a, b] = await Promise.all([open(), open()]);
    expect(a.pid).not.toBe(b.pid);
    await expectConcurrentCallsApart((i) => (i % 2 ? a : b));
  });

  it("refuses a wrong token and a forged channel id, and serves the right one after", async () => {
    const wrong = new RunnerClient(startHttpRunner({ ...ep, token: "0".repeat(32) }));
    await expect(wrong.ready).rejects.toThrow(/403/);
    const res = await fetch(`${ep.url}/c/${"a".repeat(32)}/in`, { method: "POST", headers: { "x-agentws-token": ep.token }, body: "x" });
    expect(res.status).toBe(404);
    const ok = await open();
    expect((await ok.exec({ argv: ["true"], cwd: "", env: {}, maxOutputBytes: 10 })).exitCode).toBe(0);
  });

  it("ends a channel's runner and its commands when the host dies without closing it", async () => {
    const marker = path.join(root, "sleeper.pid");
    const child = spawn(process.execPath, ["--import", "tsx", path.resolve("test/support/http-runner-child.ts")], {
      env: { ...process.env, AGENTWS_HTTP_EP: JSON.stringify(ep), AGENTWS_MARKER: marker },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let said = "";
    child.stdout.on("data", (c: Buffer) => (said += c.toString()));
    await until("the child's runner", async () => /^\d+\n/.test(said) && (await fs.readFile(marker, "utf8").catch(() => "")).trim() !== "", 30_000);
    const runnerPid = Number(said.trim());
    const sleeper = Number((await fs.readFile(marker, "utf8")).trim());
    expect(alive(runnerPid) && alive(sleeper)).toBe(true);
    child.kill("SIGKILL");
    await until("the runner and its command to end", () => !alive(runnerPid) && !alive(sleeper));
  });

  it("bounds the connections it serves at once: a flood of idle ones costs no thread each, and service resumes after", async () => {
    const port = Number(new URL(ep.url).port);
    const flood = await Promise.all(
      Array.from(
        { length: 300 },
        () =>
          new Promise<net.Socket>((resolve) => {
            const s = net.connect(port, "127.0.0.1", () => resolve(s));
            s.on("error", () => resolve(s));
          }),
      ),
    );
    await new Promise((r) => setTimeout(r, 500));
    const threads = Number(/^Threads:\s+(\d+)/m.exec(await fs.readFile(`/proc/${gatewayPid}/status`, "utf8"))![1]);
    expect(threads).toBeLessThan(140);
    for (const s of flood) s.destroy();
    await until(
      "the gateway to serve again",
      async () =>
        (await fetch(`${ep.url}/ping`, { headers: { "x-agentws-token": ep.token } }).then(
          (r) => r.status,
          () => 0,
        )) === 200,
    );
    const c = await open();
    expect((await c.exec({ argv: ["true"], cwd: "", env: {}, maxOutputBytes: 10 })).exitCode).toBe(0);
  });

  it("a runner killed in the middle of a big write leaves the old file whole", async () => {
    const t = startHttpRunner(ep);
    const client = new RunnerClient(t);
    await client.ready;
    const files = new RunnerFiles(async () => ({ client }));
    const old = Buffer.alloc(256 * 1024, 1);
    await files.writeFile("keep.bin", old);
    const writing = files.writeFile("keep.bin", Buffer.alloc(12 * 1024 * 1024, 2)).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 30));
    process.kill(t.runnerPid()!, "SIGKILL");
    expect(await writing).toBeInstanceOf(Error);
    expect((await fs.readFile(path.join(root, "keep.bin"))).equals(old)).toBe(true);
    await client.exited;
  });
});

describe("the HTTP gateway's start", () => {
  it("replaces an older gateway holding the port, and leaves alone a process that only reuses a pid file's pid", async () => {
    const base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "agentws-http-old-")));
    const home = path.join(base, "home");
    const root = path.join(base, "root");
    const port = await freePort();
    const kids: number[] = [];
    try {
      // An older version's gateway: its command line names <home>/gateway-<version>.py, and it holds the port.
      await fs.mkdir(home, { recursive: true });
      const older = path.join(home, "gateway-0123456789abcdef.py");
      await fs.writeFile(
        older,
        `import socket, time\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(("0.0.0.0", ${port}))\ns.listen(1)\ntime.sleep(600)\n`,
      );
      const old = spawn("python3", [older], { stdio: "ignore" });
      kids.push(old.pid!);
      await until(
        "the older gateway to listen",
        () =>
          new Promise<boolean>((r) =>
            net
              .connect(port, "127.0.0.1")
              .once("connect", function (this: net.Socket) {
                this.destroy();
                r(true);
              })
              .once("error", () => r(false)),
          ),
      );
      await fs.writeFile(path.join(home, "gateway.pid"), `${old.pid}\n`);
      await fs.writeFile(path.join(home, "gateway.token"), "f".repeat(32));
      const script = httpGatewayScript({ home, port, root });
      const first = (await run("sh", ["-c", script])).stdout.trim();
      expect(first).toMatch(/^[0-9a-f]{32}$/);
      expect(first).not.toBe("f".repeat(32));
      await until("the older gateway to be gone", () => old.exitCode !== null || old.signalCode !== null);
      const g1 = Number(await fs.readFile(path.join(home, "gateway.pid"), "utf8"));
      kids.push(g1);
      const ping = (token: string) => fetch(`http://127.0.0.1:${port}/ping`, { headers: { "x-agentws-token": token } }).then((r) => r.status);
      expect(await ping(first)).toBe(200);

      // The gateway died and its pid file now names some other process (a reused pid): that one lives on.
      process.kill(g1, "SIGKILL");
      await until(
        "the gateway to be gone",
        () =>
          !alive(g1) ||
          fs.readFile(`/proc/${g1}/stat`, "utf8").then(
            (s) => / Z /.test(s),
            () => true,
          ),
      );
      const bystander = spawn("sleep", ["600"], { stdio: "ignore" });
      kids.push(bystander.pid!);
      await fs.writeFile(path.join(home, "gateway.pid"), `${bystander.pid}\n`);
      const second = (await run("sh", ["-c", script])).stdout.trim();
      expect(second).toMatch(/^[0-9a-f]{32}$/);
      expect(second).not.toBe(first);
      expect(alive(bystander.pid!)).toBe(true);
      const g2 = Number(await fs.readFile(path.join(home, "gateway.pid"), "utf8"));
      kids.push(g2);
      expect(g2).not.toBe(bystander.pid);
      expect(await ping(second)).toBe(200);
    } finally {
      for (const k of kids) if (alive(k)) process.kill(k, "SIGKILL");
      await fs.rm(base, { recursive: true, force: true });
    }
  });
});
