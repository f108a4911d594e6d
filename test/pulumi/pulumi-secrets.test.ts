import { randomBytes } from "node:crypto";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import type { EngineEvent, Stack } from "@pulumi/pulumi/automation/index.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { FLEET_OUTPUT_NAME } from "../../sdk/contract/fleet.js";
import { WorkspaceFleet, WorkspaceResource } from "../../providers/index.js";
import { StepCollector, upWithPreview } from "../../sdk/cli/engine.js";
import { renderPreviewMarkdown } from "../../sdk/cli/preview-markdown.js";
import { backendText, ensureBuilt, makeSandbox, pulumiBinDir, testStack, type Sandbox } from "./pulumi-helpers.js";

// The real engine on a shared 2-core machine: operations take seconds each, more under load.
vi.setConfig({ testTimeout: 300_000 });

/**
 * A sentinel secret in stack config (read by the provider's configure, and passed as a secret
 * `credentials` input) must not appear in plain text anywhere: state and history files, engine
 * output and events, the markdown comment, or error messages.
 */
const SENTINEL = `sentinel-${randomBytes(8).toString("hex")}`;
const ROTATED = `sentinel-${randomBytes(8).toString("hex")}`;
let sb: Sandbox;
let stack: Stack;
let basedir: string;
let team = "a";
let broken = false;
const seen: string[] = [];
const record = { onOutput: (s: string) => seen.push(s), onError: (s: string) => seen.push(s), onEvent: (e: EngineEvent) => seen.push(JSON.stringify(e)) };

beforeAll(async () => {
  const bin = pulumiBinDir();
  ensureBuilt();
  sb = makeSandbox("secrets");
  basedir = join(sb.dir, "workspaces");
  stack = await testStack(
    sb,
    "secrets",
    async () => {
      const token = new pulumi.Config("agentws").requireSecret("token");
      const fleet = new WorkspaceFleet("fleet", {
        workspaces: [{ workspaceId: "vault", backend: { kind: "local", basedir }, tags: { team } }],
        credentials: { token },
        deleteData: true,
      });
      // A bad credentials map: check must refuse it without echoing the value.
      if (broken) new WorkspaceResource("broken", { workspaceId: "broken", backend: { kind: "local", basedir }, credentials: { "": token } });
      return { [FLEET_OUTPUT_NAME]: fleet.workspaces };
    },
    bin,
  );
  await stack.setConfig("agentws:token", { value: SENTINEL, secret: true });
  await stack.setConfig("agentws:credentials", { value: JSON.stringify({ apiKey: SENTINEL }), secret: true });
});

afterAll(() => sb?.dispose());

function expectClean(text: string) {
  expect(text).not.toContain(SENTINEL);
  expect(text).not.toContain(ROTATED);
}

describe.sequential("secrets never appear in plain text", () => {
  it("create, update, rotate, refresh: state, engine output and markdown stay clean", async () => {
    await upWithPreview(stack, { ...record, color: "never" });
    const state = backendText(sb);
    expect(state).toContain("ciphertext");
    expectClean(state);

    team = "b";
    const collector = new StepCollector();
    const p = await stack.preview({ ...record, onEvent: (e) => (collector.onEvent(e), record.onEvent(e)), diff: true, color: "never" });
    seen.push(p.stdout, p.stderr);
    const md = renderPreviewMarkdown(collector.model(), { stack: "test" });
    expect(md).toContain("`tags.team`");
    expectClean(md);
    await stack.up({ ...record, diff: true, color: "never" });

    await stack.setConfig("agentws:token", { value: ROTATED, secret: true });
    const rotate = new StepCollector();
    const p2 = await stack.preview({ onEvent: rotate.onEvent, diff: true, color: "never" });
    seen.push(p2.stdout);
    // A rotated secret shows as a change of a masked value on both sides, files kept.
    expect(rotate.model().changes).toEqual([
      {
        op: "update",
        workspaceId: "vault",
        kind: "local",
        data: "kept",
        fields: [{ path: "credentials", replace: false, from: '"[secret]"', to: '"[secret]"' }],
      },
    ]);
    const md2 = renderPreviewMarkdown(rotate.model());
    expectClean(md2);
    await stack.up({ ...record, diff: true, color: "never" });
    await stack.refresh({ ...record, color: "never" });

    expectClean(backendText(sb));
    expectClean(seen.join("\n"));
    const outputs = await stack.outputs();
    expectClean(JSON.stringify(outputs[FLEET_OUTPUT_NAME]));
  });

  it("a check failure on a secret input names the field without the value", async () => {
    broken = true;
    let message = "";
    try {
      await upWithPreview(stack, { ...record, color: "never" });
    } catch (e) {
      message = e instanceof Error ? `${e.message}\n${e.stack ?? ""}` : String(e);
    }
    broken = false;
    expect(message).toMatch(/credentials/);
    expectClean(message);
    expectClean(seen.join("\n"));
  });

  it("destroy output and the remaining history stay clean", async () => {
    await stack.destroy({ ...record, color: "never" });
    expectClean(seen.join("\n"));
    expectClean(backendText(sb));
  });
});
