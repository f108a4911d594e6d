import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapWorkspace } from "../../sdk/backends/bubblewrap/index.js";
import { DockerWorkspace } from "../../sdk/backends/docker/index.js";
import { LocalWorkspace } from "../../sdk/backends/local/index.js";
import type { Logger } from "../../sdk/logger.js";
import { newToken, serveFleet, type ServedFleet } from "../../sdk/service/index.js";
import { EgressGuard, type EgressPolicy } from "../../sdk/util/egress.js";
import type { Workspace } from "../../sdk/workspace/workspace.js";
import { uniqueId } from "../contract/fixture.js";
import { BASE_IMAGE, dockerEngine } from "../support/docker-engine.js";

/**
 * Attack (issue 25, item 8): an agent writes `.mcp` with its own Write tool, pointing HTTP MCP
 * servers at the service host's loopback (a listener standing in for an internal admin API, which
 * answers as a working MCP server whose tool descriptions carry a canary), the cloud metadata
 * address, and loopback spelled as a decimal number, as IPv4-mapped IPv6 and as a name. After a
 * reopen (restart, TTL eviction) the host lists the MCP servers, their tools and the service's MCP
 * endpoint: the listener must see no connection at all, every refusal names the host, and the
 * canary appears nowhere. An operator's allowlist lets a listed server through (the positive
 * control: the same server answers then), and a redirect from an allowed server to an unlisted one
 * reaches nothing.
 */
const engine = await dockerEngine();
const CANARY = `canary-${randomBytes(10).toString("hex")}`;
const AGENT = "agent-x";
const SESSION = "session-1";

