import { randomBytes } from "node:crypto";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import type { EngineEvent, Stack } from "@pulumi/pulumi/automation/index.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { upWithPreview } from "../../sdk/cli/engine.js";
import { WorkspaceResource } from "../../providers/index.js";
import { ensureBuilt, makeSandbox, pulumiBinDir, testStack, type Sandbox } from "../pulumi/pulumi-helpers.js";

vi.setConfig({ testTimeout: 300_000 });

/**
 * Attack: a caller of the library's stack operations asks for debug output and reads its
 * onEvent / onOutput hooks, where a program's debug diagnostics quote secrets the engine does not
 * mask itself: a string inside a JSON config secret (`agentws:credentials.apiKey`), and a fleet's
 * secret-bearing literal (the SDK's RPC dumps). Neither may arrive in plain text, while the
 * diagnostics themselves still arrive (masked).
 */
const TOKEN = `sentinel-token-${randomBytes(8).toString("hex")}`;
const API_KEY = `sentinel-apikey-${randomBytes(8).toString("hex")}`;
const HEADER = `sentinel-header-${randomBytes(8).toString("hex")}`;
let sb: Sandbox;
let stack: Stack;

beforeAll(async () => {
  const bin = pulumiBinDir();
  ensureBuilt();
  sb = makeSandbox("engine-events");
  stack = await testStack(
    sb,
    "engineevents",
    async () => {
      const config = new pulumi.Config("agentws");
      config.requireSecret("token").apply((t) => pulumi.log.debug(`component connecting with ${t}`));
      // The engine masks a config secret's whole value only: not the strings inside a JSON one.
      config.requireSecret("credentials").apply((c) => pulumi.log.debug(`component credentials ${(JSON.parse(c) as { apiKey: string }).apiKey}`));
      // A fleet's secret-bearing literal: marked secret, and the RPC debug dumps quote it.
      new WorkspaceResource("ws", {
        workspaceId: "events",
        backend: { kind: "local", basedir: join(sb.dir, "workspaces") },
        defaultMcps: [{ name: "remote", transport: { type: "http", url: "http://127.0.0.1:9/mcp", headers: { Authorization: HEADER } } }],
        deleteData: true,
      });
      return { ok: "yes" };
    },
    bin,
  );
  await stack.setConfig("agentws:token", { value: TOKEN, secret: true });
  await stack.setConfig("agentws:credentials", { value: JSON.stringify({ apiKey: API_KEY }), secret: true });
});

afterAll(async () => {
  await stack?.destroy({ color: "never" }).catch(() => undefined);
  sb?.dispose();
});

describe("engine events handed to callers", () => {
  it("debug diagnostics carrying config secrets arrive masked", async () => {
    const events: EngineEvent[] = [];
    const lines: string[] = [];
    const result = await upWithPreview(stack, {
      onEvent: (e) => events.push(e),
      onOutput: (s) => lines.push(s),
      onError: (s) => lines.push(s),
      debug: true,
      color: "never",
    });
    const debug = events.flatMap((e) => ((e.diagnosticEvent?.severity as string | undefined) === "debug" ? [e.diagnosticEvent!.message] : []));
    expect(debug.some((m) => m.includes("component connecting with [secret]"))).toBe(true);
    expect(debug.some((m) => m.includes("component credentials [secret]"))).toBe(true);
    const everything = [JSON.stringify(events), lines.join("\n"), result.stdout, result.stderr].join("\n");
    for (const s of [TOKEN, API_KEY, HEADER]) expect(everything.includes(s), "a secret reached the caller in plain text").toBe(false);
  });
});
