import type pg from "pg";
import { ConflictError } from "../../errors.js";
import { requirePeer } from "../../util/peer.js";
import { SESSION_COLUMNS, applyPatch, fromRow, sessionQuotaError, toRow, type CreateOptions, type ListOptions, type SessionPatch, type SessionRecord, type SessionRow, type SessionStore } from "./store.js";

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
    const { Pool } = requirePeer<typeof pg>("pg", "PostgreSQL session store");
    const pool = new Pool({ connectionString, max: options.max ?? 10 });
    // An idle client losing its connection must not crash the process.
    pool.on("error", () => undefined);
    const client = await pool.connect();
    try {
      await client.query("SELECT pg_advisory_lock(727274)");
      await client.query(SCHEMA);
      await client.query("SELECT pg_advisory_unlock(727274)");
    } finally {
      client.release();
    }
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
      this.#pool.query<SessionRow>(`SELECT ${COLS} FROM agentws_sessions WHERE ${where} ORDER BY created_at, session_id LIMIT $3 OFFSET $4`, [userId, agent, o.limit, o.offset]),
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
      await client.query(`UPDATE agentws_sessions SET name = $1, cwd = $2, updated_at = $3 WHERE user_id = $4 AND session_id = $5`, [next.name, next.cwd, next.updatedAt, userId, sessionId]);
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

  async workspaceIds(): Promise<Set<string>> {
    const r = await this.#pool.query<{ workspace_id: string }>(`SELECT DISTINCT workspace_id FROM agentws_sessions`);
    return new Set(r.rows.map((x) => x.workspace_id));
  }

  async userForTokenHash(hash: string): Promise<string | undefined> {
    const r = await this.#pool.query<{ user_id: string }>(`SELECT user_id FROM agentws_api_tokens WHERE token_hash = $1`, [hash]);
    return r.rows[0]?.user_id;
  }

  async addTokenHash(userId: string, hash: string): Promise<void> {
    await this.#pool.query(`INSERT INTO agentws_api_tokens (token_hash, user_id, created_at) VALUES ($1, $2, $3) ON CONFLICT (token_hash) DO NOTHING`, [hash, userId, Date.now()]);
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }
}
