/**
 * The main job on the embedded default, end to end and without any cloud account:
 *   1. `agentws up` provisions the local fleet declared in stacks/local.fleet.yaml (Pulumi, file backend);
 *   2. a runtime manager loads the stack's `workspaces` output and serves an agent's workspace from it;
 *   3. the agent side uses it: a skill, a stdio MCP server, the built-in tools, offloading.
 * Run it with `./scripts/start` (which also sets up the toolchain), or `npx tsx examples/main-job.ts`.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { openStack } from "../sdk/cli/engine.js";
import { BubblewrapWorkspaceManager, LocalWorkspaceManager, parseFleetOutputs, type FleetOutputs, type ManagerEvent } from "../sdk/index.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const say = (line: string) => console.log(line);

// 1. Provision the declared fleet. A second run changes nothing (Pulumi diffs the declared state).
say("\n[1/3] provisioning the local fleet with Pulumi (agentws up --stack local)");
const up = spawnSync(process.execPath, [path.join(root, "bin/agentws.js"), "up", "--stack", "local"], { cwd: root, stdio: "inherit" });
if (up.status !== 0) {
  console.error("agentws up failed; see the lines above");
  process.exit(up.status ?? 1);
}
const stack = await openStack({ workDir: root, stackName: "local" });
const fleet: FleetOutputs = parseFleetOutputs(await stack.outputs());
say(`      stack 'local' declares ${Object.keys(fleet).length} workspace(s):`);
for (const entry of Object.values(fleet))
  say(`        ${entry.workspaceId}  ${entry.backend.kind.padEnd(10)} user=${entry.userId ?? "-"} agent=${entry.agentId ?? "-"}  ${entry.location.hostPath ?? entry.location.workdir ?? ""}`);

// 2. Serve it at runtime. Declared ids are reattached, never created twice.
say("\n[2/3] serving the fleet with a runtime manager");
const declaredLocal = Object.values(fleet).find((e) => e.backend.kind === "local");
if (!declaredLocal) throw new Error("the local stack declares no local workspace");
const events: string[] = [];
await using manager = LocalWorkspaceManager.fromOutputs(fleet, {
  basedir: path.join(process.env.HOME ?? root, ".agent-workspaces", "runtime"),
  ignoreOtherBackends: true,
  ttl: 600,
  onEvent: (e: ManagerEvent) => events.push(`${e.type} ${e.workspaceId ?? ""} ${"durationMs" in e && e.durationMs !== undefined ? `${e.durationMs.toFixed(1)} ms` : ""}`.trim()),
});
const userId = declaredLocal.userId ?? "local";
const agentId = declaredLocal.agentId ?? "assistant";
const ws = await manager.getWorkspace(userId, agentId, "session-1", declaredLocal.workspaceId);
say(`      getWorkspace(${userId}, ${agentId}, session-1) → ${ws.workspaceId} at ${ws.workdir}`);
for (const line of events) say(`      event: ${line}`);

// 3. Use it the way an agent does.
say("\n[3/3] using the workspace");
await ws.addSkill(path.join(root, "examples/skills/release-notes"), { agentId });
const skills = await ws.listSkills({ agentId });
say(`      skills for ${agentId}: ${skills.map((s) => s.name).join(", ")}`);

const scope = { agentId, sessionId: "session-1" };
if (!(await ws.listMcps(scope)).some((m) => m.name === "echo"))
  await ws.addMcp({ name: "echo", transport: { type: "stdio", command: process.execPath, args: [path.join(root, "test/fixtures/mcp/echo-server.mjs")] } }, scope);
const [echo] = (await ws.listMcps(scope)).filter((m) => m.name === "echo");
const tools = await echo!.listTools();
say(`      MCP server 'echo' (stdio, inside the workspace) offers: ${tools.map((t) => t.name).join(", ")}`);
const add = tools.find((t) => t.name === "mcp__echo__add")!;
const sum = await add.call({ a: 19, b: 23 });
say(`      mcp__echo__add({a: 19, b: 23}) → ${sum.output}`);

const bash = ws.listTools().find((t) => t.name === "Bash")!;
const listing = await bash.execute({ command: "ls -a && du -sh . | cut -f1" });
say(`      Bash: ls -a →\n${listing.output.split("\n").map((l) => `        ${l}`).join("\n")}`);

const resultPath = await ws.offloadToolResult("session-1", { id: "call-1", output: listing.output.repeat(200) });
const contextPath = await ws.offloadContext("session-1", [{ name: "user", role: "user", content: "Summarise the workspace." }]);
say(`      offloaded a large tool result → ${resultPath}`);
say(`      offloaded compressed context → ${contextPath}`);
say(`      manager stats: ${JSON.stringify(manager.stats())}`);

// The same fleet's sandboxed workspace, served by its own backend's manager.
const declaredSandbox = Object.values(fleet).find((e) => e.backend.kind === "bubblewrap");
if (declaredSandbox && declaredSandbox.backend.kind === "bubblewrap" && declaredSandbox.backend.basedir) {
  await using sandboxes = BubblewrapWorkspaceManager.fromOutputs(fleet, { basedir: declaredSandbox.backend.basedir, ignoreOtherBackends: true });
  const box = await sandboxes.getWorkspace(declaredSandbox.userId ?? "local", declaredSandbox.agentId ?? "sandboxed", "session-1", declaredSandbox.workspaceId);
  const shell = box.listTools().find((t) => t.name === "Bash")!;
  const probe = await shell.execute({
    command: "echo \"cwd: $(pwd)\"; echo \"root: $(ls / | tr '\\n' ' ')\"; (echo > /dev/tcp/1.1.1.1/53) 2>/dev/null && echo 'network: open' || echo 'network: cut'; touch /usr/x 2>/dev/null || echo '/usr: read-only'",
  });
  say(`      bubblewrap workspace ${box.workspaceId} (${box.workdir}):`);
  say(probe.output.trimEnd().split("\n").map((l) => `        ${l}`).join("\n"));
} else say("      (no bubblewrap workspace in this fleet: bwrap is not installed here)");

say("done. Run it again: Pulumi reports no changes and the manager reattaches the same workspace.");
