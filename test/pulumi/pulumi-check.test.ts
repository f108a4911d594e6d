import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Stack } from "@pulumi/pulumi/automation/index.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { WorkspaceResource, type WorkspaceResourceArgs } from "../../providers/index.js";
import { upWithPreview } from "../../sdk/cli/engine.js";
import { ensureBuilt, makeSandbox, pulumiBinDir, stateResources, testStack, type Sandbox } from "./pulumi-helpers.js";

// The real engine on a shared 2-core machine: operations take seconds each, more under load.
vi.setConfig({ testTimeout: 300_000 });

/** Bad inputs are refused by the provider's check, on the real engine, before anything exists. */
let sb: Sandbox;
let stack: Stack;
let basedir: string;
let bad: Record<string, unknown> = {};

beforeAll(async () => {
  const bin = pulumiBinDir();
  ensureBuilt();
  sb = makeSandbox("check");
  basedir = join(sb.dir, "workspaces");
  stack = await testStack(
    sb,
    "check",
    async () => {
      // A valid workspace next to the bad one: it must not be provisioned either.
      new WorkspaceResource("good", { workspaceId: "good", backend: { kind: "local", basedir } });
      new WorkspaceResource("bad", { workspaceId: "bad", backend: { kind: "local", basedir }, ...bad } as WorkspaceResourceArgs);
    },
    bin,
  );
});

afterAll(() => sb?.dispose());

const cases: [string, Record<string, unknown>, string][] = [
  ["unknown backend kind", { backend: { kind: "nimbus", basedir: "/tmp/x" } }, "backend.kind: unknown backend kind; expected one of local, bubblewrap, docker"],
  ["negative TTL", { ttlSeconds: -5 }, "ttlSeconds: Too small"],
  ["bad MCP name", { defaultMcps: [{ name: "bad name!", transport: { type: "stdio", command: "npx" } }] }, "defaultMcps[0].name: MCP name must match"],
  ["missing required option", { defaultMcps: [{ name: "web", transport: { type: "http" } }] }, "defaultMcps[0].transport.url"],
  ["misspelled field", { tagz: { a: "b" } }, "tagz: unknown field(s)"],
];

describe.sequential("check on the real engine", () => {
  for (const [title, input, expected] of cases)
    it(`refuses ${title}, naming the field, and provisions nothing`, async () => {
      bad = input;
      let message = "";
      try {
        await upWithPreview(stack, { color: "never" });
      } catch (e) {
        message = e instanceof Error ? e.message : String(e);
      }
      expect(message).toContain(expected);
      expect(message).toMatch(/bad/);
      expect(existsSync(basedir)).toBe(false);
      const workspaces = existsSync(join(sb.backendDir, ".pulumi", "stacks", "check", "test.json"))
        ? stateResources(sb, "check").filter((r) => r.type.includes("agentws:Workspace"))
        : [];
      expect(workspaces).toEqual([]);
    });
});
