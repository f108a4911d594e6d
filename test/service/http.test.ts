import { promises as fs } from "node:fs";
import path from "node:path";
import { zipSync } from "fflate";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type Running } from "./service-fixture.js";

/**
 * Every route of the service over real HTTP on loopback (fetch), with a Local manager and SQLite:
 * the happy path, then each bad input with its status and problem body, and that nothing stored
 * was lost by the refusals.
 */
let svc: Running;
beforeAll(async () => {
  svc = await startTestService({ limits: { maxUploadBytes: 1024 * 1024, maxUploadFileBytes: 256 * 1024, maxUploadFiles: 5, maxReadBytes: 512 * 1024 } });
});
afterAll(async () => {
  await svc?.close();
});

const json = async (r: Response) => (await r.json()) as Record<string, unknown>;
async function problem(r: Response, status: number, code: string, field?: string): Promise<Record<string, unknown>> {
  expect(r.status).toBe(status);
  expect(r.headers.get("content-type")).toContain("application/problem+json");
  const body = await json(r);
  expect(body).toMatchObject({ status, title: code });
  expect(typeof body.detail).toBe("string");
  expect(typeof body.requestId).toBe("string");
  if (field !== undefined) expect(`${String(body.field)} ${String(body.detail)}`).toContain(field);
  return body;
}
async function newSession(user: string, agentId = "writer", extra: Record<string, unknown> = {}) {
  const r = await svc.call(user, "POST", "/sessions", { agentId, ...extra });
  expect(r.status).toBe(201);
  return (await r.json()) as { sessionId: string; workspaceId: string; agentId: string; name: string; cwd: string | null };
}
const skillForm = (files: Record<string, string | Uint8Array>, manifest?: unknown) => {
  const form = new FormData();
  const entries = Object.entries(files).map(([p, c]) => ({ path: p, size: typeof c === "string" ? Buffer.byteLength(c) : c.length }));
  form.set("manifest", JSON.stringify(manifest ?? { entries }));
  for (const [p, c] of Object.entries(files)) form.append("files", new Blob([c]), p.split("/").pop());
  return form;
};
const SKILL = "---\nname: notes\ndescription: Takes notes.\n---\n\n# Notes\nWrite them down.\n";

