import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Logger } from "../../sdk/logger.js";
import type { Sandbox } from "../../sdk/sandbox.js";
import { McpRegistry, type McpRegistryOptions } from "../../sdk/workspace/mcp.js";
import type { McpServerSpec } from "../../sdk/workspace/mcp-spec.js";
import { ECHO_SERVER_IN_WORKSPACE, echoServerBundle } from "../fixtures/mcp/bundle.js";
import { startHttpEchoServer, type HttpEchoServer } from "../fixtures/mcp/http-server.js";
import { uniqueId, useWorkspaces, type WorkspaceFixture } from "./fixture.js";
import { rejection } from "./helpers.js";

/** A logger that keeps warnings, so tests can check what was skipped and why. */
function recordingLogger(): Logger & { warnings: string[] } {
  const warnings: string[] = [];
  const noop = () => undefined;
  return { warnings, debug: noop, info: noop, error: noop, warn: (msg, fields) => void warnings.push(`${msg} ${fields ? JSON.stringify(fields) : ""}`) };
}

async function readMcpFile(sandbox: Sandbox): Promise<string | null> {
  return (await sandbox.stat(".mcp")) ? (await sandbox.readFile(".mcp")).toString("utf8") : null;
}

/** MCP semantics (reference §1.3, §4) over any backend that implements Sandbox.spawn. */
export function mcpContract(fixture: WorkspaceFixture): void {
  describe(`MCP contract (${fixture.name})`, () => {
    const { open } = useWorkspaces(fixture);
    // The fixture may say how to start the echo server in its sandbox; otherwise the suite installs
    // a self-contained bundle into each workspace and runs it with the sandbox's `node`, relative
    // to the workspace root (the default cwd of a stdio server).
    const override = fixture.mcpServerCommand?.();
    const argv = override ?? ["node", ECHO_SERVER_IN_WORKSPACE];
    const stdio = (name: string, extra: Partial<McpServerSpec> = {}, mode?: string): McpServerSpec => ({
      name,
      transport: { type: "stdio", command: argv[0]!, args: [...argv.slice(1), ...(mode ? [mode] : [])] },
      ...extra,
    });
    /** Opens a workspace able to run the echo server. */
    const openStdio = async (opts: Parameters<typeof open>[0] = {}) => {
      const ws = await open(opts);
      if (!override) await ws.getBackend().writeFile(ECHO_SERVER_IN_WORKSPACE, await echoServerBundle());
      return ws;
    };
    const http = (name: string, url: string, extra: Partial<McpServerSpec> = {}): McpServerSpec => ({ name, transport: { type: "http", url }, ...extra });
    const registry = (sandbox: Sandbox, options: Partial<McpRegistryOptions> = {}) =>
      new McpRegistry(sandbox, { defaultMcps: [], logger: recordingLogger(), track: (fn) => fn(), closeGraceMs: 500, ...options });

    let server: HttpEchoServer;
    beforeAll(async () => {
      server = await startHttpEchoServer();
    });
    afterAll(async () => {
      await server?.close();
    });

    describe(".mcp file", () => {
      it("is byte-exact for stdio and http entries across scopes", async () => {
        const ws = await open();
        const sb = ws.getBackend();
        await ws.addMcp(
          { name: "web", transport: { type: "http", url: "http://127.0.0.1:9/mcp", headers: { "X-Key": "k1" } } },
          { agentId: "a1", sessionId: "s1" },
        );
        await ws.addMcp(
          {
            name: "web2",
            transport: { type: "http", url: "http://127.0.0.1:9/x", timeout: 2.5 },
            executionTimeout: 5,
            enableTools: ["t1"],
            disableTools: ["t2"],
          },
          { agentId: "a1", sessionId: "s2" },
        );
        await ws.addMcp({ name: "legacy_1", transport: { type: "http", url: "http://127.0.0.1:9/y" } }, {});
        await ws.addMcp({ name: "web3", transport: { type: "http", url: "http://127.0.0.1:9/z" } }, { agentId: "a1", sessionId: "s1" });
        const text = await readMcpFile(sb);
        const entry = (
          name: string,
          url: string,
          more: { headers?: string; timeout?: string; enable?: string; disable?: string; exec?: string } = {},
        ) => `        {
          "name": "${name}",
          "is_stateful": false,
          "mcp_config": {
            "type": "http_mcp",
            "url": "${url}",
            "headers": ${more.headers ?? "null"},
            "timeout": ${more.timeout ?? "30.0"}
          },
          "enable_tools": ${more.enable ?? "null"},
          "disable_tools": ${more.disable ?? "null"},
          "execution_timeout": ${more.exec ?? "null"},
          "stream_progress": false
        }`;
        const expected = `{
  "version": 2,
  "mcps": {
    "a1": {
      "s1": [
${entry("web", "http://127.0.0.1:9/mcp", { headers: '{\n              "X-Key": "k1"\n            }' })},
${entry("web3", "http://127.0.0.1:9/z")}
      ],
      "s2": [
${entry("web2", "http://127.0.0.1:9/x", { timeout: "2.5", enable: '[\n            "t1"\n          ]', disable: '[\n            "t2"\n          ]', exec: "5.0" })}
      ]
    },
    "": {
      "": [
${entry("legacy_1", "http://127.0.0.1:9/y")}
      ]
    }
  }
}`;
        expect(text).toBe(expected);
      });

      it("keeps stdio entries in the reference's key order and round-trips them", async () => {
        const ws = await openStdio();
        await ws.addMcp({ ...stdio("echo"), executionTimeout: 12.25 }, { agentId: "a", sessionId: "s" });
        const doc = JSON.parse((await readMcpFile(ws.getBackend()))!);
        const e = doc.mcps.a.s[0];
        expect(Object.keys(e)).toEqual(["name", "is_stateful", "mcp_config", "enable_tools", "disable_tools", "execution_timeout", "stream_progress"]);
        expect(Object.keys(e.mcp_config)).toEqual(["type", "command", "args", "env", "cwd", "encoding_error_handler"]);
        expect(e).toMatchObject({ name: "echo", is_stateful: true, execution_timeout: 12.25 });
        expect(e.mcp_config).toMatchObject({
          type: "stdio_mcp",
          command: argv![0],
          args: argv!.slice(1),
          env: null,
          cwd: null,
          encoding_error_handler: "strict",
        });
      });

      it("listing never writes .mcp, and an untouched scope leaves no trace", async () => {
        const ws = await open({ defaultMcps: [http("d", server.url)] });
        expect((await ws.listMcps({ agentId: "a", sessionId: "s" })).map((h) => h.name)).toEqual(["d"]);
        await ws.removeMcp("not-there", { agentId: "a", sessionId: "s" });
        expect(await readMcpFile(ws.getBackend())).toBeNull();
      });

      it("reads a version 1 array as the legacy scope and writes version 2 next time", async () => {
        const ws = await open();
        const sb = ws.getBackend();
        await sb.writeFile(".mcp", JSON.stringify([{ name: "old", is_stateful: false, mcp_config: { type: "http_mcp", url: server.url } }]));
        const reg = registry(sb, { defaultMcps: [http("d", server.url)] });
        await reg.restore();
        expect((await reg.list({})).map((h) => h.name)).toEqual(["old"]);
        expect((await reg.list({ agentId: "x" })).map((h) => h.name)).toEqual(["d"]);
        await reg.add(http("new", server.url), {});
        const doc = JSON.parse((await readMcpFile(sb))!);
        expect(doc.version).toBe(2);
        expect(doc.mcps[""][""].map((e: { name: string }) => e.name)).toEqual(["old", "new"]);
        expect(doc.mcps[""][""][0].mcp_config.timeout).toBe(30);
        await reg.closeAll();
      });

      it("falls back to the defaults with a warning when .mcp is malformed, and keeps the bad file until a write", async () => {
        const ws = await open();
        const sb = ws.getBackend();
        for (const bad of ["{not json", '"a string"', '{"version": 2, "mcps": [1]}', "null"]) {
          await sb.writeFile(".mcp", bad);
          const logger = recordingLogger();
          const reg = registry(sb, { defaultMcps: [http("d", server.url)], logger });
          await reg.restore();
          expect((await reg.list({ agentId: "a", sessionId: "s" })).map((h) => h.name)).toEqual(["d"]);
          expect(logger.warnings.join("\n")).toMatch(/\.mcp/);
          expect((await sb.readFile(".mcp")).toString()).toBe(bad);
          await reg.closeAll();
        }
      });

      it("neither reads nor writes .mcp when the sandbox is not persistent", async () => {
        const ws = await open();
        const sb = ws.getBackend();
        await sb.writeFile(".mcp", JSON.stringify([{ name: "old", is_stateful: false, mcp_config: { type: "http_mcp", url: server.url } }]));
        // The same sandbox, seen as ephemeral.
        const ephemeral = new Proxy(sb, {
          get: (target, prop) => {
            if (prop === "persistent") return false;
            const v = Reflect.get(target, prop, target);
            return typeof v === "function" ? v.bind(target) : v;
          },
        });
        const reg = registry(ephemeral, { defaultMcps: [http("d", server.url)] });
        await reg.restore();
        expect((await reg.list({})).map((h) => h.name)).toEqual(["d"]);
        await reg.add(http("x", server.url), {});
        expect((await reg.list({})).map((h) => h.name)).toEqual(["d", "x"]);
        expect(JSON.parse((await readMcpFile(sb))!)).toEqual([expect.objectContaining({ name: "old" })]);
        await reg.closeAll();
      });

      it("keeps the valid entries of a half-valid file and names every skipped one", async () => {
        const ws = await open();
        const sb = ws.getBackend();
        const good = { name: "good", is_stateful: false, mcp_config: { type: "http_mcp", url: server.url } };
        await sb.writeFile(
          ".mcp",
          JSON.stringify({
            version: 2,
            mcps: {
              a: {
                s: [
                  good,
                  { ...good, name: "bad name!" },
                  { name: "stateless_stdio", is_stateful: false, mcp_config: { type: "stdio_mcp", command: "x" } },
                  { name: "no_config" },
                  { ...good, name: "overlap", enable_tools: ["t"], disable_tools: ["t"] },
                  good,
                ],
                t: "not a list",
              },
              b: 7,
              c: { s: [] },
            },
          }),
        );
        const logger = recordingLogger();
        const reg = registry(sb, { defaultMcps: [http("d", server.url)], logger });
        await reg.restore();
        expect((await reg.list({ agentId: "a", sessionId: "s" })).map((h) => h.name)).toEqual(["good"]);
        expect((await reg.list({ agentId: "a", sessionId: "t" })).map((h) => h.name)).toEqual(["d"]);
        expect((await reg.list({ agentId: "c", sessionId: "s" })).map((h) => h.name)).toEqual([]);
        const w = logger.warnings.join("\n");
        for (const needle of ["'bad name!'", "'stateless_stdio'", "'no_config'", "'overlap'", "duplicate MCP 'good'", "mcps['a']['t']", "mcps['b']"])
          expect(w).toContain(needle);
        await reg.closeAll();
      });
    });

    describe("declarations per scope", () => {
      it("rejects names outside ^[a-zA-Z0-9_-]+$ and bad specs, naming the field, writing nothing", async () => {
        const ws = await open();
        for (const name of ["bad name", "a/b", "", "ünï", "x.y", "../x"]) {
          const e = await rejection(ws.addMcp({ name, transport: { type: "http", url: server.url } }));
          expect(e.code).toBe("invalid_argument");
          expect(e.field).toBe("spec.name");
        }
        const badUrl = await rejection(ws.addMcp({ name: "x", transport: { type: "http", url: "ftp://x" } }));
        expect(badUrl.field).toBe("spec.transport.url");
        const statelessStdio = await rejection(ws.addMcp({ name: "x", stateful: false, transport: { type: "stdio", command: "node" } }));
        expect(statelessStdio.field).toBe("spec.stateful");
        const escape = await rejection(ws.addMcp({ name: "x", transport: { type: "stdio", command: "node", cwd: "../.." } }));
        expect(escape.code).toBe("path_escape");
        expect(await readMcpFile(ws.getBackend())).toBeNull();
      });

      it("gives every never-changed scope fresh copies of the defaults; the first change materialises the list", async () => {
        const ws = await open({ defaultMcps: [http("d1", server.url), http("d2", server.url)] });
        await ws.addMcp(http("extra", server.url), { agentId: "a", sessionId: "s1" });
        expect((await ws.listMcps({ agentId: "a", sessionId: "s1" })).map((h) => h.name)).toEqual(["d1", "d2", "extra"]);
        expect((await ws.listMcps({ agentId: "a", sessionId: "s2" })).map((h) => h.name)).toEqual(["d1", "d2"]);
        expect((await ws.listMcps({})).map((h) => h.name)).toEqual(["d1", "d2"]);
        const doc = JSON.parse((await readMcpFile(ws.getBackend()))!);
        expect(Object.keys(doc.mcps)).toEqual(["a"]);
        expect(Object.keys(doc.mcps.a)).toEqual(["s1"]);
        expect(doc.mcps.a.s1.map((e: { name: string }) => e.name)).toEqual(["d1", "d2", "extra"]);
        // The same name in another scope is fine; twice in one scope is a conflict.
        await ws.addMcp(http("extra", server.url), { agentId: "a", sessionId: "s2" });
        const dup = await rejection(ws.addMcp(http("d1", server.url), { agentId: "a", sessionId: "s2" }));
        expect(dup.code).toBe("conflict");
        expect(dup.message).toContain("agent='a' session='s2'");
      });

      it("persists [] and keeps it across a restart instead of re-seeding the defaults", async () => {
        const workspaceId = uniqueId("mcp");
        const defaults = [http("d", server.url)];
        const ws = await open({ workspaceId, defaultMcps: defaults });
        await ws.removeMcp("d", { agentId: "a", sessionId: "s" });
        expect(await ws.listMcps({ agentId: "a", sessionId: "s" })).toEqual([]);
        expect(JSON.parse((await readMcpFile(ws.getBackend()))!).mcps).toEqual({ a: { s: [] } });
        await ws.close();
        const again = await open({ workspaceId, defaultMcps: defaults });
        expect(await again.listMcps({ agentId: "a", sessionId: "s" })).toEqual([]);
        expect((await again.listMcps({ agentId: "a", sessionId: "other" })).map((h) => h.name)).toEqual(["d"]);
      });

      it("purgeSession forgets the scope's declaration and closes its clients", async () => {
        const ws = await open({ defaultMcps: [http("d", server.url)] });
        const scope = { agentId: "a", sessionId: "s" };
        await ws.addMcp(http("x", server.url), scope);
        await ws.addMcp(http("y", server.url), { agentId: "a", sessionId: "keep" });
        const before = await ws.listMcps(scope);
        await ws.purgeSession(scope);
        expect(before.every((h) => h.closed)).toBe(true);
        expect((await ws.listMcps(scope)).map((h) => h.name)).toEqual(["d"]);
        expect(JSON.parse((await readMcpFile(ws.getBackend()))!).mcps).toEqual({ a: { keep: expect.any(Array) } });
      });

      it("reset closes every client and deletes .mcp", async () => {
        const ws = await open({ defaultMcps: [http("d", server.url)] });
        await ws.addMcp(http("x", server.url), { agentId: "a" });
        const live = await ws.listMcps({ agentId: "a" });
        await ws.reset();
        expect(live.every((h) => h.closed)).toBe(true);
        expect(await readMcpFile(ws.getBackend())).toBeNull();
        expect((await ws.listMcps({ agentId: "a" })).map((h) => h.name)).toEqual(["d"]);
      });

      it("serialises concurrent adds of one name in one scope: one wins, one conflicts, the file stays whole", async () => {
        const ws = await open();
        const results = await Promise.allSettled([1, 2, 3].map(() => ws.addMcp(http("same", server.url), { agentId: "a" })));
        expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
        for (const r of results.filter((r) => r.status === "rejected")) expect((r as PromiseRejectedResult).reason.code).toBe("conflict");
        expect(JSON.parse((await readMcpFile(ws.getBackend()))!).mcps.a[""]).toHaveLength(1);
      });
    });

    describe("live clients", () => {
      it("calls a stdio server's tools end to end, as mcp__<server>__<tool>, counting activity", async () => {
        const ws = await openStdio({ defaultMcps: [stdio("echo", { disableTools: ["exit"] })] });
        const [h] = await ws.listMcps({ agentId: "a", sessionId: "s" });
        expect(h!.name).toBe("echo");
        const tools = await h!.listTools();
        expect(tools.map((t) => t.name).sort()).toEqual([
          "mcp__echo__add",
          "mcp__echo__die",
          "mcp__echo__echo",
          "mcp__echo__env",
          "mcp__echo__fail",
          "mcp__echo__sleep",
        ]);
        const add = tools.find((t) => t.toolName === "add")!;
        expect(add.inputSchema).toMatchObject({ type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] });
        expect(tools.find((t) => t.toolName === "echo")!.readOnly).toBe(true);
        const before = ws.lastActivityAt;
        await new Promise((r) => setTimeout(r, 5));
        const sum = await add.call({ a: 2, b: 40 });
        expect(sum).toMatchObject({ ok: true, output: "42", structuredContent: { sum: 42 } });
        expect(ws.lastActivityAt).toBeGreaterThan(before);
        // A running call is an operation in flight: a manager never evicts the workspace under it.
        const sleeping = tools.find((t) => t.toolName === "sleep")!.call({ ms: 300 });
        await new Promise((r) => setTimeout(r, 50));
        expect(ws.inFlight).toBe(1);
        expect((await sleeping).ok).toBe(true);
        expect(ws.inFlight).toBe(0);
        const failed = await tools.find((t) => t.toolName === "fail")!.call({});
        expect(failed).toMatchObject({ ok: false, output: "failed on purpose" });
        const badArgs = await add.call({ a: "x" });
        expect(badArgs.ok).toBe(false);
      });

      it("never shares a server process between two sessions", async () => {
        const ws = await openStdio({ defaultMcps: [stdio("echo")] });
        const pid = async (sessionId: string) => {
          const [h] = await ws.listMcps({ agentId: "a", sessionId });
          return JSON.parse((await h!.callTool("env", { name: "HOME" })).output).instance as string;
        };
        const [p1, p2] = [await pid("s1"), await pid("s2")];
        expect(p1).not.toBe(p2);
        expect(await pid("s1")).toBe(p1);
      });

      it("passes env and a workspace-relative cwd to the server, and keeps env values out of errors", async () => {
        const ws = await openStdio();
        await ws.getBackend().mkdir("sub/dir");
        const withEnv = (mode?: string): McpServerSpec => {
          const base = stdio(mode ? "leaky" : "echo", {}, mode);
          if (base.transport.type !== "stdio") throw new Error("unreachable");
          // The server runs in sub/dir, so a workspace-relative script path needs the workdir in front.
          const args = (base.transport.args ?? []).map((a) => (a === ECHO_SERVER_IN_WORKSPACE ? `${ws.getBackend().workdir}/${a}` : a));
          return { ...base, transport: { ...base.transport, args, env: { MY_TOKEN: "s3cr3t-value" }, cwd: "sub/dir" } };
        };
        await ws.addMcp(withEnv());
        const [h] = await ws.listMcps();
        const out = JSON.parse((await h!.callTool("env", { name: "MY_TOKEN" })).output);
        expect(out.value).toBe("s3cr3t-value");
        expect(out.cwd.endsWith("/sub/dir")).toBe(true);
        // The crash mode prints MY_TOKEN to stderr: the error quotes stderr, but not the secret.
        const e = await rejection(ws.addMcp(withEnv("crash")));
        expect(e.message).toContain("crashing on purpose");
        expect(e.message).toContain("***");
        expect(e.message).not.toContain("s3cr3t-value");
      });

      it("reports a server that crashes on start as mcp_error with its exit code and stderr, quickly", async () => {
        const ws = await openStdio();
        const t0 = Date.now();
        const e = await rejection(ws.addMcp(stdio("crashy", {}, "crash"), { agentId: "a" }));
        expect(e.code).toBe("mcp_error");
        expect(e.message).toContain("code 3");
        expect(e.message).toContain("crashing on purpose");
        expect(Date.now() - t0).toBeLessThan(10_000);
        expect(await readMcpFile(ws.getBackend())).toBeNull();
        expect(await ws.listMcps({ agentId: "a" })).toEqual([]);
      });

      it("reports a server dying in the middle of a call as mcp_error at once, not as a timeout", async () => {
        const ws = await openStdio({ defaultMcps: [stdio("echo", { executionTimeout: 60 })] });
        const [h] = await ws.listMcps();
        const t0 = Date.now();
        const e = await rejection(h!.callTool("die"));
        expect(e.code).toBe("mcp_error");
        expect(e.message).toContain("code 5");
        expect(e.message).toContain("dying mid-call");
        expect(Date.now() - t0).toBeLessThan(5000);
      });

      it("reports a command that does not exist as mcp_error", async () => {
        const ws = await open();
        const t0 = Date.now();
        const e = await rejection(ws.addMcp({ name: "ghost", transport: { type: "stdio", command: "/nonexistent/mcp-server-binary" } }));
        expect(e.code).toBe("mcp_error");
        expect(e.message).toContain("'ghost'");
        expect(Date.now() - t0).toBeLessThan(10_000);
        expect(await readMcpFile(ws.getBackend())).toBeNull();
      });

      it("skips a failing default on list with a warning and still starts the others", async () => {
        const ws = await openStdio();
        const logger = recordingLogger();
        const reg = registry(ws.getBackend(), { defaultMcps: [stdio("crashy", {}, "crash"), stdio("ok")], logger });
        await reg.restore();
        expect((await reg.list({ agentId: "a" })).map((h) => h.name)).toEqual(["ok"]);
        expect(logger.warnings.join("\n")).toMatch(/Failed to start MCP 'crashy'.*skipping/);
        await reg.closeAll();
      });

      it("gives up on a server that never answers initialize within the connect timeout", async () => {
        const ws = await openStdio();
        const reg = registry(ws.getBackend(), { connectTimeoutMs: 1500 });
        await reg.restore();
        const t0 = Date.now();
        const e = await rejection(reg.add(stdio("mute", {}, "silent"), { agentId: "a" }));
        expect(e.code).toBe("timeout");
        expect(e.message).toContain("'mute'");
        expect(Date.now() - t0).toBeLessThan(6000);
        expect(await reg.list({ agentId: "a" })).toEqual([]);
        await reg.closeAll();
      });

      it("bounds each tool call by executionTimeout and keeps the server usable afterwards", async () => {
        const ws = await openStdio({ defaultMcps: [stdio("echo", { executionTimeout: 0.4 })] });
        const [h] = await ws.listMcps();
        const t0 = Date.now();
        const e = await rejection(h!.callTool("sleep", { ms: 5000 }));
        expect(e.code).toBe("timeout");
        expect(e.message).toContain("executionTimeout");
        expect(Date.now() - t0).toBeLessThan(3000);
        expect((await h!.callTool("echo", { text: "still here" })).output).toBe("still here");
        expect((await h!.callTool("sleep", { ms: 10 })).output).toBe("slept 10");
      });

      it("notices a server that died and restarts it on the next list", async () => {
        const ws = await openStdio({ defaultMcps: [stdio("echo")] });
        const [h] = await ws.listMcps();
        await h!.callTool("exit");
        await expect.poll(() => h!.closed, { timeout: 5000 }).toBe(true);
        const e = await rejection(h!.callTool("echo", { text: "x" }));
        expect(e.code).toBe("mcp_error");
        expect(e.message).toContain("code 7");
        const [again] = await ws.listMcps();
        expect(again).not.toBe(h);
        expect((await again!.callTool("echo", { text: "back" })).output).toBe("back");
      });

      it("filters listed tools with enableTools/disableTools", async () => {
        const ws = await openStdio();
        await ws.addMcp(stdio("only", { enableTools: ["echo", "add"] }), { agentId: "a" });
        await ws.addMcp(stdio("but", { disableTools: ["sleep", "exit", "env", "fail", "die"] }), { agentId: "a" });
        const [only, but] = await ws.listMcps({ agentId: "a" });
        expect((await only!.listTools()).map((t) => t.toolName).sort()).toEqual(["add", "echo"]);
        expect((await but!.listTools()).map((t) => t.toolName).sort()).toEqual(["add", "echo"]);
        // Filters shape what models see; a caller naming a hidden tool still reaches it (reference fault 9).
        expect((await only!.callTool("sleep", { ms: 1 })).output).toBe("slept 1");
      });

      it("evicts the least recently listed scope beyond the live cap (cap 2: six connects)", async () => {
        const ws = await openStdio();
        const reg = registry(ws.getBackend(), { defaultMcps: [stdio("a"), stdio("b")], maxLiveStateful: 2 });
        await reg.restore();
        const A = { agentId: "x", sessionId: "A" };
        const B = { agentId: "x", sessionId: "B" };
        const first = await reg.list(A);
        expect(reg.connects).toBe(2);
        const second = await reg.list(B);
        expect(reg.connects).toBe(4);
        expect(first.every((h) => h.closed)).toBe(true);
        expect(second.some((h) => h.closed)).toBe(false);
        const third = await reg.list(A);
        expect(reg.connects).toBe(6);
        expect(third.map((h) => h.name)).toEqual(["a", "b"]);
        expect(second.every((h) => h.closed)).toBe(true);
        // Listing A again costs nothing: its clients are live.
        await reg.list(A);
        expect(reg.connects).toBe(6);
        const closed = await rejection(first[0]!.callTool("echo", { text: "x" }));
        expect(closed.code).toBe("closed");
        await reg.closeAll();
      });

      it("picks the least recently listed scope as the victim", async () => {
        const ws = await openStdio();
        const reg = registry(ws.getBackend(), { defaultMcps: [stdio("a")], maxLiveStateful: 2 });
        await reg.restore();
        const [a] = await reg.list({ sessionId: "A" });
        const [b] = await reg.list({ sessionId: "B" });
        await reg.list({ sessionId: "A" });
        const [c] = await reg.list({ sessionId: "C" });
        expect(reg.connects).toBe(3);
        expect([a!.closed, b!.closed, c!.closed]).toEqual([false, true, false]);
        await reg.closeAll();
        expect([a!.closed, c!.closed]).toEqual([true, true]);
      });

      it("exceeds the cap with a warning rather than evicting the requesting scope", async () => {
        const ws = await openStdio();
        const logger = recordingLogger();
        const reg = registry(ws.getBackend(), { defaultMcps: [stdio("a"), stdio("b")], maxLiveStateful: 1, logger });
        await reg.restore();
        const live = await reg.list({ sessionId: "only" });
        expect(live.map((h) => h.name)).toEqual(["a", "b"]);
        expect(live.some((h) => h.closed)).toBe(false);
        expect(logger.warnings.join("\n")).toContain("cap (1)");
        await reg.closeAll();
      });

      it("defaults the cap to max(40, 2 × stateful defaults)", async () => {
        const ws = await open();
        const many = Array.from({ length: 25 }, (_, i) => ({ name: `s${i}`, transport: { type: "stdio" as const, command: "x" } }));
        expect(registry(ws.getBackend()).maxLiveStateful).toBe(40);
        expect(registry(ws.getBackend(), { defaultMcps: many }).maxLiveStateful).toBe(50);
        expect(registry(ws.getBackend(), { defaultMcps: [http("h", server.url)] }).maxLiveStateful).toBe(40);
      });
    });

    describe("streamable HTTP servers", () => {
      // The test servers listen on the host's loopback, which the default egress policy refuses:
      // allowed here explicitly, as an operator would for an internal MCP server.
      const egress = { allow: ["127.0.0.1"] };
      it("calls a stateless HTTP server with one short session per operation, forwarding headers", async () => {
        const ws = await open({
          egress,
          defaultMcps: [http("web", server.url, { transport: { type: "http", url: server.url, headers: { Authorization: "Bearer tkn-123" } } })],
        });
        const [h] = await ws.listMcps();
        expect(h!.stateful).toBe(false);
        const tools = await h!.listTools();
        expect(tools.map((t) => t.name).sort()).toEqual(["mcp__web__echo", "mcp__web__sleep"]);
        const r = await tools.find((t) => t.toolName === "echo")!.call({ text: "hi" });
        expect(r).toMatchObject({ ok: true, output: "http:hi" });
        expect(server.authHeaders).toContain("Bearer tkn-123");
        await expect.poll(() => server.open).toBe(0);
      });

      it("keeps one session for a stateful HTTP server and ends it on remove", async () => {
        const ws = await open({ egress });
        const opened = server.initialized;
        await ws.addMcp(http("web", server.url, { stateful: true }), { agentId: "a" });
        const [h] = await ws.listMcps({ agentId: "a" });
        await h!.callTool("echo", { text: "1" });
        await h!.callTool("echo", { text: "2" });
        expect(server.initialized - opened).toBe(1);
        expect(server.open).toBeGreaterThan(0);
        await ws.removeMcp("web", { agentId: "a" });
        expect(h!.closed).toBe(true);
        await expect.poll(() => server.open).toBe(0);
      });

      it("cleans up stateless registrations too: remove closes the handle and the name can be added again", async () => {
        const ws = await open({ egress });
        await ws.addMcp(http("web", server.url), { agentId: "a" });
        const [h] = await ws.listMcps({ agentId: "a" });
        await ws.removeMcp("web", { agentId: "a" });
        expect(h!.closed).toBe(true);
        expect((await rejection(h!.callTool("echo", { text: "x" }))).code).toBe("closed");
        await ws.addMcp(http("web", server.url), { agentId: "a" });
        const [again] = await ws.listMcps({ agentId: "a" });
        expect((await again!.callTool("echo", { text: "x" })).output).toBe("http:x");
      });

      it("does not contact a stateless server on add; a stateful one that is down fails add with mcp_error", async () => {
        const ws = await open({ egress });
        const down = "http://127.0.0.1:9/mcp";
        await ws.addMcp(http("lazy", down), { agentId: "a" });
        const [lazy] = await ws.listMcps({ agentId: "a" });
        const callErr = await rejection(lazy!.callTool("echo", { text: "x" }));
        expect(callErr.code).toBe("mcp_error");
        const e = await rejection(ws.addMcp(http("eager", down, { stateful: true }), { agentId: "a" }));
        expect(e.code).toBe("mcp_error");
        expect(JSON.parse((await readMcpFile(ws.getBackend()))!).mcps.a[""].map((x: { name: string }) => x.name)).toEqual(["lazy"]);
      });

      it("bounds HTTP tool calls by executionTimeout", async () => {
        const ws = await open({ egress, defaultMcps: [http("web", server.url, { executionTimeout: 0.3 })] });
        const [h] = await ws.listMcps();
        const t0 = Date.now();
        const e = await rejection(h!.callTool("sleep", { ms: 3000 }));
        expect(e.code).toBe("timeout");
        expect(Date.now() - t0).toBeLessThan(2500);
      });
    });
  });
}
