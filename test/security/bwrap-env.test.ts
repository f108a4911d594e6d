import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapWorkspace } from "../../sdk/backends/bubblewrap/index.js";
import { uniqueId } from "../contract/fixture.js";
import { ECHO_SERVER_IN_WORKSPACE, echoServerBundle } from "../fixtures/mcp/bundle.js";

/**
 * Attack: the service's environment (API keys) read from inside a Bubblewrap sandbox. `--clearenv`
 * clears only the sandboxed command; bwrap itself (and its pid-1 copy inside the sandbox) kept the
 * service's environment, readable at /proc/1/environ by every process in the sandbox, stdio MCP
 * servers included. A sentinel in the service's environment must appear in no /proc/<pid>/environ.
 */
const SENTINEL_NAME = "AGENTWS_TEST_SENTINEL_SECRET";
const SENTINEL = `sentinel-${randomBytes(12).toString("hex")}`;
/** Every process's environment the sandbox can read, NUL bytes as newlines, plus how many it read. */
const DUMP = `n=0; for f in /proc/[0-9]*/environ; do if cat "$f" 2>/dev/null | tr '\\0' '\\n'; then n=$((n+1)); fi; done; echo "read=$n"`;

let basedir: string;
beforeAll(async () => {
  basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-bwrap-env-"));
  process.env[SENTINEL_NAME] = SENTINEL;
});
afterAll(async () => {
  delete process.env[SENTINEL_NAME];
  await fs.rm(basedir, { recursive: true, force: true });
});

describe("Bubblewrap: the service's environment never reaches the sandbox", () => {
  it("no /proc/*/environ inside shows the sentinel, through exec (runner), spawn, or a stdio MCP server", async () => {
    const ws = new BubblewrapWorkspace({ workspaceId: uniqueId("env"), basedir });
    await ws.initialize();
    try {
      const sb = ws.getBackend();
      // A background process keeps a second process alive, so the dump sees more than itself and pid 1.
      const viaExec = await sb.exec(["sh", "-c", `sleep 5 & ${DUMP}; kill %1`]);
      const out = viaExec.stdout.toString();
      // Positive control: the dump did read environments (pid 1, the shell, the sleeper...), and the spec's own variables are there.
      expect(Number(/read=(\d+)/.exec(out)?.[1] ?? 0)).toBeGreaterThanOrEqual(2);
      expect(out.includes("HOME=/workspace"), "the sandbox's own environment was read").toBe(true);
      // Booleans, not the dump: a failing run must not print the service's environment.
      expect(out.includes(SENTINEL), "sentinel value visible through exec").toBe(false);
      expect(out.includes(SENTINEL_NAME), "sentinel name visible through exec").toBe(false);

      const proc = sb.spawn(["sh", "-c", DUMP]);
      const chunks: Buffer[] = [];
      proc.stdout.on("data", (c: Buffer) => chunks.push(c));
      proc.stdin.end();
      await proc.exited;
      const spawned = Buffer.concat(chunks).toString();
      expect(Number(/read=(\d+)/.exec(spawned)?.[1] ?? 0)).toBeGreaterThanOrEqual(2);
      expect(spawned.includes(SENTINEL), "sentinel visible through spawn").toBe(false);

      // A stdio MCP server: its start command dumps what it can read, then becomes the echo server.
      await sb.writeFile(ECHO_SERVER_IN_WORKSPACE, await echoServerBundle());
      await ws.addMcp({
        name: "envdump",
        transport: { type: "stdio", command: "sh", args: ["-c", `{ ${DUMP}; } > /workspace/mcp-env.txt; exec node /workspace/${ECHO_SERVER_IN_WORKSPACE}`] },
      });
      const [h] = await ws.listMcps();
      const env = JSON.parse((await h!.callTool("env", { name: SENTINEL_NAME })).output) as { value: string | null };
      expect(env.value).toBeNull();
      const dumped = (await sb.readFile("mcp-env.txt")).toString();
      expect(Number(/read=(\d+)/.exec(dumped)?.[1] ?? 0)).toBeGreaterThanOrEqual(2);
      expect(dumped.includes(SENTINEL), "sentinel visible to a stdio MCP server").toBe(false);
    } finally {
      await ws.close();
    }
  });
});
