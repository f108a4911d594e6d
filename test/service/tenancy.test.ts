import { promises as fs } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { main } from "../../sdk/cli/main.js";
import { LocalDriver } from "../../sdk/backends/local/driver.js";
import { assignWorkspaceId } from "../../sdk/manager/index.js";
import { PostgresSessionStore, SqliteSessionStore, hashToken } from "../../sdk/service/index.js";
import { freshDatabase, postgresUrl } from "../support/postgres.js";
import { startTestService, type Running } from "./service-fixture.js";

/**
 * Tenancy (issue 26, items 1-3), over real HTTP with a Local manager: nobody occupies or probes
 * another user's workspace ids; ids are validated once, at the edge, by the rule every later part
 * uses (on SQLite and PostgreSQL); problem bodies name fields, never values, and no answer carries
 * a host path.
 */
const USERS = ["alice", "bob", "carol"];
const json = async (r: Response) => (await r.json()) as Record<string, unknown>;
type Session = { sessionId: string; workspaceId: string };

async function created(r: Response): Promise<Session> {
  expect(r.status, await r.clone().text()).toBe(201);
  return (await r.json()) as Session;
}
/** Folders in the basedir (workspaces), without the owner records. */
const folders = async (svc: Running) => (await fs.readdir(svc.basedir).catch(() => [] as string[])).filter((n) => n !== ".agentws").sort();

describe("workspace ids cannot be squatted or probed (item 1)", () => {
  let svc: Running;
  beforeAll(async () => {
    svc = await startTestService({ users: USERS });
  });
  afterAll(async () => {
    await svc?.close();
  });

  it("bob can take neither carol's future derived id nor alice's existing one; carol's first session is still a 201 in hers", async () => {
    const alice = await created(await svc.call("alice", "POST", "/sessions", { agentId: "writer" }));
    const carolsFuture = assignWorkspaceId({ userId: "carol", agentId: "writer" });
    expect(carolsFuture).toBe(svc.manager.resolveWorkspaceId("carol", "writer"));
    const before = await folders(svc);

    // The same request id for every probe: the answers must then be identical byte for byte.
    const probe = (workspaceId: string) => svc.call("bob", "POST", "/sessions", { agentId: "writer", workspaceId }, { "x-request-id": "probe" });
    const answers = await Promise.all([probe(carolsFuture), probe(alice.workspaceId), probe("never-made-by-anyone")]);
    const texts = await Promise.all(answers.map((r) => r.text()));
    for (const r of answers) expect(r.status).toBe(404);
    expect(JSON.parse(texts[0]!)).toMatchObject({ title: "not_found", status: 404, field: "workspaceId", requestId: "probe" });
    // Existing and someone else's (alice's) vs not existing (carol's future, a made-up one): nothing to tell apart.
    expect(texts[1]).toBe(texts[0]);
    expect(texts[2]).toBe(texts[0]);
    expect(answers.map((r) => r.headers.get("content-length"))).toEqual(Array(3).fill(answers[0]!.headers.get("content-length")));

    // Nothing was created or stored for bob.
    expect(await folders(svc)).toEqual(before);
    expect((await svc.store.listSessions("bob", { limit: 10, offset: 0 })).total).toBe(0);

    // Carol's first session for that agent lands in her derived workspace; naming it herself works too.
    const carol = await created(await svc.call("carol", "POST", "/sessions", { agentId: "writer" }));
    expect(carol.workspaceId).toBe(carolsFuture);
    expect((await created(await svc.call("carol", "POST", "/sessions", { agentId: "writer", workspaceId: carolsFuture }))).workspaceId).toBe(carolsFuture);
    // ... and bob still cannot reach it, with the same answer as before.
    expect(await (await probe(carolsFuture)).text()).toBe(texts[0]);
  });

  it("an explicit id of your own works: your derived one before it exists, one of your sessions', one declared for you", async () => {
    // Bob's own derived id, named before he has any session.
    const bobs = assignWorkspaceId({ userId: "bob", agentId: "coder" });
    expect((await created(await svc.call("bob", "POST", "/sessions", { agentId: "coder", workspaceId: bobs }))).workspaceId).toBe(bobs);
    // A session of another agent may join a workspace one of his sessions uses.
    expect((await created(await svc.call("bob", "POST", "/sessions", { agentId: "reviewer", workspaceId: bobs }))).workspaceId).toBe(bobs);

    // A workspace the stack declared for bob (provisioned the way the Pulumi provider does).
    const stackDir = path.join(svc.root, "declared");
    const driver = new LocalDriver({ kind: "local", basedir: stackDir });
    const description = await driver.create({ workspaceId: "bob-team", userId: "bob", agentId: "coder", managedBy: "pulumi" });
    svc.manager.loadFleet({
      "bob-team": {
        workspaceId: "bob-team",
        userId: "bob",
        agentId: "coder",
        backend: { kind: "local", basedir: stackDir },
        managedBy: "pulumi",
        location: description.location,
      },
    });
    expect((await created(await svc.call("bob", "POST", "/sessions", { agentId: "coder", workspaceId: "bob-team" }))).workspaceId).toBe("bob-team");

    // Not alice's: her answers are the not-found of a made-up id.
    const asAlice = (workspaceId: string) => svc.call("alice", "POST", "/sessions", { agentId: "coder", workspaceId }, { "x-request-id": "probe2" });
    const made = await (await asAlice("made-up-id")).text();
    expect(await (await asAlice("bob-team")).text()).toBe(made);
    expect(await (await asAlice(bobs)).text()).toBe(made);
  });
});

