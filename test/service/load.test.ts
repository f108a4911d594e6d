import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface, type Interface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqliteSessionStore, newToken } from "../../sdk/service/index.js";

/**
 * A bounded load on loopback: 200 concurrent sessions of 50 users doing mixed operations for 60 s
 * (AGENTWS_LOAD_SECONDS to change) against one service process (Local manager, SQLite). Asserts
 * integrity, never timing: no request that should succeed failed, every offloaded file is
 * present and intact, and the service's heap after a full GC is back near where it was after warm-up.
 */
const root = path.resolve(import.meta.dirname, "../..");
const SECONDS = Number(process.env.AGENTWS_LOAD_SECONDS ?? 60);
const USERS = 50;
const SESSIONS = 200;

let dir: string;
let child: ChildProcess;
let lines: Interface;
let url = "";
const tokens: string[] = [];

function next(type: string): Promise<Record<string, unknown>> {
  return new Promise((ok) => {
    const on = (line: string) => {
      const msg = JSON.parse(line) as Record<string, unknown>;
      if (msg.type === type) {
        lines.off("line", on);
        ok(msg);
      }
    };
    lines.on("line", on);
  });
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "load-"));
  const sqlite = path.join(dir, "sessions.db");
  const store = new SqliteSessionStore(sqlite);
  for (let u = 0; u < USERS; u++) {
    const t = newToken();
    await store.addTokenHash(`user${u}`, t.hash);
    tokens.push(t.token);
  }
  await store.close();
  child = spawn(
    process.execPath,
    [
      "--expose-gc",
      "--import",
      "tsx",
      path.join(root, "test/support/service-replica.ts"),
      JSON.stringify({ basedir: path.join(dir, "ws"), sqlite, secret: "s" }),
    ],
    { cwd: root, stdio: ["pipe", "pipe", "inherit"] },
  );
  lines = createInterface({ input: child.stdout! });
  url = String((await next("ready")).url);
}, 60_000);

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((ok) => child.once("exit", ok));
    child.stdin!.end();
    await exited;
  }
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function heap(): Promise<number> {
  const reply = next("heap");
  child.stdin!.write("gc\n");
  const msg = await reply;
  expect(msg.collected).toBe(true);
  return Number(msg.heapUsed);
}

describe("load: 200 sessions, 50 users, mixed operations", () => {
  it(
    `keeps every request and every offloaded file intact for ${SECONDS} s`,
    async () => {
      const failures: string[] = [];
      const offloaded: Array<{ token: string; sessionId: string; rel: string; sha: string; abs: string }> = [];
      const counts: Record<string, number> = {};
      const req = async (token: string, method: string, route: string, body?: unknown, want = 200): Promise<Response | undefined> => {
        const r = await fetch(`${url}${route}`, {
          method,
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        });
        const op = `${method} ${route.replace(/[0-9a-f]{32}/g, ":id").split("?")[0]}`;
        counts[op] = (counts[op] ?? 0) + 1;
        if (r.status !== want) {
          failures.push(`${op} → ${r.status} ${(await r.text()).slice(0, 200)}`);
          return undefined;
        }
        return r;
      };
      const sessions = await Promise.all(
        Array.from({ length: SESSIONS }, async (_, i) => {
          const token = tokens[i % USERS]!;
          const r = await req(token, "POST", "/sessions", { agentId: `agent${i % 3}` }, 201);
          const s = (await r!.json()) as { sessionId: string; workspaceId: string };
          return { token, ...s, root: path.join(dir, "ws", s.workspaceId) };
        }),
      );
      const round = async (s: (typeof sessions)[number], i: number) => {
        const w = `/sessions/${s.sessionId}/workspace`;
        switch (i % 6) {
          case 0:
          case 3: {
            const output = `${s.sessionId} ${i} `.repeat(50 + (i % 400));
            const r = await req(s.token, "POST", `${w}/offload/tool-result`, { id: `call-${i}`, output }, 201);
            if (r) {
              const rel = ((await r.json()) as { path: string }).path; // workspace-relative
              offloaded.push({
                token: s.token,
                sessionId: s.sessionId,
                abs: path.join(s.root, rel),
                rel,
                sha: createHash("sha256").update(output).digest("hex"),
              });
            }
            break;
          }
          case 1:
            await (await req(s.token, "GET", `${w}/directories?path=sessions`))?.arrayBuffer();
            break;
          case 2: {
            const last = offloaded.findLast((o) => o.sessionId === s.sessionId);
            if (last) {
              const r = await req(s.token, "GET", `${w}/files?path=${encodeURIComponent(last.rel)}`);
              if (
                r &&
                createHash("sha256")
                  .update(Buffer.from(await r.arrayBuffer()))
                  .digest("hex") !== last.sha
              )
                failures.push(`read back ${last.rel}: wrong bytes`);
            }
            break;
          }
          case 4:
            await (await req(s.token, "PATCH", `/sessions/${s.sessionId}`, { name: `round ${i}` }))?.arrayBuffer();
            break;
          case 5: {
            // Another user's session, on purpose: must stay refused under load.
            const other = sessions[(sessions.indexOf(s) + 1) % sessions.length]!;
            if (other.token !== s.token) await (await req(s.token, "GET", `/sessions/${other.sessionId}`, undefined, 404))?.arrayBuffer();
            break;
          }
        }
      };
      // Warm-up: one of each operation per session, then the baseline heap.
      for (let i = 0; i < 6; i++) await Promise.all(sessions.map((s) => round(s, i)));
      const baseline = await heap();
      const until = Date.now() + SECONDS * 1000;
      await Promise.all(
        sessions.map(async (s, k) => {
          for (let i = 6 + k; Date.now() < until; i++) await round(s, i);
        }),
      );
      const after = await heap();
      expect(failures).toEqual([]);
      expect(offloaded.length).toBeGreaterThan(SESSIONS);
      for (const o of offloaded)
        expect(
          createHash("sha256")
            .update(await fs.readFile(o.abs))
            .digest("hex"),
        ).toBe(o.sha);
      const names = new Set(offloaded.map((o) => o.abs));
      expect(names.size).toBe(offloaded.length); // no two acknowledged offloads share a file
      // Back near the start: the caches hold the same 150 workspaces; what grew with the load must be gone.
      expect(after).toBeLessThan(baseline + 16 * 1024 * 1024);
      console.log(
        `load: ${Object.values(counts).reduce((a, b) => a + b, 0)} requests in ${SECONDS} s, ${offloaded.length} offloads verified, heap ${(baseline / 2 ** 20).toFixed(1)} → ${(after / 2 ** 20).toFixed(1)} MiB`,
      );
    },
    (SECONDS + 240) * 1000,
  );
});