describe("sessions", () => {
  it("creates with the policy's workspace id (stored once), gets, lists, patches and deletes", async () => {
    const a = await newSession("alice", "writer", { name: "first" });
    expect(a.workspaceId).toBe(svc.manager.resolveWorkspaceId("alice", "writer"));
    expect(a.name).toBe("first");
    const b = await newSession("alice", "writer");
    expect(b.workspaceId).toBe(a.workspaceId); // per-agent: one workspace for the agent's sessions
    const got = await json(await svc.call("alice", "GET", `/sessions/${a.sessionId}`));
    expect(got).toMatchObject({ sessionId: a.sessionId, workspaceId: a.workspaceId, agentId: "writer" });
    const list = await json(await svc.call("alice", "GET", "/sessions?agentId=writer"));
    expect(list.total).toBeGreaterThanOrEqual(2);
    const patched = await json(await svc.call("alice", "PATCH", `/sessions/${a.sessionId}`, { name: "renamed", cwd: "data" }));
    expect(patched).toMatchObject({ name: "renamed", cwd: "data", workspaceId: a.workspaceId });
    expect((await svc.call("alice", "DELETE", `/sessions/${b.sessionId}`)).status).toBe(204);
    await problem(await svc.call("alice", "GET", `/sessions/${b.sessionId}`), 404, "not_found", "sessionId");
  });

  it("an explicit workspaceId of yours wins; another user's (or a new one) is a 404 and nothing is stored", async () => {
    const first = await newSession("alice", "writer");
    const mine = await newSession("alice", "reviewer", { workspaceId: first.workspaceId });
    expect(mine.workspaceId).toBe(first.workspaceId);
    const before = await svc.store.listSessions("bob", { limit: 500, offset: 0 });
    await problem(await svc.call("bob", "POST", "/sessions", { agentId: "writer", workspaceId: first.workspaceId }), 404, "not_found", "workspaceId");
    await problem(await svc.call("bob", "POST", "/sessions", { agentId: "writer", workspaceId: "alice-scratch" }), 404, "not_found", "workspaceId");
    expect((await svc.store.listSessions("bob", { limit: 500, offset: 0 })).total).toBe(before.total);
  });

  it("refuses bad bodies, naming the field", async () => {
    await problem(await svc.call("alice", "POST", "/sessions", { agentId: "" }), 400, "invalid_argument", "agentId");
    await problem(await svc.call("alice", "POST", "/sessions", { agentId: "   " }), 400, "invalid_argument", "agentId");
    await problem(await svc.call("alice", "POST", "/sessions", { agentId: "w", workspaceId: "../etc" }), 400, "invalid_argument", "workspaceId");
    await problem(await svc.call("alice", "POST", "/sessions", { agentId: "w", userId: "bob" }), 400, "invalid_argument");
    await problem(await svc.call("alice", "POST", "/sessions", "{not json", { "content-type": "application/json" }), 400, "invalid_argument");
    await problem(await svc.call("alice", "POST", "/sessions", { agentId: "w", cwd: "../up" }), 400, "path_escape", "../up");
    await problem(await svc.call("alice", "POST", "/sessions", { agentId: "w", name: "x".repeat(2 * 1024 * 1024) }), 413, "too_large");
    await problem(await svc.call("alice", "GET", "/sessions?limit=0"), 400, "invalid_argument", "limit");
    await problem(await svc.call("alice", "GET", "/sessions/has%20space"), 400, "invalid_argument", "sessionId");
    await problem(await svc.call("alice", "PATCH", "/sessions/abc", { workspaceId: "other" }), 400, "invalid_argument");
  });

  it("authenticates: no token, a malformed header, an unknown token are 401; another user's session is 404 on every route", async () => {
    await problem(await svc.call(null, "GET", "/sessions"), 401, "unauthenticated");
    await problem(await svc.call(null, "GET", "/sessions", undefined, { authorization: "Basic abc" }), 401, "unauthenticated");
    await problem(await svc.call("not-a-known-token", "GET", "/sessions"), 401, "unauthenticated");
    const a = await newSession("alice");
    await fs.writeFile(path.join(svc.basedir, a.workspaceId, "secret.txt"), "alice only");
    const s = `/sessions/${a.sessionId}`;
    const w = `${s}/workspace`;
    const attempts: Array<[string, string, unknown?]> = [
      ["GET", s],
      ["PATCH", s, { name: "mine now" }],
      ["DELETE", s],
      ["GET", `${w}/mcp`],
      ["POST", `${w}/mcp`, { name: "x", transport: { type: "http", url: "http://127.0.0.1:9/mcp" } }],
      ["DELETE", `${w}/mcp/x`],
      ["GET", `${w}/skills`],
      ["POST", `${w}/skills`, skillForm({ "notes/SKILL.md": SKILL })],
      ["DELETE", `${w}/skills/notes`],
      ["GET", `${w}/directories`],
      ["GET", `${w}/files?path=secret.txt`],
      ["POST", `${w}/files/download-token`, { path: "secret.txt" }],
      ["GET", `${w}/status`],
    ];
    for (const [method, route, body] of attempts) await problem(await svc.call("bob", method, route, body), 404, "not_found", "sessionId");
    // Untouched by all of that.
    expect(await json(await svc.call("alice", "GET", s))).toMatchObject({ sessionId: a.sessionId, name: a.name });
    expect(await (await svc.call("alice", "GET", `${w}/files?path=secret.txt`)).text()).toBe("alice only");
    await problem(await svc.call("alice", "GET", "/sessions/0123456789abcdef0123456789abcdef"), 404, "not_found");
  });
});

