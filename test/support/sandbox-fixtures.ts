/// <reference types="vite/client" />
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe } from "vitest";
import { BubblewrapWorkspace } from "../../sdk/backends/bubblewrap/index.js";
import { DockerWorkspace } from "../../sdk/backends/docker/index.js";
import { uniqueId, type WorkspaceFixture } from "../contract/fixture.js";
import { BASE_IMAGE } from "./docker-engine.js";

/** The repository root: bound read-only into sandboxes so the echo MCP fixture and its node_modules resolve. */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const ECHO_SERVER = path.join(ROOT, "test/fixtures/mcp/echo-server.mjs");

/**
 * Runs every contract suite in test/contract/*.contract.ts against a fixture. Suites are found by
 * file, so a suite landing later joins every backend without touching this file.
 */
export function runContractSuites(fixture: WorkspaceFixture, options: { skip?: string[] } = {}): void {
  const modules = import.meta.glob<Record<string, unknown>>("../contract/*.contract.ts", { eager: true });
  for (const [file, mod] of Object.entries(modules).sort(([a], [b]) => a.localeCompare(b))) {
    if (options.skip?.includes(path.basename(file, ".contract.ts"))) continue;
    const suites = Object.entries(mod).filter(([name, v]) => typeof v === "function" && (name === "default" || /(contract|suite)$/i.test(name)));
    describe(path.basename(file, ".contract.ts"), () => {
      for (const [, suite] of suites) (suite as (f: WorkspaceFixture) => void)(fixture);
    });
  }
}

export function bubblewrapFixture(env: () => { basedir: string }): WorkspaceFixture {
  return {
    name: "bubblewrap",
    async create(opts = {}) {
      return new BubblewrapWorkspace({
        workspaceId: opts.workspaceId ?? uniqueId("bw"),
        basedir: env().basedir,
        readOnlyPaths: [ROOT],
        ...(opts.defaultMcps ? { defaultMcps: opts.defaultMcps } : {}),
        ...(opts.skillPaths ? { skillPaths: opts.skillPaths } : {}),
        ...(opts.egress ? { egress: opts.egress } : {}),
      });
    },
    mcpServerCommand: () => ["node", ECHO_SERVER],
  };
}

export function dockerFixture(env: () => { basedir: string; track: (workspaceId: string) => void; baseImage?: string }): WorkspaceFixture {
  return {
    name: "docker",
    async create(opts = {}) {
      const workspaceId = opts.workspaceId ?? uniqueId("dk");
      env().track(workspaceId);
      return new DockerWorkspace({
        workspaceId,
        basedir: env().basedir,
        baseImage: env().baseImage ?? BASE_IMAGE,
        readOnlyPaths: [ROOT],
        ...(opts.defaultMcps ? { defaultMcps: opts.defaultMcps } : {}),
        ...(opts.skillPaths ? { skillPaths: opts.skillPaths } : {}),
        ...(opts.egress ? { egress: opts.egress } : {}),
      });
    },
    mcpServerCommand: () => ["node", ECHO_SERVER],
  };
}
