import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import path from "node:path";
import pg from "pg";

const root = path.resolve(import.meta.dirname, "../..");

/**
 * The PostgreSQL server of scripts/postgres.sh: AGENTWS_TEST_POSTGRES_URL when scripts/test set
 * it, else the script is started here. Undefined (with the reason printed) when none can run,
 * which fails under CI=true.
 */
export function postgresUrl(): string | undefined {
  if (process.env.AGENTWS_TEST_POSTGRES_URL) return process.env.AGENTWS_TEST_POSTGRES_URL;
  try {
    const out = execFileSync(path.join(root, "scripts/postgres.sh"), ["start"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 300_000 });
    const url = /AGENTWS_TEST_POSTGRES_URL=(\S+)/.exec(out)?.[1];
    if (url) return (process.env.AGENTWS_TEST_POSTGRES_URL = url);
  } catch (e) {
    const why = `PostgreSQL is not available (scripts/postgres.sh start failed: ${(e as Error).message.split("\n")[0]})`;
    if (process.env.CI === "true") throw new Error(why);
    console.warn(`skipping PostgreSQL tests: ${why}`);
  }
  return undefined;
}

/** A fresh database on that server for one test file; `drop` removes it. */
export async function freshDatabase(adminUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `agentws_t_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}
