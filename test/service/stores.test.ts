import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PostgresSessionStore, SqliteSessionStore, hashToken, newToken, type SessionRecord, type SessionStore } from "../../sdk/service/index.js";
import { freshDatabase, postgresUrl } from "../support/postgres.js";

/** The session store contract, on SQLite (a temp file) and on a real PostgreSQL server. */
const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

const pgAdmin = postgresUrl();
const stores: Array<[string, () => Promise<SessionStore>, boolean]> = [
  [
    "sqlite",
    async () => {
      const dir = await mkdtemp(path.join(tmpdir(), "store-"));
      cleanups.push(() => rm(dir, { recursive: true, force: true }));
      return new SqliteSessionStore(path.join(dir, "s.db"));
    },
    true,
  ],
  [
    "postgres",
    async () => {
      const db = await freshDatabase(pgAdmin!);
      cleanups.push(db.drop);
      return PostgresSessionStore.open(db.url);
    },
    pgAdmin !== undefined,
  ],
];

const record = (over: Partial<SessionRecord> = {}): SessionRecord => ({
  sessionId: `s${Math.random().toString(16).slice(2)}`,
  userId: "u1",
  agentId: "a1",
  workspaceId: "w1",
  name: "n",
  cwd: null,
  createdAt: Date.now(),
  updatedAt: Date.now(),
  ...over,
});

for (const [kind, open, available] of stores) {
  describe.skipIf(!available)(`${kind} session store`, () => {
    it("scopes every read and write by user, lists with totals and pages, and keeps tokens hashed", async () => {
      const store = await open();
      try {
        const a = record({ createdAt: 1 });
        const b = record({ createdAt: 2, agentId: "a2" });
        const other = record({ userId: "u2" });
        for (const r of [a, b, other]) await store.createSession(r);
        await expect(store.createSession(a)).rejects.toMatchObject({ code: "conflict" });
        expect(await store.getSession("u1", a.sessionId)).toEqual(a);
        expect(await store.getSession("u2", a.sessionId)).toBeUndefined();
        expect(await store.updateSession("u2", a.sessionId, { name: "stolen" }, 5)).toBeUndefined();
        expect(await store.deleteSession("u2", a.sessionId)).toBe(false);
        const all = await store.listSessions("u1", { limit: 10, offset: 0 });
        expect(all.total).toBe(2);
        expect(all.sessions.map((s) => s.sessionId)).toEqual([a.sessionId, b.sessionId]);
        expect((await store.listSessions("u1", { agentId: "a2", limit: 10, offset: 0 })).sessions).toEqual([b]);
        expect((await store.listSessions("u1", { limit: 1, offset: 1 })).sessions).toEqual([b]);
        const patched = await store.updateSession("u1", a.sessionId, { cwd: "docs" }, 9);
        expect(patched).toMatchObject({ name: "n", cwd: "docs", updatedAt: 9 });
        expect(await store.getSession("u1", a.sessionId)).toEqual(patched);
        expect(await store.workspaceIds()).toEqual(new Set(["w1"]));
        expect(await store.deleteSession("u1", a.sessionId)).toBe(true);
        expect(await store.getSession("u1", a.sessionId)).toBeUndefined();
        expect(await store.getSession("u2", other.sessionId)).toEqual(other);

        const t = newToken();
        await store.addTokenHash("u1", t.hash);
        expect(await store.userForTokenHash(hashToken(t.token))).toBe("u1");
        expect(await store.userForTokenHash(hashToken("guess"))).toBeUndefined();
        expect(t.hash).not.toContain(t.token);
      } finally {
        await store.close();
      }
    });

    it("loses no field under concurrent patches of one session", async () => {
      const store = await open();
      try {
        const r = record();
        await store.createSession(r);
        await Promise.all(Array.from({ length: 20 }, (_, i) => store.updateSession("u1", r.sessionId, i % 2 ? { name: `n${i}` } : { cwd: `c${i}` }, 10 + i)));
        const final = (await store.getSession("u1", r.sessionId))!;
        expect(final.name).toMatch(/^n\d+$/);
        expect(final.cwd).toMatch(/^c\d+$/);
      } finally {
        await store.close();
      }
    });
  });
}
