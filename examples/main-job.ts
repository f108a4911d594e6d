/**
 * The main job on the embedded default, end to end and without any cloud account:
 *   1. `agentws up` provisions the local fleet declared in stacks/local.fleet.yaml (Pulumi, file backend);
 *   2. the agent service serves that fleet over HTTP (a runtime manager, sessions in SQLite, bearer tokens);
 *   3. one agent's session is driven through the HTTP API only: session, skill upload, MCP server,
 *      the session's MCP endpoint (built-in and MCP tools), files and a signed download link, status;
 *   4. it prints how to reach the service, and keeps serving (Ctrl-C stops it gracefully) when run
 *      in a terminal; `--once` (or no terminal) stops after the drive.
 * Run it with `./scripts/start` (which also sets up the toolchain), or `npx tsx examples/main-job.ts`.
 */
import { spawnSync } from "node:child_process";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { BubblewrapWorkspaceManager, readStackOutputs, type FleetOutputs } from "agent-workspaces";
import { newToken, serveFleet, type ServedFleet } from "agent-workspaces/service";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const say = (line: string) => console.log(line);
const once = process.argv.includes("--once") || !process.stdout.isTTY;
const home = process.env.HOME ?? root;

// 1. Provision the declared fleet. A second run changes nothing (Pulumi diffs the declared state).
say("\n[1/4] provisioning the local fleet with Pulumi (agentws up --stack local)");
const up = spawnSync(process.execPath, [path.join(root, "bin/agentws.js"), "up", "--stack", "local"], { cwd: root, stdio: "inherit" });
if (up.status !== 0) {
  console.error("agentws up failed; see the lines above");
  process.exit(up.status ?? 1);
}
// The same state `agentws up` wrote (<project>/.agentws/state unless PULUMI_BACKEND_URL says otherwise).
const fleet: FleetOutputs = await readStackOutputs({ stackName: "local", workDir: root });
say(`      stack 'local' declares ${Object.keys(fleet).length} workspace(s):`);
for (const entry of Object.values(fleet))
  say(
    `        ${entry.workspaceId}  ${entry.backend.kind.padEnd(10)} user=${entry.userId ?? "-"} agent=${entry.agentId ?? "-"}  ${entry.location.hostPath ?? entry.location.workdir ?? ""}`,
  );
const declared = Object.values(fleet).find((e) => e.backend.kind === "local");
if (!declared) throw new Error("the local stack declares no local workspace");
const userId = declared.userId ?? "local";
const agentId = declared.agentId ?? "assistant";

// 2. Serve it: the manager reattaches declared ids (never a second copy), sessions go to SQLite.
say("\n[2/4] serving the fleet over HTTP (sessions in SQLite)");
const dbFile = path.join(home, ".agent-workspaces", "service", "sessions.db");
const options = { fleet, basedir: path.join(home, ".agent-workspaces", "runtime"), store: dbFile, ttl: 600 };
let served: ServedFleet;
try {
  served = await serveFleet({ ...options, port: Number(process.env.AGENTWS_PORT ?? 8787) });
} catch (e) {
  if ((e as NodeJS.ErrnoException).code !== "EADDRINUSE") throw e;
  served = await serveFleet({ ...options, port: 0 });
}
const { url } = served.service;
// A fresh token for the fleet's user each run, named "main-job": the previous run's is revoked
// and this one expires in 30 days, so runs do not pile up live tokens. Only its hash is stored.
const now = Date.now();
for (const t of await served.store.listTokens(userId, now, 1000)) if (t.name === "main-job") await served.store.revokeToken(t.tokenId, now);
const { token, hash } = newToken();
const minted = await served.store.addTokenHash(userId, hash, { name: "main-job", expiresAt: now + 30 * 86_400_000, now });
say(`      listening on ${url} (store: ${dbFile})`);

// 3. One agent's session, through the HTTP API only.
say("\n[3/4] driving one session through the HTTP API");
const api = async (method: string, route: string, body?: unknown): Promise<Response> => {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (body !== undefined && !(body instanceof FormData)) headers["content-type"] = "application/json";
  const r = await fetch(`${url}${route}`, { method, headers, ...(body === undefined ? {} : { body: body instanceof FormData ? body : JSON.stringify(body) }) });
  if (!r.ok) throw new Error(`${method} ${route} → ${r.status}: ${await r.text()}`);
  return r;
};
const session = (await (await api("POST", "/sessions", { agentId, workspaceId: declared.workspaceId, name: "main job" })).json()) as {
  sessionId: string;
  workspaceId: string;
};
const s = `/sessions/${session.sessionId}`;
say(`      POST /sessions → session ${session.sessionId} in workspace ${session.workspaceId} (the declared one)`);

const skillMd = await readFile(path.join(root, "examples/skills/release-notes/SKILL.md"));
const form = new FormData();
form.set("manifest", JSON.stringify({ entries: [{ path: "release-notes/SKILL.md", size: skillMd.length }] }));
form.append("files", new Blob([skillMd]), "SKILL.md");
const upload = await fetch(`${url}${s}/workspace/skills`, { method: "POST", headers: { authorization: `Bearer ${token}` }, body: form });
if (upload.status === 409) say(`      POST ${s}/workspace/skills → 409: already installed (the same SKILL.md), nothing changed`);
else if (upload.ok) say(`      POST ${s}/workspace/skills → 201: skill '${((await upload.json()) as { name: string }).name}'`);
else throw new Error(`skill upload → ${upload.status}: ${await upload.text()}`);
const skills = (await (await api("GET", `${s}/workspace/skills`)).json()) as Array<{ name: string; dir: string }>;
say(`      GET  ${s}/workspace/skills → ${skills.map((k) => `${k.name} (${k.dir})`).join(", ")}`);