describe("workspace routes", () => {
  it("MCP servers: add, list with health and tools, duplicate 409, bad spec 400, remove", async () => {
    const a = await newSession("alice", "mcp-agent");
    const w = `/sessions/${a.sessionId}/workspace`;
    const echo = { name: "echo", transport: { type: "stdio", command: process.execPath, args: [path.resolve("test/fixtures/mcp/echo-server.mjs")] } };
    expect((await svc.call("alice", "POST", `${w}/mcp`, echo)).status).toBe(201);
    expect((await svc.call("alice", "POST", `${w}/mcp`, { name: "down", transport: { type: "http", url: "http://127.0.0.1:9/mcp", timeout: 2 } })).status).toBe(
      201,
    );
    await problem(await svc.call("alice", "POST", `${w}/mcp`, echo), 409, "conflict");
    await problem(
      await svc.call("alice", "POST", `${w}/mcp`, { name: "bad name!", transport: { type: "stdio", command: "x" } }),
      400,
      "invalid_argument",
      "name",
    );
    await problem(await svc.call("alice", "POST", `${w}/mcp`, { name: "x", transport: { type: "ftp" } }), 400, "invalid_argument", "transport");
    const list = (await (await svc.call("alice", "GET", `${w}/mcp`)).json()) as Array<{
      name: string;
      isHealthy: boolean;
      tools: Array<{ name: string }>;
      error?: string;
    }>;
    const byName = Object.fromEntries(list.map((m) => [m.name, m]));
    expect(byName.echo!.isHealthy).toBe(true);
    expect(byName.echo!.tools.map((t) => t.name)).toContain("mcp__echo__add");
    expect(byName.down?.isHealthy ?? false).toBe(false);
    expect(JSON.stringify(list)).not.toContain("echo-server.mjs"); // declarations (env, headers) are not echoed
    expect((await svc.call("alice", "DELETE", `${w}/mcp/echo`)).status).toBe(204);
    expect((await svc.call("alice", "DELETE", `${w}/mcp/never-there`)).status).toBe(204);
    const after = (await (await svc.call("alice", "GET", `${w}/mcp`)).json()) as Array<{ name: string }>;
    expect(after.map((m) => m.name)).not.toContain("echo");
  });

  it("skills: upload a folder (name kept) and an archive, list, remove; refuses traversal, oversized, zip bombs and bad manifests", async () => {
    const a = await newSession("alice", "skill-agent");
    const w = `/sessions/${a.sessionId}/workspace`;
    const up = await svc.call("alice", "POST", `${w}/skills`, skillForm({ "note-taker/SKILL.md": SKILL, "note-taker/scripts/run.sh": "echo hi\n" }));
    expect(up.status).toBe(201);
    const skill = await json(up);
    expect(skill).toMatchObject({ name: "notes", description: "Takes notes." });
    expect(String(skill.dir)).toMatch(/note-taker$/);
    expect(await fs.readFile(path.join(svc.basedir, a.workspaceId, "skills", "skill-agent", "note-taker", "scripts", "run.sh"), "utf8")).toBe("echo hi\n");

    const zip = zipSync({ "zipped/SKILL.md": new TextEncoder().encode("---\nname: zipped\ndescription: From a zip.\n---\nbody\n") });
    const form = new FormData();
    form.set("archive", new Blob([zip]), "zipped.zip");
    const z = await svc.call("alice", "POST", `${w}/skills`, form);
    expect(z.status).toBe(201);
    const names = ((await (await svc.call("alice", "GET", `${w}/skills`)).json()) as Array<{ name: string }>).map((s) => s.name).sort();
    expect(names).toEqual(["notes", "zipped"]);

    await problem(await svc.call("alice", "POST", `${w}/skills`, skillForm({ "../evil/SKILL.md": SKILL })), 400, "invalid_argument", "path");
    await problem(await svc.call("alice", "POST", `${w}/skills`, skillForm({ "a/SKILL.md": SKILL, "b/x.txt": "x" })), 400, "invalid_argument", "single folder");
    await problem(await svc.call("alice", "POST", `${w}/skills`, skillForm({ "a/readme.txt": "x" })), 400, "invalid_argument", "SKILL.md");
    await problem(
      await svc.call("alice", "POST", `${w}/skills`, skillForm({ "a/SKILL.md": SKILL }, { entries: [{ path: "a/SKILL.md", size: 3 }] })),
      400,
      "invalid_argument",
      "size",
    );
    await problem(
      await svc.call("alice", "POST", `${w}/skills`, skillForm({ "a/SKILL.md": SKILL, "a/big.bin": new Uint8Array(300 * 1024) })),
      413,
      "too_large",
    );
    const many = Object.fromEntries([["a/SKILL.md", SKILL], ...Array.from({ length: 6 }, (_, i) => [`a/f${i}`, "x"])]);
    await problem(await svc.call("alice", "POST", `${w}/skills`, skillForm(many)), 413, "too_large");
    const badManifest = new FormData();
    badManifest.set("manifest", "{oops");
    await problem(await svc.call("alice", "POST", `${w}/skills`, badManifest), 400, "invalid_argument", "manifest");
    // A real bomb: 64 MiB of zeros in a ~64 KiB zip, against a 1 MiB limit.
    const bomb = zipSync({ "bomb/SKILL.md": new TextEncoder().encode(SKILL), "bomb/zeros.bin": new Uint8Array(64 * 1024 * 1024) }, { level: 9 });
    expect(bomb.length).toBeLessThan(1024 * 1024);
    const bombForm = new FormData();
    bombForm.set("archive", new Blob([bomb]), "bomb.zip");
    await problem(await svc.call("alice", "POST", `${w}/skills`, bombForm), 413, "too_large");
    const trav = zipSync({ "../../escape/SKILL.md": new TextEncoder().encode(SKILL) });
    const travForm = new FormData();
    travForm.set("archive", new Blob([trav]), "t.zip");
    expect((await svc.call("alice", "POST", `${w}/skills`, travForm)).status).toBe(400);
    const huge = new FormData();
    huge.set("archive", new Blob([new Uint8Array(2 * 1024 * 1024)]), "huge.tar");
    await problem(await svc.call("alice", "POST", `${w}/skills`, huge), 413, "too_large");
    await problem(await svc.call("alice", "POST", `${w}/skills`, { not: "multipart" }), 400, "invalid_argument", "multipart");
    // None of that touched the installed skills or wrote outside.
    const still = ((await (await svc.call("alice", "GET", `${w}/skills`)).json()) as Array<{ name: string }>).map((s) => s.name).sort();
    expect(still).toEqual(["notes", "zipped"]);
    await expect(fs.stat(path.join(svc.basedir, a.workspaceId, "..", "escape"))).rejects.toThrow();

    expect((await svc.call("alice", "DELETE", `${w}/skills/zipped`)).status).toBe(204);
    await problem(await svc.call("alice", "DELETE", `${w}/skills/zipped`), 404, "not_found", "name");
  });

  it("directories and files are confined to the workspace; downloads need the right token", async () => {
    const a = await newSession("alice", "files-agent");
    const b = await newSession("bob", "files-agent");
    const root = path.join(svc.basedir, a.workspaceId);
    await fs.mkdir(path.join(root, "docs"), { recursive: true });
    await fs.writeFile(path.join(root, "docs", "report.txt"), "quarterly numbers");
    await fs.writeFile(path.join(root, "page.html"), "<script>alert(1)</script>");
    await fs.writeFile(path.join(root, "big.bin"), Buffer.alloc(600 * 1024));
    await fs.symlink("/etc", path.join(root, "etc-link"));
    const w = `/sessions/${a.sessionId}/workspace`;

    const dir = await json(await svc.call("alice", "GET", `${w}/directories?path=docs`));
    expect(dir).toMatchObject({ path: "docs", truncated: false, entries: [{ name: "report.txt", type: "file", size: 17 }] });
    const top = await json(await svc.call("alice", "GET", `${w}/directories`));
    expect((top.entries as Array<{ name: string }>).map((e) => e.name)).toContain("docs");
    await problem(await svc.call("alice", "GET", `${w}/directories?path=nope`), 404, "not_found");
    await problem(await svc.call("alice", "GET", `${w}/directories?path=docs/report.txt`), 400, "invalid_argument", "file");
    await problem(await svc.call("alice", "GET", `${w}/directories?path=../`), 400, "path_escape");
    await problem(await svc.call("alice", "GET", `${w}/directories?path=/etc`), 400, "path_escape");
    await problem(await svc.call("alice", "GET", `${w}/directories?path=etc-link`), 400, "path_escape");

    const file = await svc.call("alice", "GET", `${w}/files?path=docs/report.txt&download=true`);
    expect(file.status).toBe(200);
    expect(file.headers.get("content-disposition")).toBe("attachment; filename*=UTF-8''report.txt");
    expect(await file.text()).toBe("quarterly numbers");
    const html = await svc.call("alice", "GET", `${w}/files?path=page.html`);
    expect(html.headers.get("content-type")).toBe("application/octet-stream");
    expect(html.headers.get("x-content-type-options")).toBe("nosniff");
    await html.arrayBuffer();
    await problem(await svc.call("alice", "GET", `${w}/files?path=../../etc/passwd`), 400, "path_escape");
    await problem(await svc.call("alice", "GET", `${w}/files?path=/etc/passwd`), 400, "path_escape");
    await problem(await svc.call("alice", "GET", `${w}/files?path=etc-link/passwd`), 400, "path_escape");
    await problem(await svc.call("alice", "GET", `${w}/files?path=docs`), 400, "invalid_argument", "directory");
    await problem(await svc.call("alice", "GET", `${w}/files?path=missing.txt`), 404, "not_found");
    await problem(await svc.call("alice", "GET", `${w}/files?path=big.bin`), 413, "too_large");
    await problem(await svc.call("alice", "GET", `${w}/files`), 400, "invalid_argument", "path");

    // Download tokens: exactly this user, session and path, until expiry.
    const minted = await json(await svc.call("alice", "POST", `${w}/files/download-token`, { path: "docs/report.txt" }));
    expect(typeof minted.token).toBe("string");
    const byLink = await fetch(`${svc.url}${String(minted.url)}`);
    expect(byLink.status).toBe(200);
    expect(await byLink.text()).toBe("quarterly numbers");
    const token = encodeURIComponent(String(minted.token));
    await problem(await fetch(`${svc.url}${w}/files?path=page.html&token=${token}`), 401, "unauthenticated");
    await problem(await fetch(`${svc.url}${w}/files?path=docs//report.txt&token=x.y.z`), 401, "unauthenticated");
    await problem(await fetch(`${svc.url}${w}/files?path=docs/report.txt&token=garbage`), 401, "unauthenticated");
    await problem(await fetch(`${svc.url}/sessions/${b.sessionId}/workspace/files?path=docs/report.txt&token=${token}`), 401, "unauthenticated");
    await problem(await svc.call("alice", "POST", `${w}/files/download-token`, { path: "../x" }), 400, "path_escape");
    await problem(await svc.call("alice", "POST", `${w}/files/download-token`, {}), 400, "invalid_argument", "path");
    // A token forged for bob's user id on alice's session fails the signature; an expired one its expiry.
    const [exp, , sig] = String(minted.token).split(".");
    await problem(
      await fetch(`${svc.url}${w}/files?path=docs/report.txt&token=${exp}.${Buffer.from("bob").toString("base64url")}.${sig}`),
      401,
      "unauthenticated",
    );
    const { DownloadTokens } = await import("../../sdk/service/download-tokens.js");
    const old = new DownloadTokens({ secret: "test-secret" }).sign("alice", a.sessionId, "docs/report.txt", Date.now() - 120_000);
    const expired = await problem(await fetch(`${svc.url}${w}/files?path=docs/report.txt&token=${encodeURIComponent(old.token)}`), 401, "unauthenticated");
    expect(expired.detail).toContain("expired");
  });

  it("status: backend, state, idle time and a git summary", async () => {
    const a = await newSession("alice", "git-agent");
    const w = `/sessions/${a.sessionId}/workspace`;
    const plain = await json(await svc.call("alice", "GET", `${w}/status`));
    expect(plain).toMatchObject({ workspaceId: a.workspaceId, backend: "local", state: "running", git: null });
    expect(plain.idleSeconds as number).toBeGreaterThanOrEqual(0);
    const root = path.join(svc.basedir, a.workspaceId);
    const { execFileSync } = await import("node:child_process");
    const git = (...args: string[]) => execFileSync("git", ["-c", "user.email=t@t", "-c", "user.name=t", ...args], { cwd: root });
    git("init", "-q", "-b", "main");
    await fs.writeFile(path.join(root, "a.txt"), "one\n");
    git("add", "a.txt");
    git("commit", "-q", "-m", "one");
    await fs.writeFile(path.join(root, "a.txt"), "one\ntwo\n");
    await fs.writeFile(path.join(root, "new.txt"), "n");
    const status = await json(await svc.call("alice", "GET", `${w}/status`));
    expect(status.git).toMatchObject({ branch: "main", unstaged: 1, insertions: 1, deletions: 0 });
    expect((status.git as { untracked: number }).untracked).toBeGreaterThanOrEqual(1);
  });

  it("delete purges the session's MCP registrations and sessions/<id>/ files, keeping other sessions'", async () => {
    const a = await newSession("alice", "purge-agent");
    const keep = await newSession("alice", "purge-agent");
    const ws = await svc.manager.getWorkspace("alice", "purge-agent", a.sessionId, a.workspaceId);
    await ws.offloadToolResult(a.sessionId, { id: "c1", output: "x" });
    await ws.offloadToolResult(keep.sessionId, { id: "c1", output: "y" });
    const http = { name: "h", transport: { type: "http", url: "http://127.0.0.1:9/mcp" } };
    expect((await svc.call("alice", "POST", `/sessions/${a.sessionId}/workspace/mcp`, http)).status).toBe(201);
    expect((await svc.call("alice", "DELETE", `/sessions/${a.sessionId}`)).status).toBe(204);
    const sessions = await fs.readdir(path.join(svc.basedir, a.workspaceId, "sessions"));
    expect(sessions).toEqual([keep.sessionId]);
    expect(await fs.readFile(path.join(svc.basedir, a.workspaceId, ".mcp"), "utf8")).not.toContain(a.sessionId);
  });
});

