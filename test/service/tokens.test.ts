import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import BetterSqlite3 from "better-sqlite3";
import pg from "pg";
import { afterAll, describe, expect, it, vi } from "vitest";
import { LocalWorkspaceManager } from "../../sdk/backends/local/index.js";
import { main } from "../../sdk/cli/main.js";
import {
  PostgresSessionStore,
  SqliteSessionStore,
  anyTokenAuth,
  createApp,
  hashToken,
  newToken,
  startService,
  storeTokenAuth,
  tokenFileAuth,
  type SessionStore,
} from "../../sdk/service/index.js";
import { freshDatabase, postgresUrl } from "../support/postgres.js";
import { startTestService, type Running } from "./service-fixture.js";

/**
 * Token lifecycle through the real service: expiry, revocation (seen by another replica on the
 * next request), scopes per route, the admin routes, listing without secrets, last-used times, and
 * the migration of a store of the first token format. On SQLite, and on PostgreSQL when it runs.
 */
const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "tokens-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** The first token format, as the stores created it before tokens had a lifecycle. */
const OLD_SQLITE = `CREATE TABLE IF NOT EXISTS api_tokens (token_hash TEXT PRIMARY KEY, user_id TEXT NOT NULL, created_at INTEGER NOT NULL);`;
const OLD_PG = `CREATE TABLE IF NOT EXISTS agentws_api_tokens (token_hash TEXT PRIMARY KEY, user_id TEXT NOT NULL, created_at BIGINT NOT NULL);`;

interface Backend {
  /** A new, empty database; `open()` gives a store on it (call it twice for two replicas). */
  fresh(): Promise<{ open(): Promise<SessionStore>; oldFormat(hash: string, user: string): Promise<void> }>;
}

const pgAdmin = postgresUrl();
const backends: Array<[string, Backend, boolean]> = [
  [
    "sqlite",
    {
      fresh: async () => {
        const file = path.join(await tempDir(), "s.db");
        return {
          open: async () => new SqliteSessionStore(file),
          oldFormat: async (hash, user) => {
            const db = new BetterSqlite3(file);
            db.exec(OLD_SQLITE);
            db.prepare(`INSERT INTO api_tokens (token_hash, user_id, created_at) VALUES (?, ?, ?)`).run(hash, user, 1);
            db.close();
          },
        };
      },
    },
    true,
  ],
  [
    "postgres",
    {
      fresh: async () => {
        const db = await freshDatabase(pgAdmin!);
        cleanups.push(db.drop);
        return {
          open: () => PostgresSessionStore.open(db.url),
          oldFormat: async (hash, user) => {
            const c = new pg.Client({ connectionString: db.url });
            await c.connect();
            await c.query(OLD_PG);
            await c.query(`INSERT INTO agentws_api_tokens (token_hash, user_id, created_at) VALUES ($1, $2, $3)`, [hash, user, 1]);
            await c.end();
          },
        };
      },
    },
    pgAdmin !== undefined,
  ],
];

/** A bearer call with a raw token. */
const call = (s: { url: string }, token: string | null, method: string, route: string, body?: unknown) =>
  fetch(`${s.url}${route}`, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });

async function started(store: SessionStore, users: string[] = ["alice", "bob"]): Promise<Running> {
  const s = await startTestService({ store, users });
  cleanups.push(() => s.close());
  return s;
}

async function mint(store: SessionStore, user: string, options: Parameters<SessionStore["addTokenHash"]>[2] = {}): Promise<{ token: string; tokenId: string }> {
  const t = newToken();
  const r = await store.addTokenHash(user, t.hash, options);
  return { token: t.token, tokenId: r.tokenId };
}