interface Listener {
  port: number;
  url: string;
  /** TCP connections accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

/** Counts connections before any byte is read, and answers whatever `handle` says. */
async function listen(handle: http.RequestListener): Promise<Listener> {
  let connections = 0;
  const server = http.createServer(handle);
  server.on("connection", () => void connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    url: `http://127.0.0.1:${port}/mcp`,
    get connections() {
      return connections;
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A working stateless MCP server whose tool names the canary: what the agent hopes to read back. */
function canaryServer(): http.RequestListener {
  return async (req, res) => {
    try {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const text = Buffer.concat(chunks).toString("utf8");
      const mcp = new McpServer({ name: CANARY, version: "1.0.0" });
      mcp.registerTool("internal", { description: `internal admin data: ${CANARY}` }, async () => ({ content: [{ type: "text", text: CANARY }] }));
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      await mcp.connect(transport);
      await transport.handleRequest(req, res, text ? JSON.parse(text) : undefined);
    } catch (e) {
      if (!res.headersSent) res.writeHead(500).end(`${CANARY} ${String(e)}`);
    }
  };
}

/** A `.mcp` entry as the reference writes it. */
const entry = (name: string, url: string, stateful = false) => ({
  name,
  is_stateful: stateful,
  mcp_config: { type: "http_mcp", url, headers: null, timeout: 5.0 },
  enable_tools: null,
  disable_tools: null,
  execution_timeout: null,
  stream_progress: false,
});

/** Every loopback disguise the agent tries, and the host each refusal must name. */
function planted(port: number): Array<{ name: string; url: string; host: string; stateful?: boolean }> {
  return [
    { name: "plain", url: `http://127.0.0.1:${port}/mcp`, host: "127.0.0.1" },
    { name: "stateful", url: `http://127.0.0.1:${port}/mcp`, host: "127.0.0.1", stateful: true },
    { name: "decimal", url: `http://2130706433:${port}/mcp`, host: "127.0.0.1" },
    { name: "mapped", url: `http://[::ffff:127.0.0.1]:${port}/mcp`, host: "[::ffff:7f00:1]" },
    { name: "byname", url: `http://localhost:${port}/mcp`, host: "localhost" },
    { name: "metadata", url: "http://169.254.169.254/latest/meta-data/iam/security-credentials/", host: "169.254.169.254" },
    { name: "gcpmeta", url: "http://metadata.google.internal/computeMetadata/v1/", host: "metadata.google.internal" },
  ];
}

function mcpFile(port: number, sessionId = SESSION): string {
  return JSON.stringify({ version: 2, mcps: { [AGENT]: { [sessionId]: planted(port).map((p) => entry(p.name, p.url, p.stateful)) } } }, null, 2);
}

function recordingLogger(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const keep = (msg: string, fields?: Record<string, unknown>) => void lines.push(`${msg} ${fields ? JSON.stringify(fields) : ""}`);
  return { lines, debug: keep, info: keep, warn: keep, error: keep };
}

async function rejection(p: Promise<unknown>): Promise<Error & { code?: string }> {
  return p.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: unknown) => e as Error & { code?: string },
  );
}

let canary: Listener;
beforeAll(async () => {
  canary = await listen(canaryServer());
});
afterAll(async () => {
  await canary?.close();
});

/**
 * The agent plants `.mcp` through the workspace's Write tool; the workspace is reopened over the
 * same storage (as after a restart or a TTL eviction) and its MCP servers listed and used.
 */
async function plantAndReopen(open: (logger?: Logger) => Workspace): Promise<void> {
  const before = canary.connections;
  const first = open();
  await first.initialize();
  try {
    const write = first.listTools().find((t) => t.name === "Write")!;
    const wrote = await write.execute({ file_path: ".mcp", content: mcpFile(canary.port) });
    expect(wrote.ok, wrote.output).toBe(true);
  } finally {
    await first.close();
  }
  const logger = recordingLogger();
  const again = open(logger);
  await again.initialize();
  const seen: string[] = [];
  const failures = new Map<string, { list: Error & { code?: string }; call: Error & { code?: string } }>();
  let listed: string[];
  try {
    const handles = await again.listMcps({ agentId: AGENT, sessionId: SESSION });
    listed = handles.map((h) => h.name);
    for (const h of handles) {
      // Whatever comes back (tools, results, errors) is what a model would read.
      const outcome = async (p: Promise<unknown>) =>
        p.then(
          (v) => void seen.push(JSON.stringify(v)),
          (e: unknown) => {
            seen.push(String((e as Error).message), String((e as Error).stack), JSON.stringify(e));
            return e as Error & { code?: string };
          },
        );
      const list = await outcome(h.listTools());
      const call = await outcome(h.callTool("internal"));
      if (list && call) failures.set(h.name, { list, call });
    }
  } finally {
    await again.close();
  }
  seen.push(...logger.lines);
  expect(canary.connections - before, "the planted .mcp made the host connect to its loopback listener").toBe(0);
  expect(seen.join("\n"), "the listener's reply reached a result or an error").not.toContain(CANARY);
  // The stateful one connects when listed: refused, so skipped with a warning naming the host.
  expect(listed).not.toContain("stateful");
  expect(logger.lines.join("\n")).toMatch(/MCP 'stateful'.*connection to '127\.0\.0\.1' refused by the egress policy/);
  for (const p of planted(canary.port).filter((x) => !x.stateful)) {
    const f = failures.get(p.name);
    expect(f, `${p.name} was not refused`).toBeDefined();
    expect(f!.list.code, `${p.name}: ${f!.list.message}`).toBe("forbidden");
    expect(f!.list.message).toContain(`'${p.host}'`);
    expect(f!.list.message).toContain(`MCP server '${p.name}'`);
    expect(f!.call.code).toBe("forbidden");
  }
}

describe("a planted .mcp never makes the host connect to loopback, metadata or private addresses", () => {
  let basedir: string;
  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-egress-"));
  });
  afterAll(async () => {
    await fs.rm(basedir, { recursive: true, force: true });
  });

  it("Local", async () => {
    const workdir = path.join(basedir, "local");
    await plantAndReopen((logger) => new LocalWorkspace({ workdir, ...(logger ? { logger } : {}) }));
  });

  it("Bubblewrap", async () => {
    const workspaceId = uniqueId("egress");
    await plantAndReopen((logger) => new BubblewrapWorkspace({ workspaceId, basedir, ...(logger ? { logger } : {}) }));
  });

  it.skipIf(!engine)("Docker", async () => {
    const workspaceId = uniqueId("egress");
    let last: DockerWorkspace | undefined;
    try {
      await plantAndReopen((logger) => (last = new DockerWorkspace({ workspaceId, basedir, baseImage: BASE_IMAGE, ...(logger ? { logger } : {}) })));
    } finally {
      await last?.driver.destroy(workspaceId, { deleteData: true }).catch(() => undefined);
    }
  });
});