// PostgreSQL where scripts/postgres.sh can run it; its tests skip (with the reason printed) elsewhere.
const pgAdmin = postgresUrl();
const STORES: Array<[string, boolean]> = [
  ["sqlite", true],
  ["postgres", pgAdmin !== undefined],
];

describe.each(STORES)("ids validated once, at the edge (item 2, %s)", (kind, available) => {
  let svc: Running;
  let drop: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    if (!available) return;
    let store;
    if (kind === "postgres") {
      const db = await freshDatabase(pgAdmin!);
      drop = db.drop;
      store = await PostgresSessionStore.open(db.url);
    }
    svc = await startTestService({ users: USERS, ...(store ? { store } : {}) });
  });
  afterAll(async () => {
    await svc?.close();
    await drop?.();
  });

  it.runIf(available)("refuses agent ids the rest of the service would refuse, with a 400 naming agentId and nothing created", async () => {
    const before = await folders(svc);
    const bad = ["../../etc", "a\u0000b", "x".repeat(201), "é".repeat(101), ".hidden", "a/b", "a\\b", "line\nbreak", "", " \t"];
    for (const agentId of bad) {
      const r = await svc.call("alice", "POST", "/sessions", { agentId });
      const body = await json(r);
      expect(r.status, JSON.stringify(agentId)).toBe(400);
      expect(body).toMatchObject({ title: "invalid_argument" });
      expect(String(body.field)).toMatch(/agentId$/);
    }
    // A NUL in the name or in a list filter is a 400 too (PostgreSQL refuses NUL in text: it was a 500).
    expect((await svc.call("alice", "POST", "/sessions", { agentId: "ok", name: "a\u0000b" })).status).toBe(400);
    expect((await svc.call("alice", "GET", `/sessions?agentId=${encodeURIComponent("a\u0000b")}`)).status).toBe(400);
    expect(await folders(svc)).toEqual(before);
    expect((await svc.store.listSessions("alice", { limit: 10, offset: 0 })).total).toBe(0);
  });

  it.runIf(available)("an id at the limit is accepted and works on every route: skills, the MCP endpoint", async () => {
    const agentId = "é".repeat(100); // 200 bytes
    const s = await created(await svc.call("alice", "POST", "/sessions", { agentId }));
    expect((await svc.call("alice", "GET", `/sessions/${s.sessionId}/workspace/skills`)).status).toBe(200);
    const list = await svc.call(
      "alice",
      "POST",
      `/sessions/${s.sessionId}/mcp`,
      { jsonrpc: "2.0", id: 1, method: "tools/list", params: {} },
      { accept: "application/json, text/event-stream" },
    );
    const text = await list.text();
    expect(list.status).toBe(200);
    expect(text).toContain('"Bash"');
    expect(text).not.toContain('"error"');
  });

  it.runIf(available)("the policy needs no session id: an empty one is the reference's legacy scope under PER_AGENT and PER_USER", async () => {
    expect(assignWorkspaceId({ userId: "u1", agentId: "a1", sessionId: "" })).toBe("4bf1218b645ff727");
    expect(assignWorkspaceId({ userId: "u1", agentId: "a1", sessionId: " " }, "per_user")).toBe("48ea3da4179df93b");
    expect(assignWorkspaceId({ userId: "u1", agentId: "", sessionId: "" }, "per_user")).toBe("48ea3da4179df93b");
    expect(svc.manager.resolveWorkspaceId("alice", "writer", "")).toBe(assignWorkspaceId({ userId: "alice", agentId: "writer" }));
    expect((await svc.manager.getWorkspace("alice", "writer", "")).workspaceId).toBe(assignWorkspaceId({ userId: "alice", agentId: "writer" }));
    // The ids a policy does use are still required.
    expect(() => assignWorkspaceId({ userId: "", agentId: "a1" })).toThrow(/userId/);
    expect(() => assignWorkspaceId({ userId: "u1", agentId: " " })).toThrow(/agentId/);
  });
});

