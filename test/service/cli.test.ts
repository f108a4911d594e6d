import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/** `agentws token`, `serve`, `status` and `exec` as processes, against a temp store and basedir. */
const root = path.resolve(import.meta.dirname, "../..");
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "cli-svc-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Runs the CLI from source; `onStderr` sees lines as they come. */
function agentws(args: string[], onStderr?: (line: string, child: ReturnType<typeof spawn>) => void) {
  const code = `import(${JSON.stringify(path.join(root, "sdk/cli/main.ts"))}).then(async (m) => { process.exitCode = await m.main(${JSON.stringify(args)}); })`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "--eval", code], {
    cwd: root,
    env: { ...process.env, AGENTWS_DOWNLOAD_SECRET: "s" },
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
    for (const line of d.toString().split("\n")) if (line) onStderr?.(line, child);
  });
  return {
    child,
    done: new Promise<{ code: number | null; stdout: string; stderr: string }>((ok) => child.once("exit", (code) => ok({ code, stdout, stderr }))),
  };
}

describe("agentws serve, token, status, exec", () => {
  it("serves sessions with a token it issued, lists and execs in the workspace, and shuts down gracefully on SIGTERM", async () => {
    const store = path.join(dir, "sessions.db");
    const basedir = path.join(dir, "ws");
    const issued = await agentws(["token", "carol", "--store", store]).done;
    expect(issued.code).toBe(0);
    const token = issued.stdout.trim();
    expect(token).toMatch(/^aws_/);
    expect(issued.stderr).not.toContain(token);

    let url = "";
    let ready: () => void;
    const listening = new Promise<void>((ok) => (ready = ok));
    const serve = agentws(["serve", "--no-stack", "--store", store, "--basedir", basedir, "--port", "0"], (line) => {
      const m = /at (http:\/\/127\.0\.0\.1:\d+)/.exec(line);
      if (m) {
        url = m[1]!;
        ready();
      }
    });
    await listening;
    const auth = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    const created = await fetch(`${url}/sessions`, { method: "POST", headers: auth, body: JSON.stringify({ agentId: "cli-agent" }) });
    expect(created.status).toBe(201);
    const { sessionId, workspaceId } = (await created.json()) as { sessionId: string; workspaceId: string };
    await writeFile(path.join(basedir, workspaceId, "hello.txt"), "hi from the host");
    // A slow request in flight when SIGTERM arrives still gets its answer.
    const slow = fetch(`${url}/sessions/${sessionId}/mcp`, {
      method: "POST",
      headers: { ...auth, accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "Bash", arguments: { command: "sleep 1; echo finished" } } }),
    });
    await new Promise((r) => setTimeout(r, 300));
    serve.child.kill("SIGTERM");
    const answer = await slow;
    expect(answer.status).toBe(200);
    expect(await answer.text()).toContain("finished");
    const ended = await serve.done;
    expect(ended.code).toBe(0);
    expect(ended.stderr).toContain("shutting down");
    expect(ended.stderr).toMatch(/"requestId":"[^"]+"/);
    expect(ended.stderr).not.toContain(token);

    const status = await agentws(["status", "--kind", "local", "--basedir", basedir, "--json"]).done;
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toEqual([
      expect.objectContaining({ workspace: workspaceId, backend: "local", owner: "carol", agent: "cli-agent", managed: "runtime" }),
    ]);
    const table = await agentws(["status", "--kind", "local", "--basedir", basedir]).done;
    expect(table.stdout).toMatch(/^WORKSPACE\s+BACKEND\s+STATE\s+OWNER\s+AGENT\s+MANAGED\s+IDLE/);
    const exec = await agentws(["exec", workspaceId, "--kind", "local", "--basedir", basedir, "--", "cat", "hello.txt"]).done;
    expect(exec).toMatchObject({ code: 0, stdout: "hi from the host" });
    const failing = await agentws(["exec", workspaceId, "--kind", "local", "--basedir", basedir, "--", "sh", "-c", "exit 3"]).done;
    expect(failing.code).toBe(3);
  }, 300_000);
});
