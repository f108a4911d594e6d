import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { parse as parseYaml } from "yaml";
import { describe, expect, it } from "vitest";
import { BackendSpecSchema } from "../../sdk/contract/registry.js";
import { WorkspaceFleet, WorkspaceResource, loadFleetFile } from "../../providers/index.js";
import { ROOT } from "./pulumi-helpers.js";

/** Example stacks and fleet files stay valid; the serialized provider carries no machine path. */
const STACKS = join(ROOT, "stacks");
const knownKinds = new Set(BackendSpecSchema.options.map((o) => o.shape.kind.value as string));

describe("example stacks", () => {
  const fleetFiles = readdirSync(STACKS).filter((f) => f.endsWith(".fleet.yaml"));

  it("every stack config names a fleet file that exists", () => {
    const configs = readdirSync(STACKS).filter((f) => /^Pulumi\..+\.yaml$/.test(f));
    // Pulumi.local.yaml is per machine (it gets the passphrase salt); the local stack needs no config.
    expect(configs.map((c) => c.split(".")[1]).filter((n) => n !== "local")).toEqual(["daytona", "docker", "e2b", "kubernetes", "opensandbox"]);
    expect(fleetFiles).toContain("local.fleet.yaml");
    for (const c of configs) {
      const doc = parseYaml(readFileSync(join(STACKS, c), "utf8")) as { config?: Record<string, unknown> };
      const file = doc.config?.["agentws:fleetFile"] as string | undefined;
      if (file !== undefined || c !== "Pulumi.local.yaml") expect(fleetFiles.map((f) => `stacks/${f}`)).toContain(file);
    }
  });

  for (const f of fleetFiles)
    it(`${f} is valid, or refused only for a backend kind not built yet`, () => {
      const raw = parseYaml(readFileSync(join(STACKS, f), "utf8")) as { workspaces: { backend: { kind: string } }[] };
      const kinds = raw.workspaces.map((w) => w.backend.kind);
      if (kinds.every((k) => knownKinds.has(k))) expect(loadFleetFile(join(STACKS, f)).length).toBe(kinds.length);
      else expect(() => loadFleetFile(join(STACKS, f))).toThrow(/workspaces\[\d+\]\.backend\.kind: unknown backend kind/);
    });

  it("fleet file errors name the file and the field", () => {
    const dir = mkdtempSync(join(tmpdir(), "fleet-"));
    const bad = join(dir, "bad.yaml");
    writeFileSync(bad, "workspaces:\n  - workspaceId: a\n    backend: { kind: local }\n    ttlSeconds: -3\n");
    expect(() => loadFleetFile(bad)).toThrow(`${bad}:4: workspaces[0].ttlSeconds: Too small`);
    writeFileSync(bad, "workspaces: [ {");
    expect(() => loadFleetFile(bad)).toThrow(`fleet file ${bad}:`);
    writeFileSync(bad, "workspaces: []\n");
    expect(() => loadFleetFile(bad)).toThrow("a fleet needs at least one workspace");
  });

  it("reports every mistake at once, each with its line, and blames a bad default on `defaults`", () => {
    const dir = mkdtempSync(join(tmpdir(), "fleet-"));
    const bad = join(dir, "bad.yaml");
    writeFileSync(
      bad,
      [
        "defaults:",
        "  backend: { kind: local }",
        "  ttlSecnds: 30",
        "workspaces:",
        "  - workspaceId: one",
        "  - workspaceId: two",
        "    ttlSeconds: -1",
        "  - workspaceId: three",
        "    backend: { kind: nope }",
        "",
      ].join("\n"),
    );
    let message = "";
    try {
      loadFleetFile(bad);
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message.split("\n")).toEqual([
      `fleet file ${bad}: 3 mistakes`,
      `${bad}:3: defaults.ttlSecnds: unknown field; check the spelling against the WorkspaceSpec schema`,
      `${bad}:7: workspaces[1].ttlSeconds: Too small: expected number to be >0`,
      expect.stringMatching(new RegExp(`^${bad.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:9: workspaces\\[2\\]\\.backend\\.kind: unknown backend kind`)),
    ]);
  });
});

describe("resource registration (mocks: no engine)", () => {
  it("registers the agentws type with a serialized provider free of machine paths, and rejects duplicate ids", async () => {
    const registered: { type: string; inputs: Record<string, unknown> }[] = [];
    await pulumi.runtime.setMocks({
      newResource: (args) => {
        registered.push({ type: args.type, inputs: args.inputs as Record<string, unknown> });
        return { id: `${args.name}-id`, state: args.inputs };
      },
      call: () => ({}),
    });
    new WorkspaceResource("w", { workspaceId: "w", backend: { kind: "local" } });
    expect(
      () =>
        new WorkspaceFleet("f", {
          workspaces: [
            { workspaceId: "a", backend: { kind: "local" } },
            { workspaceId: "a", backend: { kind: "local" } },
          ],
        }),
    ).toThrow("fleet 'f': workspaces[1] repeats workspace id 'a'");
    // Registration is asynchronous: wait for it rather than for a fixed time (CI may be loaded).
    await expect.poll(() => registered.some((r) => r.type === "pulumi-nodejs:dynamic/agentws:Workspace"), { timeout: 10_000 }).toBe(true);
    const ws = registered.find((r) => r.type === "pulumi-nodejs:dynamic/agentws:Workspace");
    const text = String(ws!.inputs.__provider);
    expect(text).toContain("agent-workspaces/providers/impl");
    expect(text).not.toContain(ROOT);
    expect(text).not.toMatch(/\/(root|home|tmp|work)\//);
    expect(text.length).toBeLessThan(8_000);
  });
});
