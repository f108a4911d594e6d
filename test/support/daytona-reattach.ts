/**
 * A second service process for test/emulators/daytona/daytona.test.ts: opens a Daytona workspace
 * by id through a fresh SDK client (nothing shared with the test process but the API), reads a
 * file and the MCP registrations, and prints one JSON line.
 *
 * Usage: node --import tsx test/support/daytona-reattach.ts '<json: { workspaceId, apiKey, apiUrl, file }>'
 */
import { DaytonaWorkspace } from "../../sdk/backends/daytona/index.js";

const cfg = JSON.parse(process.argv[2] ?? "{}") as { workspaceId: string; apiKey: string; apiUrl: string; file: string };
const ws = new DaytonaWorkspace({ workspaceId: cfg.workspaceId, apiKey: cfg.apiKey, apiUrl: cfg.apiUrl, teardown: "keep", expectExisting: true });
try {
  await ws.initialize();
  const text = (await ws.getBackend().readFile(cfg.file)).toString("utf8");
  const mcps = (await ws.listMcps({ agentId: "a1", sessionId: "s1" })).map((m) => m.name);
  process.stdout.write(`${JSON.stringify({ ok: true, outcome: ws.ensureOutcome, text, mcps })}\n`);
} catch (e) {
  process.stdout.write(`${JSON.stringify({ ok: false, error: String(e) })}\n`);
} finally {
  await ws.close();
}
