import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { LocalWorkspace } from "../../sdk/backends/local/index.js";
import type { McpServerSpec } from "../../sdk/workspace/mcp-spec.js";
import { startHttpEchoServer } from "../fixtures/mcp/http-server.js";

/**
 * Attack: secrets given to an MCP server (env values, headers, credentials inside its URL) must
 * never show up in errors or logs. A server prints its key to stderr and dies: the error message
 * quotes the end of its stderr, and cutting that excerpt before masking left the secret's tail
 * in it. An HTTP URL with user info or token query parameters appeared whole in fetch errors.
 */
const base = mkdtempSync(path.join(os.tmpdir(), "agentws-sec-mcpleak-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));
const SERVER = fileURLToPath(new URL("../fixtures/mcp/stderr-secret.mjs", import.meta.url));

const SECRET = "sk-live-0123456789abcdef-TAILPART-9876543210";
/** Any 8 consecutive characters of the secret count as a leak. */
function leaks(text: string, secret: string): string | undefined {
  for (let i = 0; i + 8 <= secret.length; i++) if (text.includes(secret.slice(i, i + 8))) return secret.slice(i, i + 8);
  return undefined;
}

function recorder() {
  const lines: string[] = [];
  const keep = (m: string, f?: Record<string, unknown>) => void lines.push(`${m} ${JSON.stringify(f ?? {})}`);
  return { lines, logger: { debug: keep, info: keep, warn: keep, error: keep } };
}

let n = 0;
async function open(defaultMcps: McpServerSpec[] = []) {
  const id = `ws${n++}`;
  const log = recorder();
  // The HTTP cases reach servers (and refusing ports) on loopback: allowed explicitly, as the default egress policy refuses loopback.
  const ws = new LocalWorkspace({ workspaceId: id, workdir: path.join(base, id), logger: log.logger, defaultMcps, egress: { allow: ["127.0.0.1"] } });
  await ws.initialize();
  return { ws, log };
}

/** Everything an error carries that a caller might log: message, details, and the cause chain. */
function errorText(e: unknown): string {
  const parts: string[] = [];
  for (let c: unknown = e, depth = 0; c && depth < 8; c = (c as { cause?: unknown }).cause, depth++) {
    const err = c as { message?: unknown; details?: unknown; stack?: unknown };
    parts.push(String(err.message ?? c), JSON.stringify(err.details ?? null), String(err.stack ?? ""));
  }
  return parts.join("\n");
}

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const stdioSpec = (padding: number, unit = "x"): McpServerSpec => ({
  name: "leaky",
  transport: { type: "stdio", command: process.execPath, args: [SERVER, String(padding), unit], env: { LEAK_SECRET: SECRET } },
});

describe("MCP secrets in errors and logs", () => {
  // The excerpt is the last 1000 characters: 980 after the secret leave its last 20 inside.
  for (const [label, padding, unit] of [
    ["the secret's tail inside the stderr excerpt", 980, "x"],
    ["the secret cut by the transport's own stderr buffer", 4096 - 20, "x"],
    ["multi-byte stderr, the excerpt cut inside the secret", 980, "中"],
    ["the whole secret inside the excerpt", 10, "x"],
  ] as const) {
    it(`stdio server that prints its key and exits: ${label}`, async () => {
      const { ws, log } = await open();
      try {
        const error = await ws.addMcp(stdioSpec(padding, unit)).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, "a dead server must fail addMcp").toBeDefined();
        expect(String((error as Error).message)).toMatch(/exited/);
        expect(leaks(errorText(error), SECRET)).toBeUndefined();
        expect(leaks(log.lines.join("\n"), SECRET)).toBeUndefined();
      } finally {
        await ws.close();
      }
    }, 30_000);
  }

  it("stdio default server failing at listMcps: the warning is masked too", async () => {
    const { ws, log } = await open([stdioSpec(980)]);
    try {
      expect(await ws.listMcps()).toEqual([]);
      expect(log.lines.join("\n")).toMatch(/leaky/);
      expect(leaks(log.lines.join("\n"), SECRET)).toBeUndefined();
    } finally {
      await ws.close();
    }
  }, 30_000);

  const USER = "mcpuser-7f3a9c";
  const PASS = "hunter2-pass-e8d1b6";
  const TOKEN = "tok-SECRET-4b9e2a71c0";
  const KEY = "KEY-SECRET-93ad17f5";
  const SIG = "sig-SECRET-66c0de21";

  for (const [label, url] of [
    ["user info", (port: number) => `http://${USER}:${PASS}@127.0.0.1:${port}/mcp`],
    ["token query parameters", (port: number) => `http://127.0.0.1:${port}/mcp?token=${TOKEN}&api_key=${KEY}&sig=${SIG}&page=2`],
    [
      "both, percent-encoded",
      (port: number) => `http://${USER}:${encodeURIComponent(PASS + "/")}@127.0.0.1:${port}/mcp?access_token=${encodeURIComponent(TOKEN + " ")}`,
    ],
  ] as const) {
    it(`HTTP MCP URL with ${label} to a refusing port: no credential in the error or the logs`, async () => {
      const port = await closedPort();
      const spec: McpServerSpec = { name: "remote", stateful: true, transport: { type: "http", url: url(port), timeout: 5 } };
      const { ws, log } = await open();
      try {
        const error = await ws.addMcp(spec).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, "an unreachable server must fail addMcp").toBeDefined();
        expect(String((error as Error).message)).toMatch(/remote/);
        const text = errorText(error);
        for (const secret of [USER, PASS, TOKEN, KEY, SIG]) expect(leaks(text, secret), `${secret} in ${text}`).toBeUndefined();
        for (const secret of [USER, PASS, TOKEN, KEY, SIG]) expect(leaks(log.lines.join("\n"), secret)).toBeUndefined();
      } finally {
        await ws.close();
      }
      const listed = await open([spec]);
      try {
        expect(await listed.ws.listMcps()).toEqual([]);
        const lines = listed.log.lines.join("\n");
        expect(lines).toMatch(/remote/);
        for (const secret of [USER, PASS, TOKEN, KEY, SIG]) expect(leaks(lines, secret), `${secret} in ${lines}`).toBeUndefined();
      } finally {
        await listed.ws.close();
      }
    }, 30_000);
  }

  it("user info in an HTTP MCP URL is sent as Basic authorization, not refused by fetch", async () => {
    const server = await startHttpEchoServer();
    const url = new URL(server.url);
    url.username = USER;
    url.password = encodeURIComponent(PASS + ":x");
    const { ws, log } = await open();
    try {
      await ws.addMcp({ name: "authed", stateful: true, transport: { type: "http", url: url.href } });
      const [handle] = await ws.listMcps();
      expect((await handle!.listTools()).length).toBeGreaterThan(0);
      expect(server.authHeaders).toContain(`Basic ${Buffer.from(`${USER}:${PASS}:x`).toString("base64")}`);
      expect(leaks(log.lines.join("\n"), PASS)).toBeUndefined();
    } finally {
      await ws.close();
      await server.close();
    }
  }, 30_000);
});
