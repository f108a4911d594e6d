import { mkdirSync } from "node:fs";
import path from "node:path";
import type BetterSqlite3 from "better-sqlite3";
import { ConflictError } from "../../errors.js";
import { requirePeer } from "../../util/peer.js";
import { SESSION_COLUMNS, applyPatch, fromRow, sessionQuotaError, toRow, type CreateOptions, type ListOptions, type SessionPatch, type SessionRecord, type SessionRow, type SessionStore } from "./store.js";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS sessions (
  session_id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  workspace_id TEXT NOT NULL,
  name TEXT NOT NULL,
  cwd TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_user ON sessions (user_id, agent_id, created_at);
CREATE TABLE IF NOT EXISTS api_tokens (
  token_hash TEXT PRIMARY KEY,
  user_id TEXT NOT NULL,
  created_at INTEGER NOT NULL
);`;

/**
 * The default store: one SQLite file (`better-sqlite3`, an optional peer loaded on first use), WAL
 * mode so readers never wait for the writer. `":memory:"` gives a private in-process store.
 */
export class SqliteSessionStore implements SessionStore {
  readonly kind = "sqlite";
  readonly #db: BetterSqlite3.Database;
  readonly #stmts: ReturnType<SqliteSessionStore["prepare"]>;

  constructor(file: string) {
    const Database = requirePeer<typeof BetterSqlite3>("better-sqlite3", "SQLite session store");
    if (file !== ":memory:") mkdirSync(path.dirname(path.resolve(file)), { recursive: true, mode: 0o700 });
    this.#db = new Database(file);
    this.#db.pragma("journal_mode = WAL");
    this.#db.pragma("busy_timeout = 5000");
    this.#db.exec(SCHEMA);
    this.#stmts = this.prepare();
  }

  private prepare() {
    const db = this.#db;
    const cols = SESSION_COLUMNS.join(", ");
    return {
      insert: db.prepare(`INSERT INTO sessions (${cols}) VALUES (${SESSION_COLUMNS.map(() => "?").join(", ")})`),
      // One statement, so one write: two creates at the quota's edge cannot both see room.
      insertUnder: db.prepare(
        `INSERT INTO sessions (${cols}) SELECT ${SESSION_COLUMNS.map(() => "?").join(", ")} WHERE (SELECT count(*) FROM sessions WHERE user_id = ?) < ?`,
      ),
      get: db.prepare<[string, string], SessionRow>(`SELECT ${cols} FROM sessions WHERE user_id = ? AND session_id = ?`),
      list: db.prepare<[string, string | null, string | null, number, number], SessionRow>(
        `SELECT ${cols} FROM sessions WHERE user_id = ? AND (? IS NULL OR agent_id = ?) ORDER BY created_at, session_id LIMIT ? OFFSET ?`,
      ),
      count: db.prepare<[string, string | null, string | null], { n: number }>(`SELECT count(*) AS n FROM sessions WHERE user_id = ? AND (? IS NULL OR agent_id = ?)`),
      update: db.prepare(`UPDATE sessions SET name = ?, cwd = ?, updated_at = ? WHERE user_id = ? AND session_id = ?`),
      delete: db.prepare(`DELETE FROM sessions WHERE user_id = ? AND session_id = ?`),
      workspaces: db.prepare<[], { workspace_id: string }>(`SELECT DISTINCT workspace_id FROM sessions`),
      token: db.prepare<[string], { user_id: string }>(`SELECT user_id FROM api_tokens WHERE token_hash = ?`),
      addToken: db.prepare(`INSERT INTO api_tokens (token_hash, user_id, created_at) VALUES (?, ?, ?) ON CONFLICT (token_hash) DO NOTHING`),
    };
  }

  async createSession(record: SessionRecord, options: CreateOptions = {}): Promise<void> {
    const max = options.maxPerUser;
    try {
      if (max === undefined) this.#stmts.insert.run(...toRow(record));
      else if (this.#stmts.insertUnder.run(...toRow(record), record.userId, max).changes === 0) throw sessionQuotaError(max);
    } catch (e) {
      if ((e as { code?: string }).code === "SQLITE_CONSTRAINT_PRIMARYKEY") throw new ConflictError(`session '${record.sessionId}' already exists`, { field: "sessionId" });
      throw e;
    }
  }

  async getSession(userId: string, sessionId: string): Promise<SessionRecord | undefined> {
    const row = this.#stmts.get.get(userId, sessionId);
    return row ? fromRow(row) : undefined;
  }

  async listSessions(userId: string, o: ListOptions): Promise<{ sessions: SessionRecord[]; total: number }> {
    const agent = o.agentId ?? null;
    const rows = this.#stmts.list.all(userId, agent, agent, o.limit, o.offset);
    return { sessions: rows.map(fromRow), total: this.#stmts.count.get(userId, agent, agent)!.n };
  }

  async updateSession(userId: string, sessionId: string, patch: SessionPatch, now: number): Promise<SessionRecord | undefined> {
    // One transaction: a concurrent patch of another field is never lost.
    return this.#db.transaction(() => {
      const row = this.#stmts.get.get(userId, sessionId);
      if (!row) return undefined;
      const next = applyPatch(fromRow(row), patch, now);
      this.#stmts.update.run(next.name, next.cwd, next.updatedAt, userId, sessionId);
      return next;
    }).immediate();
  }

  async deleteSession(userId: string, sessionId: string): Promise<boolean> {
    return this.#stmts.delete.run(userId, sessionId).changes > 0;
  }

  async workspaceIds(): Promise<Set<string>> {
    return new Set(this.#stmts.workspaces.all().map((r) => r.workspace_id));
  }

  async userForTokenHash(hash: string): Promise<string | undefined> {
    return this.#stmts.token.get(hash)?.user_id;
  }

  async addTokenHash(userId: string, hash: string): Promise<void> {
    this.#stmts.addToken.run(hash, userId, Date.now());
  }

  async close(): Promise<void> {
    if (this.#db.open) this.#db.close();
  }
}
