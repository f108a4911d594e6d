import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** Every module the root entry reaches through static and dynamic imports: files and bare packages. */
function importGraph(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const todo = [entry];
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    const src = readFileSync(file, "utf8");
    for (const m of src.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)["']([^"']+)["']/g)) {
      const spec = m[1]!;
      if (!spec.startsWith(".")) packages.add(spec);
      else todo.push(path.resolve(path.dirname(file), spec).replace(/\.js$/, ".ts"));
    }
  }
  return { files, packages };
}

it("the root entry never loads an adapter or a framework (they are optional peers, loaded by subpath)", () => {
  const { files, packages } = importGraph(path.join(ROOT, "sdk/index.ts"));
  expect(files.size).toBeGreaterThan(20);
  expect([...files].map((f) => path.relative(ROOT, f)).filter((f) => f.startsWith(path.join("sdk", "adapters")))).toEqual([]);
  expect([...packages].filter((p) => p === "ai" || p.startsWith("ai/") || p.startsWith("@ai-sdk/") || p.startsWith("@openai/agents"))).toEqual([]);
});

it("package.json exports the two subpaths and lists both frameworks as optional peers", () => {
  const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as Record<string, Record<string, unknown>>;
  expect(pkg.exports!["./ai-sdk"]).toEqual({ types: "./dist/sdk/adapters/ai-sdk/index.d.ts", default: "./dist/sdk/adapters/ai-sdk/index.js" });
  expect(pkg.exports!["./openai-agents"]).toEqual({
    types: "./dist/sdk/adapters/openai-agents/index.d.ts",
    default: "./dist/sdk/adapters/openai-agents/index.js",
  });
  expect(pkg.peerDependenciesMeta).toEqual(expect.objectContaining({ ai: { optional: true }, "@openai/agents": { optional: true } }));
  expect(pkg.dependencies).not.toHaveProperty("ai");
  expect(pkg.dependencies).not.toHaveProperty("@openai/agents");
});
