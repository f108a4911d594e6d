import { mkdtempSync, rmSync, promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LocalWorkspace } from "../../sdk/backends/local/index.js";

/**
 * Attack: `.mcp` holds every stored MCP registration. When it cannot be read (truncated by a crash,
 * bloated, an unknown shape, a newer version, an entry this version does not understand) it must
 * never be replaced: before the fix, the next addMcp or removeMcp in ANY scope rewrote it from
 * defaults and every registration was gone. Now writes are refused with an error that names the
 * file and says what to do, and the bytes stay exactly as they were.
 */
const base = mkdtempSync(path.join(os.tmpdir(), "agentws-sec-mcpfile-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));

const entry = (name: string) => ({
  name,
  is_stateful: false,
  mcp_config: { type: "http_mcp", url: `http://127.0.0.1:9/${name}`, headers: null, timeout: 30.0, sse_read_timeout: 300.0 },
  enable_tools: null,
  disable_tools: null,
  execution_timeout: null,
  stream_progress: false,
});
const valid = JSON.stringify({ version: 2, mcps: { a1: { s1: [entry("one"), entry("two")] }, a2: { s2: [entry("three")] } } }, null, 2);

const badFiles: Array<[string, string | Buffer]> = [
  ["truncated JSON", valid.slice(0, Math.floor(valid.length / 2))],
  ["oversized (17 MiB)", Buffer.concat([Buffer.from(valid), Buffer.alloc(17 * 1024 * 1024, " ")])],
  ["an unknown shape (mcps is a list)", JSON.stringify({ version: 2, mcps: [entry("one")] })],
  ["a JSON string", JSON.stringify("mcps")],
  ["version 99", JSON.stringify({ version: 99, mcps: { a1: { s1: [entry("one")] } } })],
  [
    "an entry of an unknown transport type",
    JSON.stringify({ version: 2, mcps: { a1: { s1: [entry("one"), { ...entry("future"), mcp_config: { type: "ws_mcp", url: "ws://x" } }] } } }),
  ],
];

let n = 0;
describe(".mcp that cannot be read is never overwritten", () => {
  for (const [label, bytes] of badFiles) {
    it(`${label}: addMcp and removeMcp in any scope are refused and the bytes stay`, async () => {
      const id = `ws${n++}`;
      const workdir = path.join(base, id);
      await fs.mkdir(workdir, { recursive: true });
      const file = path.join(workdir, ".mcp");
      await fs.writeFile(file, bytes);
      const original = await fs.readFile(file);
      const warnings: string[] = [];
      const logger = {
        debug() {},
        info() {},
        error() {},
        warn: (m: string, f?: Record<string, unknown>) => void warnings.push(`${m} ${JSON.stringify(f ?? {})}`),
      };
      const ws = new LocalWorkspace({ workspaceId: id, workdir, logger });
      await ws.initialize();
      try {
        expect(warnings.join("\n")).toMatch(/\.mcp/);
        const attempts = [
          () => ws.addMcp({ name: "fresh", transport: { type: "http", url: "http://127.0.0.1:9/fresh" } }, { agentId: "other", sessionId: "x" }),
          () => ws.addMcp({ name: "fresh", transport: { type: "http", url: "http://127.0.0.1:9/fresh" } }),
          () => ws.removeMcp("one", { agentId: "a1", sessionId: "s1" }),
        ];
        for (const attempt of attempts) {
          const error = await attempt().then(
            () => undefined,
            (e: unknown) => e as { code?: string; message?: string },
          );
          expect(error, "the write must be refused").toBeDefined();
          expect(error!.message).toMatch(/\.mcp/);
          expect(error!.message).toMatch(/repair|delete/i);
          expect((await fs.readFile(file)).equals(original), "the .mcp bytes must not change").toBe(true);
        }
        await ws.purgeSession({ agentId: "a1", sessionId: "s1" });
        expect((await fs.readFile(file)).equals(original), "the .mcp bytes must not change").toBe(true);
      } finally {
        await ws.close();
      }
      // Once repaired, writes work again without re-initializing.
      await fs.writeFile(file, valid);
      const again = new LocalWorkspace({ workspaceId: id, workdir, logger });
      await again.initialize();
      try {
        await again.addMcp({ name: "fresh", transport: { type: "http", url: "http://127.0.0.1:9/fresh" } }, { agentId: "other", sessionId: "x" });
        const doc = JSON.parse(await fs.readFile(file, "utf8"));
        expect(Object.keys(doc.mcps)).toEqual(["a1", "a2", "other"]);
      } finally {
        await again.close();
      }
    }, 30_000);
  }

  it("a file repaired while the workspace is open is picked up by the next write", async () => {
    const id = `ws${n++}`;
    const workdir = path.join(base, id);
    await fs.mkdir(workdir, { recursive: true });
    const file = path.join(workdir, ".mcp");
    await fs.writeFile(file, valid.slice(0, 40));
    const ws = new LocalWorkspace({ workspaceId: id, workdir });
    await ws.initialize();
    try {
      await expect(ws.addMcp({ name: "fresh", transport: { type: "http", url: "http://127.0.0.1:9/fresh" } })).rejects.toThrow(/\.mcp/);
      await fs.writeFile(file, valid);
      await ws.removeMcp("one", { agentId: "a1", sessionId: "s1" });
      const doc = JSON.parse(await fs.readFile(file, "utf8"));
      expect(doc.mcps.a1.s1.map((e: { name: string }) => e.name)).toEqual(["two"]);
      expect(doc.mcps.a2.s2.map((e: { name: string }) => e.name)).toEqual(["three"]);
    } finally {
      await ws.close();
    }
  }, 30_000);
});
