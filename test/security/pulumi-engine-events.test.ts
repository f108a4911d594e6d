import { randomBytes } from "node:crypto";
import * as pulumi from "@pulumi/pulumi";
import type { EngineEvent, Stack } from "@pulumi/pulumi/automation/index.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { upWithPreview } from "../../sdk/cli/engine.js";
import { ensureBuilt, makeSandbox, pulumiBinDir, testStack, type Sandbox } from "../pulumi-helpers.js";

vi.setConfig({ testTimeout: 300_000 });

/**
 * Attack: a program (or a component inside it) writes a stack config secret into a debug
 * diagnostic; a caller of the library's stack operations asks for debug output and reads its
 * onEvent / onOutput hooks. The secret must reach neither in plain text, while the diagnostic
 * itself still arrives (masked).
 */
const TOKEN = `sentinel-token-${randomBytes(8).toString("hex")}`;
const API_KEY = `sentinel-apikey-${randomBytes(8).toString("hex")}`;
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
      // A JSON secret: its string leaves are secrets too, also when quoted JSON-escaped.
      config.requireSecret("credentials").apply((c) => pulumi.log.debug(`component credentials ${c} ${JSON.stringify(c)}`));
      return { ok: "yes" };
    },
    bin,
  );
  await stack.setConfig("agentws:token", { value: TOKEN, secret: true });
  await stack.setConfig("agentws:credentials", { value: JSON.stringify({ apiKey: API_KEY }), secret: true });
});

afterAll(() => sb?.dispose());

describe("engine events handed to callers", () => {
  it("debug diagnostics carrying config secrets arrive masked", async () => {
    const events: EngineEvent[] = [];
    const lines: string[] = [];
    const result = await upWithPreview(stack, { onEvent: (e) => events.push(e), onOutput: (s) => lines.push(s), onError: (s) => lines.push(s), debug: true, color: "never" });
    const debug = events.flatMap((e) => ((e.diagnosticEvent?.severity as string | undefined) === "debug" ? [e.diagnosticEvent!.message] : []));
    expect(debug.some((m) => m.includes("component connecting with [secret]"))).toBe(true);
    expect(debug.some((m) => m.includes("component credentials"))).toBe(true);
    const everything = [JSON.stringify(events), lines.join("\n"), result.stdout, result.stderr].join("\n");
    for (const s of [TOKEN, API_KEY]) expect(everything.includes(s), "a secret reached the caller in plain text").toBe(false);
  });
});