describe("agentws token refuses user ids the service refuses (item 2)", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "tenancy-cli-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  /** The command in process, its output captured. */
  async function agentws(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    const out = { stdout: "", stderr: "" };
    const spies = (["stdout", "stderr"] as const).map((s) =>
      vi.spyOn(process[s], "write").mockImplementation((chunk: string | Uint8Array) => {
        out[s] += chunk.toString();
        return true;
      }),
    );
    try {
      return { code: await main(["token", ...args]), ...out };
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  }

  it("' ' and 'a::b' are refused with a clear message and nothing stored; a good id still gets its token", async () => {
    const store = path.join(dir, "s.db");
    for (const [user, why] of [
      [" ", /empty or blank/],
      ["a::b", /'::'/],
      ["../x", /'\/'/],
    ] as const) {
      const r = await agentws([user, "--store", store]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(why);
    }
    const ok = await agentws(["dave", "--store", store]);
    expect(ok.code, ok.stderr).toBe(0);
    const token = ok.stdout.trim();
    expect(token).toMatch(/^aws_/);
    const s = new SqliteSessionStore(store);
    try {
      expect(await s.userForTokenHash(hashToken(token))).toBe("dave");
    } finally {
      await s.close();
    }
    // The refused ids were never stored: dave's is the only token.
    const db = new Database(store, { readonly: true });
    try {
      expect(db.prepare("SELECT user_id FROM api_tokens").all()).toEqual([{ user_id: "dave" }]);
    } finally {
      db.close();
    }
  });
});

describe("problem bodies name fields, never values; answers carry no host paths (item 3)", () => {
  let svc: Running;
  beforeAll(async () => {
    svc = await startTestService({ users: USERS });
  });
  afterAll(async () => {
    await svc?.close();
  });

  it("a traversal path is in no `field`: the field is `path` (or `cwd`, ...)", async () => {
    const s = await created(await svc.call("alice", "POST", "/sessions", { agentId: "writer" }));
    const w = `/sessions/${s.sessionId}/workspace`;
    const evil = "../../../../etc/passwd";
    const cases: Array<[Response, string]> = [
      [await svc.call("alice", "GET", `${w}/files?path=${encodeURIComponent(evil)}`), "path"],
      [await svc.call("alice", "GET", `${w}/files?path=${encodeURIComponent("/etc/passwd")}`), "path"],
      [await svc.call("alice", "GET", `${w}/directories?path=${encodeURIComponent(evil)}`), "path"],
      [await svc.call("alice", "POST", `${w}/files/download-token`, { path: evil }), "path"],
      [await svc.call("alice", "GET", `${w}/files?path=${encodeURIComponent(evil)}&token=x`, undefined, { authorization: "" }), "path"],
      [await svc.call("alice", "POST", "/sessions", { agentId: "writer", cwd: evil }), "cwd"],
      [await svc.call("alice", "PATCH", `/sessions/${s.sessionId}`, { cwd: "a\\b" }), "cwd"],
    ];
    for (const [r, field] of cases) {
      const text = await r.text();
      expect(r.status, text).toBe(400);
      const body = JSON.parse(text) as Record<string, unknown>;
      expect(body).toMatchObject({ title: "path_escape", field });
      // The host's root is named nowhere in the answer either.
      expect(text).not.toContain(svc.basedir);
    }
  });

  it("a record key the caller chose is not echoed into `field`", async () => {
    const s = await created(await svc.call("alice", "POST", "/sessions", { agentId: "mcp" }));
    const r = await svc.call("alice", "POST", `/sessions/${s.sessionId}/workspace/mcp`, {
      name: "x",
      transport: { type: "stdio", command: "x", env: { "../../../../etc/passwd": 5 } },
    });
    const body = await json(r);
    expect(r.status).toBe(400);
    expect(body.title).toBe("invalid_argument");
    expect(String(body.field)).toMatch(/env/);
    expect(String(body.field)).not.toContain("passwd");
  });

  it("offload paths, status and skills answer workspace-relative paths, never the host folder", async () => {
    const s = await created(await svc.call("alice", "POST", "/sessions", { agentId: "writer", cwd: "data" }));
    const w = `/sessions/${s.sessionId}/workspace`;
    const answers: string[] = [];
    const tool = await svc.call("alice", "POST", `${w}/offload/tool-result`, { id: "call-1", output: "big" });
    answers.push(await tool.clone().text());
    expect(tool.status).toBe(201);
    expect(await json(tool)).toEqual({ path: `sessions/${s.sessionId}/tool_result-call-1.txt` });
    const ctx = await svc.call("alice", "POST", `${w}/offload/context`, { messages: [{ role: "user", content: "hi" }] });
    answers.push(await ctx.clone().text());
    expect(await json(ctx)).toEqual({ path: `sessions/${s.sessionId}/context.jsonl` });
    // Reading the answered path back through the files route gives the offloaded bytes.
    expect(await (await svc.call("alice", "GET", `${w}/files?path=${encodeURIComponent(`sessions/${s.sessionId}/tool_result-call-1.txt`)}`)).text()).toBe(
      "big",
    );

    const status = await svc.call("alice", "GET", `${w}/status`);
    answers.push(await status.clone().text());
    const st = await json(status);
    expect(st).toMatchObject({ workspaceId: s.workspaceId, backend: "local", cwd: "data" });
    expect(st).not.toHaveProperty("workdir");

    const form = new FormData();
    form.set("archive", new Blob([await tarOf({ "notes/SKILL.md": "---\nname: notes\ndescription: Notes.\n---\n\nWrite.\n" })]), "notes.tar");
    const up = await svc.call("alice", "POST", `${w}/skills`, form);
    answers.push(await up.clone().text());
    expect(up.status).toBe(201);
    const skills = await svc.call("alice", "GET", `${w}/skills`);
    answers.push(await skills.clone().text());
    const [skill] = (await skills.json()) as Array<{ dir: string }>;
    expect(skill!.dir).toBe("skills/writer/notes");

    for (const a of answers) {
      expect(a).not.toContain(svc.basedir);
      expect(a).not.toContain(svc.root);
    }
  });
});

/** A small tar archive (ustar), enough for a skill upload. */
async function tarOf(files: Record<string, string>): Promise<Uint8Array> {
  const tar = (await import("tar-stream")).default;
  const pack = tar.pack();
  for (const [name, content] of Object.entries(files)) pack.entry({ name }, content);
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const c of pack as AsyncIterable<Buffer>) chunks.push(c);
  return new Uint8Array(Buffer.concat(chunks));
}