const echo = { name: "echo", transport: { type: "stdio", command: process.execPath, args: [path.join(root, "test/fixtures/mcp/echo-server.mjs")] } };
const existing = (await (await api("GET", `${s}/workspace/mcp`)).json()) as Array<{ name: string }>;
if (!existing.some((m) => m.name === "echo")) await api("POST", `${s}/workspace/mcp`, echo);
const mcps = (await (await api("GET", `${s}/workspace/mcp`)).json()) as Array<{ name: string; isHealthy: boolean; tools: Array<{ name: string }> }>;
for (const m of mcps) say(`      GET  ${s}/workspace/mcp → '${m.name}' ${m.isHealthy ? "healthy" : "unhealthy"}: ${m.tools.map((t) => t.name).join(", ")}`);

const client = new Client({ name: "main-job", version: "1" });
await client.connect(new StreamableHTTPClientTransport(new URL(`${url}${s}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
const tools = (await client.listTools()).tools.map((t) => t.name);
say(`      MCP endpoint ${s}/mcp offers: ${tools.join(", ")}`);
const text = (r: Awaited<ReturnType<typeof client.callTool>>) => (r.content as Array<{ text?: string }>).map((c) => c.text ?? "").join("");
say(`      mcp__echo__add({a: 19, b: 23}) → ${text(await client.callTool({ name: "mcp__echo__add", arguments: { a: 19, b: 23 } }))}`);
await client.callTool({ name: "Write", arguments: { file_path: "notes/plan.md", content: "# Plan\n- ship the service\n" } });
const listing = text(await client.callTool({ name: "Bash", arguments: { command: "ls -a && du -sh . | cut -f1" } }));
say(
  `      Bash: ls -a →\n${listing
    .trimEnd()
    .split("\n")
    .map((l) => `        ${l}`)
    .join("\n")}`,
);
await client.close();

const dir = (await (await api("GET", `${s}/workspace/directories?path=notes`)).json()) as { entries: Array<{ name: string; size: number }> };
say(`      GET  ${s}/workspace/directories?path=notes → ${dir.entries.map((e) => `${e.name} (${e.size} B)`).join(", ")}`);
const link = (await (await api("POST", `${s}/workspace/files/download-token`, { path: "notes/plan.md" })).json()) as { url: string; expiresAt: number };
const downloaded = await (await fetch(`${url}${link.url}`)).text();
say(`      a signed download link (no bearer token, valid until ${new Date(link.expiresAt * 1000).toISOString()}) → ${JSON.stringify(downloaded)}`);
const status = (await (await api("GET", `${s}/workspace/status`)).json()) as { backend: string; state: string; idleSeconds: number; cwd: string };
say(`      GET  ${s}/workspace/status → ${status.backend}, ${status.state}, idle ${status.idleSeconds.toFixed(1)} s, cwd '${status.cwd}'`);

// The same fleet's sandboxed workspace, served by its own backend's manager (in-process here).
const declaredSandbox = Object.values(fleet).find((e) => e.backend.kind === "bubblewrap");
if (declaredSandbox && declaredSandbox.backend.kind === "bubblewrap" && declaredSandbox.backend.basedir) {
  await using sandboxes = BubblewrapWorkspaceManager.fromOutputs(fleet, { basedir: declaredSandbox.backend.basedir, ignoreOtherBackends: true });
  const box = await sandboxes.getWorkspace(declaredSandbox.userId ?? "local", declaredSandbox.agentId ?? "sandboxed", "session-1", declaredSandbox.workspaceId);
  const probe = await box
    .listTools()
    .find((t) => t.name === "Bash")!
    .execute({
      command:
        "echo \"cwd: $(pwd)\"; (echo > /dev/tcp/1.1.1.1/53) 2>/dev/null && echo 'network: open' || echo 'network: cut'; touch /usr/x 2>/dev/null || echo '/usr: read-only'",
    });
  say(`      bubblewrap workspace ${box.workspaceId}: ${probe.output.trim().split("\n").join("; ")}`);
} else say("      (no bubblewrap workspace in this fleet: bwrap is not installed here)");

// 4. How to reach it.
say("\n[4/4] the service");
say(`      URL:      ${url}   (OpenAPI: ${url}/openapi.json, metrics: ${url}/metrics)`);
say(
  `      token:    ${token}   (user '${userId}', id ${minted.tokenId}, expires ${new Date(minted.expiresAt!).toISOString().slice(0, 10)}; the next run revokes it; only its hash is stored; \`agentws serve\` serves the same store)`,
);
say(`      try:      curl -H 'Authorization: Bearer ${token}' ${url}/sessions`);
say(`      MCP:      any MCP client at ${url}${s}/mcp with that bearer token`);
if (once) {
  await served.service.close();
  say("done (--once). Run it again: Pulumi reports no changes and the service reattaches the same workspace.");
} else {
  say("serving; Ctrl-C stops it (in-flight requests finish, then every workspace is closed).");
  const stop = () => void served.service.close().then(() => process.exit(0));
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}
