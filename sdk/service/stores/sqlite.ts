import { mkdirSync } from "node:fs";
import path from "node:path";
import type BetterSqlite3 from "better-sqlite3";
import { ConflictError } from "../../errors.js";
import { requirePeer } from "../../util/peer.js";
import { SESSION_COLUMNS, TOKEN_COLUMNS, applyPatch, sessionQuotaError, fromRow, newTokenRow, toRow, tokenFromRow } from "./store.js";
import { type CreateOptions, type ListOptions, type NewTokenOptions, type SessionPatch, type SessionRecord, type SessionRow } from "./store.js";
import { type SessionStore, type TokenRecord, type TokenRow } from "./store.js";

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
 * Columns the first token format (hash, user, created) lacks. Its tokens keep working as they did:
 * scopes read+write, no expiry, and a fresh id so they can be listed and revoked.
 */
const TOKEN_LIFECYCLE: Array<[string, string]> = [
  ["token_id", "TEXT"],
  ["scopes", "TEXT NOT NULL DEFAULT 'read,write'"],
  ["name", "TEXT"],
  ["expires_at", "INTEGER"],
  ["last_used_at", "INTEGER"],
  ["revoked_at", "INTEGER"],
];

/**
 * The default store: one SQLite file (`better-sqlite3`, an optional peer loaded on first use), WAL
 * mode so readers never wait for the writer. `":memory:"` gives a private in-process store.
 */
export class SqliteSessionStore implements SessionStore {
  readonly kind = "sqlite";
  readonly #db: BetterSqlite3.Database;
  readonly #stmts: ReturnType<SqliteSessionStore["prepare"]>;

  constructor(file: string) {
    const Database = requirePeer<typeof BetterSqlite3>("better-sqlite3", "the SQLite session store");
    if (file !== ":memory:") mkdirSync(path.dirname(path.resolve(file)), { recursive: true, mode: 0o700 });
    this.#db = new Database(file);
    this.#db.pragma("journal_mode = WAL");
    this.#db.pragma("busy_timeout = 5000");
    this.migrate();
    this.#stmts = this.prepare();
  }