describe("offloading", () => {
  it("writes tool results and context into sessions/<id>/, refusing bad bodies", async () => {
    const a = await newSession("alice", "offload-agent");
    const w = `/sessions/${a.sessionId}/workspace`;
    const first = await json(await svc.call("alice", "POST", `${w}/offload/tool-result`, { id: "call-1", output: "x".repeat(100_000) }));
    const second = await json(await svc.call("alice", "POST", `${w}/offload/tool-result`, { id: "call-1", output: "second" }));
    expect(first.path).not.toBe(second.path);
    expect(await fs.readFile(path.join(svc.basedir, a.workspaceId, String(first.path)), "utf8")).toBe("x".repeat(100_000)); // workspace-relative
    const ctx = await json(await svc.call("alice", "POST", `${w}/offload/context`, { messages: [{ role: "user", content: "hi" }] }));
    expect(String(ctx.path)).toMatch(/context\.jsonl$/);
    await problem(await svc.call("alice", "POST", `${w}/offload/tool-result`, { id: "", output: "x" }), 400, "invalid_argument", "id");
    await problem(await svc.call("alice", "POST", `${w}/offload/context`, { messages: [] }), 400, "invalid_argument", "messages");
    await problem(await svc.call("bob", "POST", `${w}/offload/tool-result`, { id: "c", output: "x" }), 404, "not_found");
  });
});