for (const [kind, backend, available] of backends) {
  describe.skipIf(!available)(`token lifecycle (${kind})`, () => {
    it("answers 401 with WWW-Authenticate: Bearer for a missing, unknown or expired token, the MCP endpoint included", async () => {
      const db = await backend.fresh();
      const store = await db.open();
      const s = await started(store);
      const expired = await mint(store, "alice", { expiresAt: Date.now() - 1000 });
      const cases: Array<[string | null, string, string]> = [
        [null, "GET", "/sessions"],
        [null, "POST", "/sessions/abc/mcp"],
        [expired.token, "GET", "/sessions"],
        [expired.token, "POST", "/sessions/abc/mcp"],
        ["aws_not-a-token", "GET", "/tokens"],
      ];
      for (const [token, method, route] of cases) {
        const r = await call(s, token, method, route, method === "POST" ? {} : undefined);
        expect(r.status, `${method} ${route}`).toBe(401);
        expect(r.headers.get("www-authenticate"), `${method} ${route}`).toMatch(/^Bearer realm="agent-workspaces"/);
        const body = (await r.json()) as { detail: string };
        if (token) expect(r.headers.get("www-authenticate")).toContain('error="invalid_token"');
        if (token) expect(body.detail).not.toContain(token);
      }
      expect(((await (await call(s, expired.token, "GET", "/sessions")).json()) as { detail: string }).detail).toMatch(/expired/);
      // The same token a second earlier would have worked: only the expiry refuses it.
      expect((await call(s, (await mint(store, "alice", { expiresAt: Date.now() + 60_000 })).token, "GET", "/sessions")).status).toBe(200);
    });

    it("refuses a revoked token on the very next request, on another replica too", async () => {
      const db = await backend.fresh();
      const a = await started(await db.open());
      const b = await started(await db.open(), []);
      const made = await call(a, a.tokens.alice!, "POST", "/tokens", { name: "laptop", scopes: ["read"] });
      expect(made.status).toBe(201);
      const { token, tokenId } = (await made.json()) as { token: string; tokenId: string };
      expect(tokenId).toMatch(/^tok_[0-9a-f]{16}$/);
      expect((await call(b, token, "GET", "/sessions")).status).toBe(200);
      // Bob cannot revoke alice's token: it is not his (404, nothing revoked).
      expect((await call(a, a.tokens.bob!, "DELETE", `/tokens/${tokenId}`)).status).toBe(404);
      expect((await call(b, token, "GET", "/sessions")).status).toBe(200);
      expect((await call(a, a.tokens.alice!, "DELETE", `/tokens/${tokenId}`)).status).toBe(204);
      const r = await call(b, token, "GET", "/sessions");
      expect(r.status).toBe(401);
      expect(r.headers.get("www-authenticate")).toContain("Bearer");
      expect((await call(a, token, "GET", "/sessions")).status).toBe(401);
      // Revoking twice: no such live token.
      expect((await call(a, a.tokens.alice!, "DELETE", `/tokens/${tokenId}`)).status).toBe(404);
    });

    it("lets a read-only token read and refuses its writes with a 403 naming the scope", async () => {
      const db = await backend.fresh();
      const store = await db.open();
      const s = await started(store);
      const created = await call(s, s.tokens.alice!, "POST", "/sessions", { agentId: "a1" });
      expect(created.status).toBe(201);
      const { sessionId } = (await created.json()) as { sessionId: string };
      const reader = await mint(store, "alice", { scopes: ["read"] });
      expect((await call(s, reader.token, "GET", "/sessions")).status).toBe(200);
      expect((await call(s, reader.token, "GET", `/sessions/${sessionId}`)).status).toBe(200);
      expect((await call(s, reader.token, "GET", "/tokens")).status).toBe(200);
      // A download link grants a read: a read token may mint one.
      expect((await call(s, reader.token, "POST", `/sessions/${sessionId}/workspace/files/download-token`, { path: "notes.md" })).status).toBe(200);
      for (const [method, route, body] of [
        ["POST", "/sessions", { agentId: "a2" }],
        ["PATCH", `/sessions/${sessionId}`, { name: "x" }],
        ["DELETE", `/sessions/${sessionId}`, undefined],
        ["POST", `/sessions/${sessionId}/mcp`, { jsonrpc: "2.0", id: 1, method: "tools/list" }],
        ["POST", "/tokens", {}],
      ] as const) {
        const r = await call(s, reader.token, method, route, body);
        expect(r.status, `${method} ${route}`).toBe(403);
        expect(((await r.json()) as { detail: string }).detail).toContain("'write' scope");
        expect(r.headers.get("www-authenticate")).toContain('error="insufficient_scope", scope="write"');
      }
      // Nothing changed.
      expect(((await (await call(s, s.tokens.alice!, "GET", "/sessions")).json()) as { total: number }).total).toBe(1);
    });

    it("gives an admin token every user's sessions and tokens, and refuses the admin routes to others", async () => {
      const db = await backend.fresh();
      const store = await db.open();
      const s = await started(store);
      for (const user of ["alice", "bob"]) expect((await call(s, s.tokens[user]!, "POST", "/sessions", { agentId: `${user}-agent` })).status).toBe(201);
      const admin = await mint(store, "operator", { scopes: ["admin"] });
      // An encoded path is the same route to the scope check as to the router.
      for (const route of ["/admin/sessions", "/admin/tokens", "/admin/sessions?userId=bob", "/%61dmin/sessions"]) {
        const r = await call(s, s.tokens.alice!, "GET", route);
        expect(r.status, route).toBe(403);
        expect(((await r.json()) as { detail: string }).detail).toContain("'admin' scope");
      }
      expect((await call(s, s.tokens.alice!, "DELETE", "/admin/users/bob/sessions/x")).status).toBe(403);
      const all = (await (await call(s, admin.token, "GET", "/admin/sessions")).json()) as {
        sessions: Array<{ userId: string; sessionId: string }>;
        total: number;
      };
      expect(all.total).toBe(2);
      expect(all.sessions.map((x) => x.userId).sort()).toEqual(["alice", "bob"]);
      const bobs = (await (await call(s, admin.token, "GET", "/admin/sessions?userId=bob")).json()) as {
        sessions: Array<{ sessionId: string }>;
        total: number;
      };
      expect(bobs.total).toBe(1);
      // An admin-only token is no read token of its own sessions.
      expect((await call(s, admin.token, "GET", "/sessions")).status).toBe(403);

      const tokens = (await (await call(s, admin.token, "GET", "/admin/tokens")).json()) as { tokens: Array<{ userId: string; tokenId: string }> };
      expect(new Set(tokens.tokens.map((t) => t.userId))).toEqual(new Set(["alice", "bob", "operator"]));
      const bobsToken = tokens.tokens.find((t) => t.userId === "bob")!;

      // Acting on bob's session: delete it (purged as bob's own delete would), then revoke bob's token.
      const bobSession = bobs.sessions[0]!.sessionId;
      expect((await call(s, admin.token, "DELETE", `/admin/users/alice/sessions/${bobSession}`)).status).toBe(404);
      expect((await call(s, admin.token, "DELETE", `/admin/users/bob/sessions/${bobSession}`)).status).toBe(204);
      expect((await call(s, s.tokens.bob!, "GET", `/sessions/${bobSession}`)).status).toBe(404);
      expect((await call(s, admin.token, "DELETE", `/admin/tokens/${bobsToken.tokenId}`)).status).toBe(204);
      expect((await call(s, s.tokens.bob!, "GET", "/sessions")).status).toBe(401);
      // A read+write+admin token may revoke anyone's through /tokens as well.
      const op = await mint(store, "operator", { scopes: ["read", "write", "admin"] });
      const alices = tokens.tokens.find((t) => t.userId === "alice")!;
      expect((await call(s, op.token, "DELETE", `/tokens/${alices.tokenId}`)).status).toBe(204);
      expect((await call(s, s.tokens.alice!, "GET", "/sessions")).status).toBe(401);
    });

    it("lists a user's own live tokens without hashes or secrets, and mints within the caller's scopes and expiry", async () => {
      const db = await backend.fresh();
      const store = await db.open();
      const s = await started(store);
      const made = await call(s, s.tokens.alice!, "POST", "/tokens", { name: "ci", scopes: ["read"], expiresInSeconds: 3600 });
      expect(made.status).toBe(201);
      const created = (await made.json()) as { token: string; tokenId: string; scopes: string[]; expiresAt: string };
      expect(created.scopes).toEqual(["read"]);
      expect(Date.parse(created.expiresAt)).toBeGreaterThan(Date.now() + 3500_000);

      const listed = await (await call(s, s.tokens.alice!, "GET", "/tokens")).text();
      const { tokens } = JSON.parse(listed) as { tokens: Array<Record<string, unknown>> };
      expect(tokens.map((t) => t.name)).toEqual([null, "ci"]);
      for (const t of tokens) expect(Object.keys(t).sort()).toEqual(["createdAt", "expiresAt", "lastUsedAt", "name", "scopes", "tokenId", "userId"]);
      for (const secret of [created.token, s.tokens.alice!, hashToken(created.token), hashToken(s.tokens.alice!).slice(7), "sha256:"])
        expect(listed).not.toContain(secret);
      // Bob's tokens are not alice's business.
      expect(((await (await call(s, s.tokens.bob!, "GET", "/tokens")).json()) as { tokens: unknown[] }).tokens).toHaveLength(1);

      // Scopes within the caller's: no admin from a read+write token.
      const escalate = await call(s, s.tokens.alice!, "POST", "/tokens", { scopes: ["read", "admin"] });
      expect(escalate.status).toBe(403);
      expect(((await escalate.json()) as { detail: string }).detail).toContain("'admin'");
      expect((await call(s, s.tokens.alice!, "POST", "/tokens", { scopes: ["root"] })).status).toBe(400);
      // A token with an expiry mints no token outliving it; by default the child inherits the expiry.
      const short = await mint(store, "alice", { expiresAt: Date.now() + 600_000 });
      const longer = await call(s, short.token, "POST", "/tokens", { expiresInSeconds: 3600 });
      expect(longer.status).toBe(400);
      expect(((await longer.json()) as { field: string }).field).toBe("body.expiresInSeconds");
      const child = (await (await call(s, short.token, "POST", "/tokens", {})).json()) as { expiresAt: string };
      expect(child.expiresAt).toBe(new Date((await store.getToken(short.tokenId))!.expiresAt!).toISOString());
    });

    it("records the last use, at most once a minute per token", async () => {
      const db = await backend.fresh();
      const store = await db.open();
      const s = await started(store);
      const t = await mint(store, "alice");
      expect((await store.getToken(t.tokenId))!.lastUsedAt).toBeNull();
      const before = Date.now();
      expect((await call(s, t.token, "GET", "/sessions")).status).toBe(200);
      const first = (await store.getToken(t.tokenId))!.lastUsedAt!;
      expect(first).toBeGreaterThanOrEqual(before);
      expect((await call(s, t.token, "GET", "/sessions")).status).toBe(200);
      expect((await store.getToken(t.tokenId))!.lastUsedAt).toBe(first);
      const listed = (await (await call(s, t.token, "GET", "/tokens")).json()) as { tokens: Array<{ tokenId: string; lastUsedAt: string }> };
      expect(listed.tokens.find((x) => x.tokenId === t.tokenId)!.lastUsedAt).not.toBeNull();
    });

    it("migrates a store of the first token format: its tokens keep working (read+write, no expiry) and can be revoked", async () => {
      const db = await backend.fresh();
      const old = newToken();
      await db.oldFormat(old.hash, "legacy");
      // Replicas opening the old store at once: one migrates, the others find it done.
      const stores = await Promise.all([db.open(), db.open(), db.open()]);
      for (const st of stores.slice(1)) await st.close();
      const store = stores[0]!;
      const [record] = await store.listTokens("legacy", Date.now(), 10);
      expect(record).toMatchObject({ userId: "legacy", scopes: ["read", "write"], expiresAt: null, revokedAt: null, createdAt: 1 });
      expect(record!.tokenId).toMatch(/^tok_[0-9a-f]{16}$/);
      expect(await store.userForTokenHash(old.hash)).toBe("legacy");
      // Opening again changes nothing (same id).
      const again = await db.open();
      expect((await again.tokenByHash(old.hash))!.tokenId).toBe(record!.tokenId);
      await again.close();

      const s = await started(store, []);
      expect((await call(s, old.token, "POST", "/sessions", { agentId: "a" })).status).toBe(201);
      expect((await call(s, old.token, "GET", "/admin/sessions")).status).toBe(403);
      expect((await call(s, old.token, "DELETE", `/tokens/${record!.tokenId}`)).status).toBe(204);
      expect((await call(s, old.token, "GET", "/sessions")).status).toBe(401);
    });
  });
}