  /** Idempotent, in one IMMEDIATE transaction: two processes opening one file migrate it once. */
  private migrate(): void {
    const db = this.#db;
    db.transaction(() => {
      db.exec(SCHEMA);
      const have = new Set((db.pragma("table_info(api_tokens)") as Array<{ name: string }>).map((c) => c.name));
      for (const [column, type] of TOKEN_LIFECYCLE) if (!have.has(column)) db.exec(`ALTER TABLE api_tokens ADD COLUMN ${column} ${type}`);
      db.exec(`UPDATE api_tokens SET token_id = 'tok_' || lower(hex(randomblob(8))) WHERE token_id IS NULL`);
      db.exec(
        `CREATE UNIQUE INDEX IF NOT EXISTS api_tokens_by_id ON api_tokens (token_id); CREATE INDEX IF NOT EXISTS api_tokens_by_user ON api_tokens (user_id, created_at)`,
      );
    }).immediate();
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
      count: db.prepare<[string, string | null, string | null], { n: number }>(
        `SELECT count(*) AS n FROM sessions WHERE user_id = ? AND (? IS NULL OR agent_id = ?)`,
      ),
      update: db.prepare(`UPDATE sessions SET name = ?, cwd = ?, updated_at = ? WHERE user_id = ? AND session_id = ?`),
      delete: db.prepare(`DELETE FROM sessions WHERE user_id = ? AND session_id = ?`),
      workspaces: db.prepare<[], { workspace_id: string }>(`SELECT DISTINCT workspace_id FROM sessions`),
      listAll: db.prepare<[string | null, string | null, string | null, string | null, number, number], SessionRow>(
        `SELECT ${cols} FROM sessions WHERE (? IS NULL OR user_id = ?) AND (? IS NULL OR agent_id = ?) ORDER BY created_at, session_id LIMIT ? OFFSET ?`,
      ),
      countAll: db.prepare<[string | null, string | null, string | null, string | null], { n: number }>(
        `SELECT count(*) AS n FROM sessions WHERE (? IS NULL OR user_id = ?) AND (? IS NULL OR agent_id = ?)`,
      ),
      token: db.prepare<[string, number], { user_id: string }>(
        `SELECT user_id FROM api_tokens WHERE token_hash = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`,
      ),
      addToken: db.prepare(`INSERT INTO api_tokens (token_id, token_hash, user_id, scopes, name, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`),
      tokenByHash: db.prepare<[string], TokenRow>(`SELECT ${TOKEN_COLUMNS} FROM api_tokens WHERE token_hash = ?`),
      tokenById: db.prepare<[string], TokenRow>(`SELECT ${TOKEN_COLUMNS} FROM api_tokens WHERE token_id = ?`),
      listTokens: db.prepare<[string | null, string | null, number, number], TokenRow>(
        `SELECT ${TOKEN_COLUMNS} FROM api_tokens WHERE (? IS NULL OR user_id = ?) AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at, token_id LIMIT ?`,
      ),
      revoke: db.prepare(`UPDATE api_tokens SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL AND (? IS NULL OR user_id = ?)`),
      touch: db.prepare(`UPDATE api_tokens SET last_used_at = ? WHERE token_id = ? AND (last_used_at IS NULL OR last_used_at <= ?)`),
      hasWorkspace: db.prepare<[string, string], { one: number }>(`SELECT 1 AS one FROM sessions WHERE user_id = ? AND workspace_id = ? LIMIT 1`),
    };
  }

  async createSession(record: SessionRecord, options: CreateOptions = {}): Promise<void> {
    const max = options.maxPerUser;
    try {
      if (max === undefined) this.#stmts.insert.run(...toRow(record));
      else if (this.#stmts.insertUnder.run(...toRow(record), record.userId, max).changes === 0) throw sessionQuotaError(max);
    } catch (e) {
      if ((e as { code?: string }).code === "SQLITE_CONSTRAINT_PRIMARYKEY")
        throw new ConflictError(`session '${record.sessionId}' already exists`, { field: "sessionId" });
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
    return this.#db
      .transaction(() => {
        const row = this.#stmts.get.get(userId, sessionId);
        if (!row) return undefined;
        const next = applyPatch(fromRow(row), patch, now);
        this.#stmts.update.run(next.name, next.cwd, next.updatedAt, userId, sessionId);
        return next;
      })
      .immediate();
  }

  async deleteSession(userId: string, sessionId: string): Promise<boolean> {
    return this.#stmts.delete.run(userId, sessionId).changes > 0;
  }

  async listAllSessions(o: ListOptions & { userId?: string | undefined }): Promise<{ sessions: SessionRecord[]; total: number }> {
    const user = o.userId ?? null;
    const agent = o.agentId ?? null;
    const rows = this.#stmts.listAll.all(user, user, agent, agent, o.limit, o.offset);
    return { sessions: rows.map(fromRow), total: this.#stmts.countAll.get(user, user, agent, agent)!.n };
  }

  async userHasWorkspace(userId: string, workspaceId: string): Promise<boolean> {
    return this.#stmts.hasWorkspace.get(userId, workspaceId) !== undefined;
  }

  async workspaceIds(): Promise<Set<string>> {
    return new Set(this.#stmts.workspaces.all().map((r) => r.workspace_id));
  }

  async userForTokenHash(hash: string): Promise<string | undefined> {
    return this.#stmts.token.get(hash, Date.now())?.user_id;
  }

  async addTokenHash(userId: string, hash: string, options?: NewTokenOptions): Promise<TokenRecord> {
    const { record, values } = newTokenRow(userId, hash, options);
    try {
      this.#stmts.addToken.run(...values);
    } catch (e) {
      if ((e as { code?: string }).code === "SQLITE_CONSTRAINT_PRIMARYKEY") throw new ConflictError("this token is already stored");
      throw e;
    }
    return record;
  }

  async tokenByHash(hash: string): Promise<TokenRecord | undefined> {
    const row = this.#stmts.tokenByHash.get(hash);
    return row ? tokenFromRow(row) : undefined;
  }

  async getToken(tokenId: string): Promise<TokenRecord | undefined> {
    const row = this.#stmts.tokenById.get(tokenId);
    return row ? tokenFromRow(row) : undefined;
  }

  async listTokens(userId: string | undefined, now: number, limit: number): Promise<TokenRecord[]> {
    const user = userId ?? null;
    return this.#stmts.listTokens.all(user, user, now, limit).map(tokenFromRow);
  }

  async revokeToken(tokenId: string, now: number, userId?: string): Promise<boolean> {
    const user = userId ?? null;
    return this.#stmts.revoke.run(now, tokenId, user, user).changes > 0;
  }

  async touchToken(tokenId: string, now: number, everyMs: number): Promise<void> {
    this.#stmts.touch.run(now, tokenId, now - everyMs);
  }

  async close(): Promise<void> {
    if (this.#db.open) this.#db.close();
  }
}
