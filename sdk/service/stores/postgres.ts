import type pg from "pg";
import { ConflictError } from "../../errors.js";
import { requirePeer } from "../../util/peer.js";
import { SESSION_COLUMNS, TOKEN_COLUMNS, applyPatch, sessionQuotaError, fromRow, newTokenRow, toRow, tokenFromRow } from "./store.js";
import { type CreateOptions, type ListOptions, type NewTokenOptions, type SessionPatch, type SessionRecord, type SessionRow } from "./store.js";
import { type SessionStore, type TokenRecord, type TokenRow } from "./store.js";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS agentws_sessions (
  session_id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  workspace_id TEXT NOT NULL,
  name TEXT NOT NULL,
  cwd TEXT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS agentws_sessions_by_user ON agentws_sessions (user_id, agent_id, created_at);
CREATE TABLE IF NOT EXISTS agentws_api_tokens (
  token_hash TEXT PRIMARY KEY,
  user_id TEXT NOT NULL,
  created_at BIGINT NOT NULL
);`;

/** A fresh public token id in SQL, for rows of the first format and for rows an older replica inserts. */
const SQL_TOKEN_ID = `'tok_' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 16)`;

/**
 * Columns the first token format (hash, user, created) lacks. Its tokens keep working as they did:
 * scopes read+write, no expiry, and a fresh id so they can be listed and revoked.
 */
const TOKEN_LIFECYCLE: Array<[string, string]> = [
  ["token_id", `TEXT`],
  ["scopes", "TEXT NOT NULL DEFAULT 'read,write'"],
  ["name", "TEXT"],
  ["expires_at", "BIGINT"],
  ["last_used_at", "BIGINT"],
  ["revoked_at", "BIGINT"],
];

const COLS = SESSION_COLUMNS.join(", ");

/**
 * PostgreSQL, for several service replicas sharing sessions (`pg`, an optional peer loaded on
 * first use). Tables are created on open under an advisory lock, so replicas starting together
 * do not race on the DDL.
 */
export class PostgresSessionStore implements SessionStore {
  readonly kind = "postgres";
  readonly #pool: pg.Pool;

  private constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  static async open(connectionString: string, options: { max?: number } = {}): Promise<PostgresSessionStore> {
    const { Pool } = requirePeer<typeof pg>("pg", "the PostgreSQL session store");
    const pool = new Pool({ connectionString, max: options.max ?? 10 });
    // An idle client losing its connection must not crash the process.
    pool.on("error", () => undefined);
    const client = await pool.connect();
    try {
      // One transaction under a transaction-scoped lock: a failed migration leaves neither half a
      // schema nor a held lock, and a replica opening meanwhile waits, then finds nothing to do.
      await client.query("BEGIN");
      await client.query("SELECT pg_advisory_xact_lock(727274)");
      await client.query(SCHEMA);
      const have = await client.query<{ column_name: string }>(
        `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'agentws_api_tokens'`,
      );
      const present = new Set(have.rows.map((r) => r.column_name));
      for (const [column, type] of TOKEN_LIFECYCLE) if (!present.has(column)) await client.query(`ALTER TABLE agentws_api_tokens ADD COLUMN ${column} ${type}`);
      if (!present.has("token_id")) {
        await client.query(`UPDATE agentws_api_tokens SET token_id = ${SQL_TOKEN_ID} WHERE token_id IS NULL`);
        await client.query(`ALTER TABLE agentws_api_tokens ALTER COLUMN token_id SET DEFAULT ${SQL_TOKEN_ID}, ALTER COLUMN token_id SET NOT NULL`);
      }
      await client.query(`CREATE UNIQUE INDEX IF NOT EXISTS agentws_api_tokens_by_id ON agentws_api_tokens (token_id)`);
      await client.query(`CREATE INDEX IF NOT EXISTS agentws_api_tokens_by_user ON agentws_api_tokens (user_id, created_at)`);
      await client.query("COMMIT");
    } catch (e) {
      await client.query("ROLLBACK").catch(() => undefined);
      client.release();
      await pool.end().catch(() => undefined);
      throw e;
    }
    client.release();
    return new PostgresSessionStore(pool);
  }

  async createSession(record: SessionRecord, options: CreateOptions = {}): Promise<void> {
    const max = options.maxPerUser;
    const client = max === undefined ? undefined : await this.#pool.connect();
    try {
      if (client === undefined) await this.#pool.query(`INSERT INTO agentws_sessions (${COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, toRow(record));
      else {
        // The user's advisory lock (held to COMMIT) orders creates across replicas; the count then
        // runs on a snapshot taken after the lock, so it sees every create committed before.
        await client.query("BEGIN");
        await client.query("SELECT pg_advisory_xact_lock(727275, hashtext($1))", [record.userId]);
        const r = await client.query(
          `INSERT INTO agentws_sessions (${COLS}) SELECT $1, $2, $3, $4, $5, $6, $7::bigint, $8::bigint WHERE (SELECT count(*) FROM agentws_sessions WHERE user_id = $2) < $9`,
          [...toRow(record), max],
        );
        await client.query("COMMIT");
        if (r.rowCount === 0) throw sessionQuotaError(max!);
      }
    } catch (e) {
      await client?.query("ROLLBACK").catch(() => undefined);
      if ((e as { code?: string }).code === "23505") throw new ConflictError(`session '${record.sessionId}' already exists`, { field: "sessionId" });
      throw e;
    } finally {
      client?.release();
    }
  }

  async getSession(userId: string, sessionId: string): Promise<SessionRecord | undefined> {
    const r = await this.#pool.query<SessionRow>(`SELECT ${COLS} FROM agentws_sessions WHERE user_id = $1 AND session_id = $2`, [userId, sessionId]);
    return r.rows[0] ? fromRow(r.rows[0]) : undefined;
  }

  async listSessions(userId: string, o: ListOptions): Promise<{ sessions: SessionRecord[]; total: number }> {
    const agent = o.agentId ?? null;
    const where = `user_id = $1 AND ($2::text IS NULL OR agent_id = $2)`;
    const [rows, count] = await Promise.all([
      this.#pool.query<SessionRow>(`SELECT ${COLS} FROM agentws_sessions WHERE ${where} ORDER BY created_at, session_id LIMIT $3 OFFSET $4`, [
        userId,
        agent,
        o.limit,
        o.offset,
      ]),
      this.#pool.query<{ n: string }>(`SELECT count(*) AS n FROM agentws_sessions WHERE ${where}`, [userId, agent]),
    ]);
    return { sessions: rows.rows.map(fromRow), total: Number(count.rows[0]!.n) };
  }

  async updateSession(userId: string, sessionId: string, patch: SessionPatch, now: number): Promise<SessionRecord | undefined> {
    const client = await this.#pool.connect();
    try {
      await client.query("BEGIN");
      // Row lock: a concurrent patch of the same session waits instead of being overwritten.
      const r = await client.query<SessionRow>(`SELECT ${COLS} FROM agentws_sessions WHERE user_id = $1 AND session_id = $2 FOR UPDATE`, [userId, sessionId]);
      if (!r.rows[0]) {
        await client.query("ROLLBACK");
        return undefined;
      }
      const next = applyPatch(fromRow(r.rows[0]), patch, now);
      await client.query(`UPDATE agentws_sessions SET name = $1, cwd = $2, updated_at = $3 WHERE user_id = $4 AND session_id = $5`, [
        next.name,
        next.cwd,
        next.updatedAt,
        userId,
        sessionId,
      ]);
      await client.query("COMMIT");
      return next;
    } catch (e) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw e;
    } finally {
      client.release();
    }
  }

  async deleteSession(userId: string, sessionId: string): Promise<boolean> {
    const r = await this.#pool.query(`DELETE FROM agentws_sessions WHERE user_id = $1 AND session_id = $2`, [userId, sessionId]);
    return (r.rowCount ?? 0) > 0;
  }

  async listAllSessions(o: ListOptions & { userId?: string | undefined }): Promise<{ sessions: SessionRecord[]; total: number }> {
    const args = [o.userId ?? null, o.agentId ?? null];
    const where = `($1::text IS NULL OR user_id = $1) AND ($2::text IS NULL OR agent_id = $2)`;
    const [rows, count] = await Promise.all([
      this.#pool.query<SessionRow>(`SELECT ${COLS} FROM agentws_sessions WHERE ${where} ORDER BY created_at, session_id LIMIT $3 OFFSET $4`, [
        ...args,
        o.limit,
        o.offset,
      ]),
      this.#pool.query<{ n: string }>(`SELECT count(*) AS n FROM agentws_sessions WHERE ${where}`, args),
    ]);
    return { sessions: rows.rows.map(fromRow), total: Number(count.rows[0]!.n) };
  }

  async userHasWorkspace(userId: string, workspaceId: string): Promise<boolean> {
    const r = await this.#pool.query(`SELECT 1 FROM agentws_sessions WHERE user_id = $1 AND workspace_id = $2 LIMIT 1`, [userId, workspaceId]);
    return (r.rowCount ?? 0) > 0;
  }

  async workspaceIds(): Promise<Set<string>> {
    const r = await this.#pool.query<{ workspace_id: string }>(`SELECT DISTINCT workspace_id FROM agentws_sessions`);
    return new Set(r.rows.map((x) => x.workspace_id));
  }

  async userForTokenHash(hash: string): Promise<string | undefined> {
    const r = await this.#pool.query<{ user_id: string }>(
      `SELECT user_id FROM agentws_api_tokens WHERE token_hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)`,
      [hash, Date.now()],
    );
    return r.rows[0]?.user_id;
  }

  async addTokenHash(userId: string, hash: string, options?: NewTokenOptions): Promise<TokenRecord> {
    const { record, values } = newTokenRow(userId, hash, options);
    try {
      await this.#pool.query(
        `INSERT INTO agentws_api_tokens (token_id, token_hash, user_id, scopes, name, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        values,
      );
    } catch (e) {
      if ((e as { code?: string }).code === "23505") throw new ConflictError("this token is already stored");
      throw e;
    }
    return record;
  }

  async tokenByHash(hash: string): Promise<TokenRecord | undefined> {
    const r = await this.#pool.query<TokenRow>(`SELECT ${TOKEN_COLUMNS} FROM agentws_api_tokens WHERE token_hash = $1`, [hash]);
    return r.rows[0] ? tokenFromRow(r.rows[0]) : undefined;
  }

  async getToken(tokenId: string): Promise<TokenRecord | undefined> {
    const r = await this.#pool.query<TokenRow>(`SELECT ${TOKEN_COLUMNS} FROM agentws_api_tokens WHERE token_id = $1`, [tokenId]);
    return r.rows[0] ? tokenFromRow(r.rows[0]) : undefined;
  }

  async listTokens(userId: string | undefined, now: number, limit: number): Promise<TokenRecord[]> {
    const r = await this.#pool.query<TokenRow>(
      `SELECT ${TOKEN_COLUMNS} FROM agentws_api_tokens WHERE ($1::text IS NULL OR user_id = $1) AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2) ORDER BY created_at, token_id LIMIT $3`,
      [userId ?? null, now, limit],
    );
    return r.rows.map(tokenFromRow);
  }

  async revokeToken(tokenId: string, now: number, userId?: string): Promise<boolean> {
    const r = await this.#pool.query(
      `UPDATE agentws_api_tokens SET revoked_at = $1 WHERE token_id = $2 AND revoked_at IS NULL AND ($3::text IS NULL OR user_id = $3)`,
      [now, tokenId, userId ?? null],
    );
    return (r.rowCount ?? 0) > 0;
  }

  async touchToken(tokenId: string, now: number, everyMs: number): Promise<void> {
    await this.#pool.query(`UPDATE agentws_api_tokens SET last_used_at = $1 WHERE token_id = $2 AND (last_used_at IS NULL OR last_used_at <= $3)`, [
      now,
      tokenId,
      now - everyMs,
    ]);
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }
}