describe("token files and the CLI", () => {
  it("gives token-file entries their scopes (admin included) beside the store's tokens", async () => {
    const dir = await tempDir();
    const store = new SqliteSessionStore(path.join(dir, "s.db"));
    const plain = newToken();
    const admin = newToken();
    const file = path.join(dir, "tokens.json");
    await writeFile(file, JSON.stringify({ users: { ops: [{ hash: admin.hash, scopes: ["read", "admin"] }], carol: [plain.hash] } }));
    const manager = new LocalWorkspaceManager({ basedir: path.join(dir, "ws"), ttl: 600 });
    const { app, dispose } = createApp({
      workspaceManager: manager,
      sessionStore: store,
      auth: anyTokenAuth(tokenFileAuth(file), storeTokenAuth(store)),
      processMetrics: false,
    });
    const s = await startService({
      app,
      onClose: async () => {
        dispose();
        await manager[Symbol.asyncDispose]();
        await store.close();
      },
    });
    cleanups.push(() => s.close());
    expect((await call(s, plain.token, "POST", "/sessions", { agentId: "a" })).status).toBe(201);
    expect((await call(s, plain.token, "GET", "/admin/sessions")).status).toBe(403);
    const all = (await (await call(s, admin.token, "GET", "/admin/sessions")).json()) as { total: number };
    expect(all.total).toBe(1);
    expect((await call(s, admin.token, "POST", "/sessions", { agentId: "a" })).status).toBe(403);
    await writeFile(file, JSON.stringify({ users: { ops: [{ hash: admin.hash, scopes: ["root"] }] } }));
    expect(() => tokenFileAuth(file)).toThrow(/tokens\.users/);
  });

  it("agentws token create, list and revoke; `agentws token <user>` still creates", async () => {
    const dir = await tempDir();
    const storeFile = path.join(dir, "s.db");
    const created = await agentws(["token", "create", "dana", "--scopes", "read", "--expires", "30d", "--name", "laptop", "--store", storeFile]);
    expect(created.code).toBe(0);
    const token = created.stdout.trim();
    expect(token).toMatch(/^aws_/);
    expect(created.stderr).not.toContain(token);
    const alias = await agentws(["token", "erin", "--store", storeFile]);
    expect(alias.code).toBe(0);
    expect(alias.stderr).toContain("never expires");
    expect((await agentws(["token", "create", "x", "--expires", "soon", "--store", storeFile])).code).toBe(1);

    const listed = await agentws(["token", "list", "--store", storeFile]);
    expect(listed.code).toBe(0);
    expect(listed.stdout).not.toContain(token);
    expect(listed.stdout).not.toContain("sha256:");
    const { tokens } = JSON.parse(listed.stdout) as {
      tokens: Array<{ tokenId: string; userId: string; scopes: string[]; name: string | null; expiresAt: string | null }>;
    };
    const dana = tokens.find((t) => t.userId === "dana")!;
    expect(dana).toMatchObject({ scopes: ["read"], name: "laptop" });
    expect(Date.parse(dana.expiresAt!)).toBeGreaterThan(Date.now() + 29 * 86_400_000);
    expect(tokens.map((t) => t.userId).sort()).toEqual(["dana", "erin"]);

    expect((await agentws(["token", "revoke", dana.tokenId, "--store", storeFile])).code).toBe(0);
    const store = new SqliteSessionStore(storeFile);
    try {
      expect(await store.userForTokenHash(hashToken(token))).toBeUndefined();
      expect((await store.listTokens(undefined, Date.now(), 10)).map((t) => t.userId)).toEqual(["erin"]);
    } finally {
      await store.close();
    }
    expect((await agentws(["token", "revoke", dana.tokenId, "--store", storeFile])).code).toBe(1);
  });
});

/** Runs the CLI in this process, its stdout and stderr captured. */
async function agentws(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = { stdout: "", stderr: "" };
  const capture = (stream: "stdout" | "stderr") =>
    vi.spyOn(process[stream], "write").mockImplementation((chunk: string | Uint8Array) => {
      out[stream] += chunk.toString();
      return true;
    });
  const spies = [capture("stdout"), capture("stderr")];
  try {
    return { code: await main(args), ...out };
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
}
