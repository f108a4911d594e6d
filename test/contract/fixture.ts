import { afterEach } from "vitest";
import type { z } from "zod";
import type { EgressPolicy } from "../../sdk/util/egress.js";
import type { McpServerSpecSchema } from "../../sdk/workspace/mcp-spec.js";
import type { Workspace } from "../../sdk/workspace/workspace.js";

export interface WorkspaceFixtureOptions {
  defaultMcps?: z.input<typeof McpServerSpecSchema>[];
  skillPaths?: string[];
  workspaceId?: string;
  /** The workspace's egress policy (test MCP servers on loopback need an allow entry). */
  egress?: EgressPolicy;
}

/**
 * A backend under test, shared by every contract suite (layout, skills, offload, lifecycle, mcp,
 * tools). `create` returns a constructed workspace that is NOT yet initialized. Calling it again
 * with the same `workspaceId` gives a new object over the same persistent storage (a reattach);
 * without `workspaceId` every call gives a fresh, empty workspace. Contract suites look at files
 * only through `workspace.getBackend()`, never the host filesystem.
 */
export interface WorkspaceFixture {
  name: string;
  create(opts?: WorkspaceFixtureOptions): Promise<Workspace>;
  /**
   * Optional: argv that starts test/fixtures/mcp/echo-server.mjs inside this backend's sandbox (a
   * mode such as "crash" or "silent" is appended). Without it the MCP suite writes a self-contained
   * bundle of the server into each workspace and runs it with the sandbox's `node`.
   */
  mcpServerCommand?(): string[];
}

/**
 * Per-test helper: `open()` creates and initializes a workspace that is closed after the test.
 * Call it at describe level (it registers an afterEach hook).
 */
export function useWorkspaces(fixture: WorkspaceFixture): { open(opts?: WorkspaceFixtureOptions): Promise<Workspace>; track(ws: Workspace): Workspace } {
  const opened: Workspace[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((ws) => ws.close().catch(() => undefined)));
  });
  return {
    async open(opts = {}) {
      const ws = await fixture.create(opts);
      opened.push(ws);
      await ws.initialize();
      return ws;
    },
    track(ws) {
      opened.push(ws);
      return ws;
    },
  };
}

/** A unique id usable as a workspace id on every backend. */
export function uniqueId(prefix = "ws"): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}