describe("the service (agentws serve's path): an agent plants .mcp through the MCP endpoint", () => {
  let root: string;
  let served: ServedFleet;
  let token: string;
  beforeAll(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-egress-svc-"));
    served = await serveFleet({ backend: "local", basedir: path.join(root, "ws"), store: path.join(root, "sessions.db"), port: 0, hostname: "127.0.0.1" });
    const t = newToken();
    await served.store.addTokenHash("mallory", t.hash);
    token = t.token;
  });
  afterAll(async () => {
    await served?.service.close();
    await fs.rm(root, { recursive: true, force: true });
  });

  const api = (method: string, route: string, body?: unknown) =>
    fetch(`${served.service.url}${route}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const endpoint = async (sessionId: string) => {
    const client = new Client({ name: "agent", version: "1" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${served.service.url}/sessions/${sessionId}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    return client;
  };

  it("listing, tools/list and tool calls after a reopen reach nothing, name the host, and never show the reply", async () => {
    const before = canary.connections;
    const session = (await (await api("POST", "/sessions", { agentId: AGENT })).json()) as { sessionId: string; workspaceId: string };
    const agent = await endpoint(session.sessionId);
    const wrote = await agent.callTool({ name: "Write", arguments: { file_path: ".mcp", content: mcpFile(canary.port, session.sessionId) } });
    expect(wrote.isError).toBeFalsy();
    await agent.close();
    // A TTL eviction or a restart: the next request reopens the workspace, which reads .mcp again.
    await served.manager.close(session.workspaceId);

    const seen: string[] = [];
    const listed = await api("GET", `/sessions/${session.sessionId}/workspace/mcp`);
    const servers = (await listed.json()) as Array<{ name: string; isHealthy: boolean; error?: string }>;
    seen.push(JSON.stringify(servers));
    const again = await endpoint(session.sessionId);
    const tools = await again.listTools().then(
      (v) => JSON.stringify(v),
      (e: unknown) => String((e as Error).message),
    );
    seen.push(tools);
    await again.close();
    // An API caller registering a stateful server on loopback is refused at once (403), nothing recorded.
    const added = await api("POST", `/sessions/${session.sessionId}/workspace/mcp`, {
      name: "callers",
      stateful: true,
      transport: { type: "http", url: canary.url },
    });
    const problem = (await added.json().catch(() => ({}))) as { title?: string; detail?: string };
    seen.push(JSON.stringify(problem));

    expect(canary.connections - before, "the service host connected where the agent or caller pointed it").toBe(0);
    expect(seen.join("\n"), "the listener's reply reached a response").not.toContain(CANARY);
    expect(listed.status).toBe(200);
    for (const p of planted(canary.port).filter((x) => !x.stateful)) {
      const s = servers.find((x) => x.name === p.name);
      expect(s, p.name).toMatchObject({ isHealthy: false });
      expect(s!.error).toContain(`'${p.host}'`);
      expect(s!.error).toContain("egress policy");
    }
    expect(tools).toContain("refused by the egress policy");
    expect(added.status).toBe(403);
    expect(problem).toMatchObject({ title: "forbidden" });
    expect(problem.detail).toContain("'127.0.0.1'");
  });
});

describe("the service's allowlist (serveFleet's egress, what `agentws serve --egress-allow` sets)", () => {
  it("lets a caller register a listed loopback server, which then answers", async () => {
    const root = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-egress-svc-allow-"));
    const served = await serveFleet({
      backend: "local",
      basedir: path.join(root, "ws"),
      store: path.join(root, "sessions.db"),
      port: 0,
      egress: { allow: [`127.0.0.1:${canary.port}`] },
    });
    try {
      const t = newToken();
      await served.store.addTokenHash("olivia", t.hash);
      const api = (method: string, route: string, body?: unknown) =>
        fetch(`${served.service.url}${route}`, {
          method,
          headers: { authorization: `Bearer ${t.token}`, "content-type": "application/json" },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      const session = (await (await api("POST", "/sessions", { agentId: AGENT })).json()) as { sessionId: string };
      const added = await api("POST", `/sessions/${session.sessionId}/workspace/mcp`, {
        name: "internal",
        stateful: true,
        transport: { type: "http", url: canary.url },
      });
      expect(added.status).toBe(201);
      const servers = (await (await api("GET", `/sessions/${session.sessionId}/workspace/mcp`)).json()) as Array<{ name: string; isHealthy: boolean }>;
      expect(servers).toEqual([expect.objectContaining({ name: "internal", isHealthy: true })]);
    } finally {
      await served.service.close();
      await fs.rm(root, { recursive: true, force: true });
    }
  });
});

describe("the allowlist", () => {
  let basedir: string;
  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-egress-allow-"));
  });
  afterAll(async () => {
    await fs.rm(basedir, { recursive: true, force: true });
  });

  const open = async (egress: EgressPolicy, url: string) => {
    const ws = new LocalWorkspace({
      workdir: path.join(basedir, uniqueId("allow")),
      egress,
      defaultMcps: [{ name: "internal", transport: { type: "http", url } }],
    });
    await ws.initialize();
    return ws;
  };

  it("lets a listed loopback server through (address and port, or name), and only that port", async () => {
    const cases: Array<[EgressPolicy, string]> = [
      [{ allow: [`127.0.0.1:${canary.port}`] }, canary.url],
      [{ allow: ["localhost"] }, `http://localhost:${canary.port}/mcp`],
      [{ allow: ["127.0.0.0/8"] }, `http://2130706433:${canary.port}/mcp`],
    ];
    for (const [egress, url] of cases) {
      const ws = await open(egress, url);
      try {
        const [h] = await ws.listMcps();
        const tools = await h!.listTools();
        expect(tools.map((t) => t.name)).toEqual(["mcp__internal__internal"]);
        expect((await h!.callTool("internal")).output).toBe(CANARY);
      } finally {
        await ws.close();
      }
    }
    const before = canary.connections;
    const other = await open({ allow: [`127.0.0.1:${canary.port + 1}`] }, canary.url);
    try {
      const [h] = await other.listMcps();
      expect((await rejection(h!.listTools())).code).toBe("forbidden");
    } finally {
      await other.close();
    }
    expect(canary.connections - before).toBe(0);
  });

  it("allowPrivate lets loopback through for local development, never the metadata address", async () => {
    const ws = await open({ allowPrivate: true }, canary.url);
    try {
      const [h] = await ws.listMcps();
      expect((await h!.callTool("internal")).output).toBe(CANARY);
    } finally {
      await ws.close();
    }
    const guard = new EgressGuard({ allowPrivate: true });
    const e = await rejection(guard.check("http://169.254.169.254/latest/meta-data/"));
    expect(e).toMatchObject({ code: "forbidden" });
    expect(e.message).toContain("'169.254.169.254'");
    expect(e.message).toContain("cloud metadata");
  });

  it("a redirect from an allowed server to an unlisted one reaches nothing (the MCP transport and the guard's own fetch)", async () => {
    const target = canary;
    // 302 for GET, 307 for POST (so the positive control's POST stays a POST: a GET would open an endless SSE stream).
    const redirector = await listen((req, res) => void res.writeHead(req.method === "POST" ? 307 : 302, { location: target.url }).end());
    const before = target.connections;
    try {
      const ws = await open({ allow: [`127.0.0.1:${redirector.port}`] }, redirector.url);
      try {
        const [h] = await ws.listMcps();
        const e = await rejection(h!.listTools());
        expect(e.message).not.toContain(CANARY);
      } finally {
        await ws.close();
      }
      // The guard's fetch follows redirects itself (redirect: "follow") and checks every hop.
      const guard = new EgressGuard({ allow: [`127.0.0.1:${redirector.port}`] });
      try {
        for (const method of ["GET", "POST"]) {
          const e = await rejection(guard.fetch(redirector.url, { method, ...(method === "POST" ? { body: "{}" } : {}) }));
          expect(e).toMatchObject({ code: "forbidden" });
          expect(e.message).toContain("'127.0.0.1'");
        }
        expect(target.connections - before, "a redirect reached an unlisted server").toBe(0);
        // The same redirect when its target is listed too: followed (the positive control).
        const both = new EgressGuard({ allow: [`127.0.0.1:${redirector.port}`, `127.0.0.1:${target.port}`] });
        const r = await both.fetch(redirector.url, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
        });
        expect(await r.text()).toContain(CANARY);
        both.close();
      } finally {
        guard.close();
      }
      expect(redirector.connections).toBeGreaterThan(0);
    } finally {
      await redirector.close();
    }
    expect(target.connections - before, "the positive control reached the target").toBeGreaterThan(0);
  });
});