describe("service documents", () => {
  it("serves /openapi.json from the same schemas, /metrics, /healthz and problem bodies for unknown routes", async () => {
    const doc = await json(await fetch(`${svc.url}/openapi.json`));
    const paths = Object.keys(doc.paths as object);
    for (const p of [
      "/sessions",
      "/sessions/{sessionId}",
      "/sessions/{sessionId}/workspace/mcp",
      "/sessions/{sessionId}/workspace/skills",
      "/sessions/{sessionId}/workspace/files",
      "/sessions/{sessionId}/workspace/files/download-token",
      "/sessions/{sessionId}/workspace/directories",
      "/sessions/{sessionId}/workspace/status",
    ])
      expect(paths).toContain(p);
    expect(JSON.stringify(doc)).toContain("CreateSession");
    const metrics = await (await fetch(`${svc.url}/metrics`)).text();
    expect(metrics).toContain('agentws_workspaces{backend="local",state="running"}');
    expect(metrics).toMatch(/agentws_workspace_provision_seconds_count\{backend="local",outcome="create"\} [1-9]/);
    expect(metrics).toMatch(/agentws_errors_total\{code="not_found"\} [1-9]/);
    expect(metrics).toContain("agentws_workspace_cache_hits_total");
    expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);
    await problem(await fetch(`${svc.url}/nowhere`), 404, "not_found");
  });
});
