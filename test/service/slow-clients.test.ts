/**
 * Issue 26 item 7: slow clients no longer hold connections for minutes, and the number of
 * connections is capped. Small configured limits keep this short; on main there were no such
 * options (headers had 66 s, a whole request 300 s, and no cap).
 */
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { LocalWorkspaceManager } from "../../sdk/backends/local/index.js";
import { connectionFlags } from "../../sdk/cli/serve.js";
import { createApp, newToken, startService, SqliteSessionStore, type ConnectionLimits, type RunningService } from "../../sdk/service/index.js";

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

async function serve(connections: Partial<ConnectionLimits>): Promise<{ service: RunningService; token: string }> {
  const root = await mkdtemp(path.join(tmpdir(), "svc-slow-"));
  const manager = new LocalWorkspaceManager({ basedir: path.join(root, "ws"), ttl: 600 });
  const store = new SqliteSessionStore(path.join(root, "sessions.db"));
  const { token, hash } = newToken();
  await store.addTokenHash("alice", hash);
  const { app, dispose } = createApp({ workspaceManager: manager, sessionStore: store, processMetrics: false });
  const service = await startService({ app, connections, onClose: async () => (dispose(), await manager[Symbol.asyncDispose](), await store.close()) });
  cleanup.push(async () => {
    await service.close();
    await rm(root, { recursive: true, force: true });
  });
  return { service, token };
}

/** A raw connection that records whether the server closed it and what it answered. */
function connect(port: number): Promise<{ socket: net.Socket; closed: () => boolean; received: () => string }> {
  return new Promise((ok, fail) => {
    let closed = false;
    let received = "";
    const socket = net.connect(port, "127.0.0.1", () => ok({ socket, closed: () => closed, received: () => received }));
    socket.on("data", (d) => (received += d.toString()));
    socket.on("close", () => (closed = true));
    socket.on("error", (e) => (closed ? undefined : fail(e)));
    cleanup.push(async () => void socket.destroy());
  });
}

async function until(what: string, check: () => boolean | Promise<boolean>, tries = 600): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`gave up waiting for ${what}`);
}

const healthy = async (url: string) => (await fetch(`${url}/healthz`, { headers: { connection: "close" } })).status === 200;

describe("slow clients", () => {
  it("closes connections that dribble their headers a byte at a time, while answering real requests", { timeout: 30_000 }, async () => {
    const { service } = await serve({ headersTimeoutMs: 1000, maxConnections: 64 });
    const dribblers = await Promise.all(Array.from({ length: 30 }, () => connect(service.port)));
    const head = "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
    let i = 0;
    const drip = setInterval(() => {
      for (const d of dribblers) if (!d.closed()) d.socket.write(head[i] ?? "a");
      i++;
    }, 50);
    try {
      for (let n = 0; n < 5; n++) expect(await healthy(service.url)).toBe(true);
      await until("every dribbling connection closed by the server", () => dribblers.every((d) => d.closed()));
      expect(dribblers.some((d) => d.received().includes("200 OK"))).toBe(false);
      expect(await healthy(service.url)).toBe(true);
    } finally {
      clearInterval(drip);
    }
  });

  it("keeps an idle kept-alive connection usable beyond the headers timeout", { timeout: 30_000 }, async () => {
    const { service } = await serve({ headersTimeoutMs: 300, keepAliveTimeoutMs: 5000 });
    const c = await connect(service.port);
    const request = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";
    c.socket.write(request);
    await until("the first answer", () => c.received().includes("200 OK"));
    await new Promise((r) => setTimeout(r, 1200));
    c.socket.write(request);
    await until("the second answer", () => c.received().split("200 OK").length === 3 || c.closed());
    expect(c.closed()).toBe(false);
  });

  it("caps open connections: the ones over the cap are closed, and freed slots serve again", { timeout: 30_000 }, async () => {
    const { service } = await serve({ headersTimeoutMs: 60_000, maxConnections: 10 });
    const idle = await Promise.all(Array.from({ length: 25 }, () => connect(service.port)));
    // Headers have a minute: any connection closed now was closed for the cap.
    await until("15 connections refused", () => idle.filter((c) => c.closed()).length === 15);
    await new Promise((r) => setTimeout(r, 300));
    expect(idle.filter((c) => c.closed())).toHaveLength(15);
    await expect(healthy(service.url)).rejects.toThrow();
    for (const c of idle) c.socket.destroy();
    await until("a real request answered once slots are free", () => healthy(service.url).catch(() => false));
  });

  it("cuts a request body slower than the minimum rate; an honest slow body goes through", { timeout: 30_000 }, async () => {
    const { service, token } = await serve({ minBodyBytesPerSecond: 2000, bodyRateWindowMs: 400 });
    const body = (n: number) => JSON.stringify({ agentId: "slow" }) + " ".repeat(n);
    const post = (length: number) =>
      `POST /sessions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

    const drip = await connect(service.port);
    const dripped = body(5000);
    drip.socket.write(post(dripped.length));
    let at = 0;
    const dripper = setInterval(() => !drip.closed() && drip.socket.write(dripped[at++]!), 50);
    try {
      await until("the dribbled body's connection closed", () => drip.closed());
    } finally {
      clearInterval(dripper);
    }
    expect(drip.received()).not.toContain("201");
    expect(at).toBeLessThan(dripped.length);

    // About 6 KB/s, three times the minimum: answered.
    const honest = await connect(service.port);
    const sent = body(12_000);
    honest.socket.write(post(sent.length));
    for (let p = 0; p < sent.length; p += 600) {
      honest.socket.write(sent.slice(p, p + 600));
      await new Promise((r) => setTimeout(r, 100));
    }
    await until("the honest body's answer", () => honest.received().includes("\r\n\r\n") || honest.closed());
    expect(honest.received()).toMatch(/^HTTP\/1\.1 201/);
  });

  it("refuses nonsensical limits, naming the option", async () => {
    await expect(serve({ maxConnections: 0 })).rejects.toMatchObject({ code: "invalid_argument", field: "connections.maxConnections" });
    await expect(serve({ headersTimeoutMs: 5000, requestTimeoutMs: 1000 })).rejects.toMatchObject({ field: "connections.requestTimeoutMs" });
  });

  it("takes the limits from `agentws serve` flags", () => {
    expect(connectionFlags({ "max-connections": "200", "headers-timeout": "2.5", "keep-alive-timeout": "30", "min-body-rate": "4096" })).toEqual({
      maxConnections: 200,
      headersTimeoutMs: 2500,
      keepAliveTimeoutMs: 30_000,
      minBodyBytesPerSecond: 4096,
    });
    expect(connectionFlags({})).toEqual({});
    expect(() => connectionFlags({ "max-connections": "-1" })).toThrow(/--max-connections/);
  });
});
