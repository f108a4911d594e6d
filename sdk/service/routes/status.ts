import { createRoute, type OpenAPIHono } from "@hono/zod-openapi";
import type { Sandbox } from "../../sandbox.js";
import { resolve, type ServiceContext, type ServiceEnv } from "../context.js";
import { SessionParams, WorkspaceStatus } from "../schemas.js";
import { WORKSPACE, json, problemResponses } from "./openapi-common.js";

const GIT_TIMEOUT_MS = 5000;
const GIT_OUTPUT_BYTES = 4 * 1024 * 1024;

export interface GitSummary {
  branch: string | null;
  head: string | null;
  ahead: number | null;
  behind: number | null;
  staged: number;
  unstaged: number;
  untracked: number;
  conflicted: number;
  insertions: number;
  deletions: number;
}

/**
 * Backend, state, idle time and a git summary of the session's cwd (the reference's section 9.5,
 * plus backend and idle time; without its absolute workdir, a host path on host backends).
 */
export function statusRoutes(app: OpenAPIHono<ServiceEnv>, svc: ServiceContext): void {
  app.openapi(
    createRoute({
      method: "get",
      path: "/sessions/{sessionId}/workspace/status",
      operationId: "getWorkspaceStatus",
      tags: ["workspace"],
      summary: "Backend, state, idle time and a git summary of the session's cwd",
      request: { params: SessionParams },
      responses: { 200: json(WorkspaceStatus, "Status"), ...problemResponses(...WORKSPACE) },
    }),
    async (c) => {
      const { record, ws } = await resolve(svc, c);
      // Read before this request's own operations count as activity.
      const idleSeconds = Math.max(0, (Date.now() - ws.lastActivityAt) / 1000);
      const inFlight = ws.inFlight;
      const sandbox = ws.getBackend();
      const cwd = record.cwd ?? "";
      const git = await gitSummary(sandbox, cwd);
      return c.json(
        {
          workspaceId: ws.workspaceId,
          backend: sandbox.kind,
          state: ws.isAlive ? ("running" as const) : ("closed" as const),
          // Workspace-relative ("" is the root): the workdir itself is a host path on host backends.
          cwd,
          idleSeconds,
          inFlight,
          git,
        },
        200,
      );
    },
  );
}

/** `git status --porcelain=v2` inside the workspace (5 s, bounded output); null when it is no repository or git is missing. */
export async function gitSummary(sandbox: Sandbox, cwd: string): Promise<GitSummary | null> {
  const opts = { cwd, timeoutMs: GIT_TIMEOUT_MS, maxOutputBytes: GIT_OUTPUT_BYTES };
  let status;
  try {
    status = await sandbox.exec(
      ["git", "--no-optional-locks", "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=normal", "--ignore-submodules=all"],
      opts,
    );
  } catch {
    return null;
  }
  if (status.exitCode !== 0 || status.truncated) return null;
  const summary = parsePorcelain(status.stdout.toString("utf8"));
  if (!summary) return null;
  try {
    const diff = await sandbox.exec(["git", "--no-optional-locks", "diff", "--shortstat", "HEAD"], opts);
    if (diff.exitCode === 0) {
      const text = diff.stdout.toString("utf8");
      summary.insertions = Number(/(\d+) insertion/.exec(text)?.[1] ?? 0);
      summary.deletions = Number(/(\d+) deletion/.exec(text)?.[1] ?? 0);
    }
  } catch {
    // Line counts stay 0, as the reference.
  }
  return summary;
}

/** Parses NUL-separated porcelain v2 records; null when neither branch nor head is known. */
export function parsePorcelain(text: string): GitSummary | null {
  const s: GitSummary = {
    branch: null,
    head: null,
    ahead: null,
    behind: null,
    staged: 0,
    unstaged: 0,
    untracked: 0,
    conflicted: 0,
    insertions: 0,
    deletions: 0,
  };
  let known = false;
  const fields = text.split("\0");
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i]!;
    if (f.startsWith("# branch.oid ")) {
      const v = f.slice(13);
      s.head = v === "(initial)" ? null : v;
      known = true;
    } else if (f.startsWith("# branch.head ")) {
      const v = f.slice(14);
      s.branch = v === "(detached)" ? null : v;
      known = true;
    } else if (f.startsWith("# branch.ab ")) {
      const m = /^\+(\d+) -(\d+)$/.exec(f.slice(12));
      if (m) [s.ahead, s.behind] = [Number(m[1]), Number(m[2])];
    } else if (f.startsWith("? ")) s.untracked++;
    else if (f.startsWith("u ")) s.conflicted++;
    else if (f.startsWith("1 ") || f.startsWith("2 ")) {
      const xy = f.slice(2, 4);
      if (xy[0] !== ".") s.staged++;
      if (xy[1] !== ".") s.unstaged++;
      if (f.startsWith("2 ")) i++; // the original path is the next field
    }
  }
  return known ? s : null;
}
