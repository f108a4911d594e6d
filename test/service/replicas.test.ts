import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresSessionStore, newToken } from "../../sdk/service/index.js";
import { freshDatabase, postgresUrl } from "../support/postgres.js";

/**
 * Two service processes sharing one PostgreSQL store and one basedir: they serve the same
 * sessions, never make a second copy of a workspace, and killing one in the middle of a load
 * loses no acknowledged session and no offloaded file (requests to the dead one are retried on the
 * other, as a load balancer would).
 */
const admin = postgresUrl();
const root = path.resolve(import.meta.dirname, "../..");

interface Replica {
  url: string;
  child: ChildProcess;
}

function startReplica(cfg: Record<string, unknown>): Promise<Replica> {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "test/support/service-replica.ts"), JSON.stringify(cfg)], {
    cwd: root,
    stdio: ["pipe", "pipe", "inherit"],
  });
  return new Promise((ok, fail) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on("line", (line) => {
      const msg = JSON.parse(line) as { type: string; url?: string };
      if (msg.type === "ready") ok({ url: msg.url!, child });
    });
    child.once("exit", (code) => fail(new Error(`replica exited (${code}) before it was ready`)));
  });
}

let dir: string;
let db: Awaited<ReturnType<typeof freshDatabase>> | undefined;
const replicas: Replica[] = [];
const tokens: Record<string, string> = {};
const USERS = Array.from({ length: 12 }, (_, i) => `user${i}`);

beforeAll(async () => {
  if (!admin) return;
  dir = await mkdtemp(path.join(tmpdir(), "replicas-"));
  db = await freshDatabase(admin);
  const store = await PostgresSessionStore.open(db.url);
  for (const u of USERS) {
    const t = newToken();
    await store.addTokenHash(u, t.hash);
    tokens[u] = t.token;
  }
  await store.close();
  const cfg = { basedir: path.join(dir, "workspaces"), postgres: db.url, secret: "shared-secret" };
  replicas.push(...(await Promise.all([startReplica(cfg), startReplica(cfg)])));
}, 120_000);

afterAll(async () => {
  for (const r of replicas)
    if (r.child.exitCode === null && r.child.signalCode === null) {
      const exited = new Promise((ok) => r.child.once("exit", ok));
      r.child.stdin!.end();
      await exited;
    }
  await db?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const call = (r: Replica, user: string, method: string, route: string, body?: unknown) =>
  fetch(`${r.url}${route}`, {
    method,
    headers: { authorization: `Bearer ${tokens[user]}`, "content-type": "application/json" },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });

/** Sends to `first`, and on a connection error (a dead replica) to the other one. */
async function balanced(first: number, user: string, method: string, route: string, body?: unknown): Promise<Response> {
  try {
    return await call(replicas[first]!, user, method, route, body);
  } catch {
    return call(replicas[1 - first]!, user, method, route, body);
  }
}

describe.skipIf(!admin)("two service replicas on one PostgreSQL store and one basedir", () => {
  it("serve the same sessions and provision each workspace once", async () => {
    const [a, b] = replicas as [Replica, Replica];
    // Every user opens a session for the same agent on both replicas at once: one workspace id per user.
    const created = await Promise.all(
      USERS.flatMap((u) =>
        [a, b].map(async (r) => (await (await call(r, u, "POST", "/sessions", { agentId: "shared" })).json()) as { sessionId: string; workspaceId: string }),
      ),
    );
    for (let i = 0; i < USERS.length; i++) expect(created[2 * i]!.workspaceId).toBe(created[2 * i + 1]!.workspaceId);
    const folders = (await fs.readdir(path.join(dir, "workspaces"))).filter((n) => !n.startsWith("."));
    expect(folders.sort()).toEqual([...new Set(created.map((c) => c.workspaceId))].sort());
    // A session made on A is served by B, files included.
    const s = created[0]!;
    const w = await call(a, USERS[0]!, "POST", `/sessions/${s.sessionId}/workspace/offload/tool-result`, { id: "from-a", output: "written via A" });
    expect(w.status).toBe(201);
    const rel = ((await w.json()) as { path: string }).path; // workspace-relative
    const read = await call(b, USERS[0]!, "GET", `/sessions/${s.sessionId}/workspace/files?path=${encodeURIComponent(rel)}`);
    expect(await read.text()).toBe("written via A");
    // A download token minted by A opens the file on B (one shared secret).
    const minted = (await (await call(a, USERS[0]!, "POST", `/sessions/${s.sessionId}/workspace/files/download-token`, { path: rel })).json()) as {
      url: string;
    };
    expect(await (await fetch(`${b.url}${minted.url}`)).text()).toBe("written via A");
    // And another user is refused on both.
    for (const r of [a, b]) expect((await call(r, USERS[1]!, "GET", `/sessions/${s.sessionId}`)).status).toBe(404);
  }, 120_000);

  it("lose no session and no offloaded file when one is killed mid-load", async () => {
    const acknowledged: Array<{ user: string; sessionId: string; path: string; sha: string; workspaceId: string }> = [];
    const sessions: Array<{ user: string; sessionId: string; workspaceId: string }> = [];
    const failures: string[] = [];
    let stop = false;
    const worker = async (w: number) => {
      const user = USERS[w % USERS.length]!;
      for (let i = 0; !stop; i++) {
        const created = await balanced(i % 2, user, "POST", "/sessions", { agentId: `load-${w % 3}` });
        if (created.status !== 201) {
          failures.push(`create ${created.status}`);
          continue;
        }
        const s = (await created.json()) as { sessionId: string; workspaceId: string };
        sessions.push({ user, ...s });
        const output = `worker ${w} round ${i} `.repeat(200 + i);
        const off = await balanced((i + 1) % 2, user, "POST", `/sessions/${s.sessionId}/workspace/offload/tool-result`, { id: `w${w}-r${i}`, output });
        if (off.status !== 201) {
          failures.push(`offload ${off.status} ${await off.text()}`);
          continue;
        }
        acknowledged.push({
          user,
          sessionId: s.sessionId,
          workspaceId: s.workspaceId,
          path: ((await off.json()) as { path: string }).path,
          sha: createHash("sha256").update(output).digest("hex"),
        });
      }
    };
    const workers = Array.from({ length: 16 }, (_, w) => worker(w));
    await new Promise((r) => setTimeout(r, 4000));
    replicas[0]!.child.kill("SIGKILL");
    await new Promise((r) => setTimeout(r, 4000));
    stop = true;
    await Promise.all(workers);
    expect(failures).toEqual([]);
    expect(acknowledged.length).toBeGreaterThan(20);
    const survivor = replicas[1]!;
    for (const s of sessions) expect((await call(survivor, s.user, "GET", `/sessions/${s.sessionId}`)).status).toBe(200);
    for (const f of acknowledged) {
      const r = await call(survivor, f.user, "GET", `/sessions/${f.sessionId}/workspace/files?path=${encodeURIComponent(f.path)}`);
      expect(r.status).toBe(200);
      expect(
        createHash("sha256")
          .update(Buffer.from(await r.arrayBuffer()))
          .digest("hex"),
      ).toBe(f.sha);
    }
  }, 120_000);
});
