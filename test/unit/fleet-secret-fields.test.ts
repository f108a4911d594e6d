import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadFleetFile } from "../../providers/index.js";
import { maskSecretFields, secretFieldPaths } from "../../sdk/contract/fleet.js";
import { parseFleetOutputs } from "../../sdk/manager/index.js";
import { maskEvent } from "../../sdk/cli/safe-events.js";

const dir = mkdtempSync(join(tmpdir(), "fleet-secrets-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function fleetFile(text: string): string {
  const p = join(dir, `f${Math.random().toString(16).slice(2)}.yaml`);
  writeFileSync(p, text);
  return p;
}

const MCP = (headers: string) =>
  `    defaultMcps: [{ name: m, transport: { type: http, url: "http://127.0.0.1:9/mcp", headers: { Authorization: ${headers} } } }]`;

describe("secret-bearing fleet fields", () => {
  it("names every secret-bearing path", () => {
    const spec = {
      backend: { kind: "docker", env: { A: "1" } },
      defaultMcps: [
        { name: "h", transport: { type: "http", url: "http://x", headers: { H: "2" } } },
        { name: "s", transport: { type: "stdio", command: "c", env: { E: "3" } } },
      ],
    };
    expect(secretFieldPaths(spec)).toEqual([
      ["backend", "env", "A"],
      ["defaultMcps", 0, "transport", "headers", "H"],
      ["defaultMcps", 1, "transport", "env", "E"],
    ]);
    const masked = maskSecretFields(spec);
    expect(JSON.stringify(masked)).not.toMatch(/"[123]"/);
    expect(spec.backend.env.A).toBe("1");
  });

  it("fleet files keep config references, checked, at their paths", () => {
    const [spec] = loadFleetFile(fleetFile(`workspaces:\n  - workspaceId: w\n    backend: { kind: local }\n${MCP("{ secret: tok }")}`));
    expect(spec!.defaultMcps![0]!.transport).toMatchObject({ headers: { Authorization: { secret: "tok" } } });
    expect(() => loadFleetFile(fleetFile(`workspaces:\n  - workspaceId: w\n    backend: { kind: local }\n${MCP('{ secret: "a b" }')}`))).toThrow(
      /workspaces\[0\]\.defaultMcps\[0\]\.transport\.headers\.Authorization\.secret/,
    );
    expect(() => loadFleetFile(fleetFile(`workspaces:\n  - workspaceId: w\n    backend: { kind: local }\n${MCP("{ secret: tok, extra: 1 }")}`))).toThrow(
      /Authorization/,
    );
    expect(() => loadFleetFile(fleetFile(`workspaces:\n  - workspaceId: w\n    backend: { kind: local }\n${MCP("{ other: 1 }")}`))).toThrow(/Authorization/);
  });

  it("a masked fleet output is refused with advice, not misread", () => {
    for (const outputs of [{ workspaces: "[secret]" }, { workspaces: { value: "[secret]", secret: true } }])
      expect(() => parseFleetOutputs(outputs)).toThrow(/secret output.*fromStack/);
  });

  it("engine events are masked deep, secret values replaced whole", () => {
    const e = { sequence: 1, timestamp: 1, diagnosticEvent: { message: 'x sentinel-1234 y \\"sentinel-1234\\"', color: "never", severity: "debug" as const } };
    const masked = maskEvent(e as never, ["sentinel-1234"]);
    expect(JSON.stringify(masked)).not.toContain("sentinel-1234");
    const wire = maskEvent(
      {
        sequence: 2,
        timestamp: 1,
        resOutputsEvent: { metadata: { new: { outputs: { k: { "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", value: "plain" } } } } },
      } as never,
      [],
    );
    expect(JSON.stringify(wire)).not.toContain("plain");
  });
});
