// Formats that must match the Python reference byte for byte, checked against Python itself
// (json.dumps, repr, difflib) when python3 is on the host.
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { parseMcpFile, pyFloat, serializeMcpFile } from "../../sdk/workspace/mcp-file.js";
import type { McpServerSpec } from "../../sdk/workspace/mcp-spec.js";
import { unifiedDiff } from "../../sdk/workspace/tools/diff.js";

const hasPython = spawnSync("python3", ["--version"]).status === 0;
if (!hasPython) console.log("python3 not found: reference-format comparisons skipped");

function python(code: string, input: string): string {
  const r = spawnSync("python3", ["-c", code], { input, encoding: "utf8" });
  if (r.status !== 0) throw new Error(r.stderr);
  return r.stdout;
}

describe.skipIf(!hasPython)("formats against Python", () => {
  it("pyFloat equals Python's repr(float)", () => {
    const xs = [30, 2.5, 0.1, 1e-5, 0.0001, 1e16, 1e15, 123456789.125, 5, 0.5, 1e22, 3.14159, 600, 1.5e-7, 2 ** 53 + 2, 12.25];
    const ours = xs.map(pyFloat);
    const theirs = JSON.parse(python("import json,sys; print(json.dumps([repr(float(x)) for x in json.load(sys.stdin)]))", JSON.stringify(xs)));
    expect(ours).toEqual(theirs);
  });

  it(".mcp equals json.dumps(indent=2, ensure_ascii=False) of the reference's model_dump", () => {
    const specs: McpServerSpec[] = [
      { name: "echo", transport: { type: "stdio", command: "node", args: ["s.mjs", "é中"], env: { K: 'v\n"q"' }, cwd: "sub" }, executionTimeout: 5 },
      { name: "web", transport: { type: "http", url: "http://h/mcp", headers: { A: "b" } }, enableTools: ["x"], disableTools: [] },
      { name: "web2", stateful: true, transport: { type: "http", url: "http://h/2", timeout: 0.25 }, executionTimeout: 1e-5 },
    ];
    const text = serializeMcpFile([
      { agentId: "agent-ü", sessionId: "s1", specs },
      { agentId: "", sessionId: "", specs: [] },
      { agentId: "agent-ü", sessionId: "s2", specs: specs.slice(1) },
    ]);
    // Python side: rebuild the dict with the reference's float fields as floats, then dump it.
    const code = `
import json, sys
doc = json.loads(sys.stdin.read())
for sessions in doc["mcps"].values():
    for entries in sessions.values():
        for e in entries:
            if e["mcp_config"]["type"] == "http_mcp" and e["mcp_config"]["timeout"] is not None:
                e["mcp_config"]["timeout"] = float(e["mcp_config"]["timeout"])
            if e["execution_timeout"] is not None:
                e["execution_timeout"] = float(e["execution_timeout"])
sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False))
`;
    expect(text).toBe(python(code, text));
    expect(text).toContain('"timeout": 30.0');
    expect(text).toContain('"execution_timeout": 1e-05');
    // And it reads back to the same declarations.
    const back = parseMcpFile(text);
    expect(back.warnings).toEqual([]);
    expect(back.scopes.map((s) => [s.agentId, s.sessionId, s.specs.map((x) => x.name)])).toEqual([
      ["agent-ü", "s1", ["echo", "web", "web2"]],
      ["agent-ü", "s2", ["web", "web2"]],
      ["", "", []],
    ]);
    expect(back.scopes[0]!.specs[0]).toEqual({
      ...specs[0],
      stateful: true,
      streamProgress: false,
      transport: { ...specs[0]!.transport, encodingErrorHandler: "strict" },
    });
  });

  it("unifiedDiff equals difflib.unified_diff (n=3)", () => {
    const base = Array.from({ length: 40 }, (_, i) => `line ${i}`);
    const cases: Array<[string, string]> = [
      ["", "a\nb\n"],
      ["a\nb\n", ""],
      [base.join("\n"), base.map((l, i) => (i === 5 ? "changed" : i === 30 ? "other" : l)).join("\n")],
      [base.join("\n"), [...base.slice(0, 10), "ins1", "ins2", ...base.slice(10, 20), ...base.slice(25)].join("\n")],
      ["x\ny\nz", "x\ny\nz\nw"],
      ["same\n", "same\n"],
      ["a\r\nb\rc\u2028d", "a\r\nB\rc\u2028d\n"],
      ["no newline", "no newline\nadded"],
      ["a\nb\nc\nd\ne\nf\ng\nh\ni\nj", "a\nB\nc\nd\ne\nf\ng\nh\nI\nj"],
    ];
    const code = `
import difflib, json, sys
print(json.dumps(["".join(difflib.unified_diff(a.splitlines(keepends=True), b.splitlines(keepends=True), "a/from", "b/to", n=3)) for a, b in json.load(sys.stdin)]))
`;
    const theirs = JSON.parse(python(code, JSON.stringify(cases))) as string[];
    expect(cases.map(([a, b]) => unifiedDiff(a, b, "a/from", "b/to"))).toEqual(theirs);
  });
});
