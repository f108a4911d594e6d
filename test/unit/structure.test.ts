import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { BACKEND_KINDS } from "../../sdk/contract/registry.js";

/**
 * The shape rules of sdk/: a backend is one folder reached only through the registry, the import
 * graph has no upward arrows, and big files say why they are big. Static scan of the sources.
 */
const root = path.resolve(import.meta.dirname, "../..");

function walk(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.posix.join(dir, e.name);
    return e.isDirectory() ? walk(rel) : /\.ts$/.test(e.name) ? [rel] : [];
  });
}

interface Edge {
  from: string;
  to: string;
  dynamic: boolean;
}

const IMPORT = /(?:^|[\s;])(?:import|export)\s[^"';]*?from\s*["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g;

function edgesOf(file: string): Edge[] {
  const text = readFileSync(path.join(root, file), "utf8");
  const out: Edge[] = [];
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2]!;
    if (!spec.startsWith(".")) continue;
    out.push({ from: file, to: path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)).replace(/\.js$/, ".ts"), dynamic: m[2] !== undefined });
  }
  return out;
}

const sources = [...walk("sdk"), ...walk("providers"), ...walk("stacks")];
const edges = sources.flatMap(edgesOf);

const kindOf = (file: string) => /^sdk\/backends\/([^/]+)\//.exec(file)?.[1];

describe("backend folders", () => {
  it("exist for every registered kind, with a schema and an index", () => {
    const folders = readdirSync(path.join(root, "sdk/backends"), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
    expect([...folders].sort()).toEqual([...BACKEND_KINDS].sort());
    for (const kind of BACKEND_KINDS) {
      expect(sources).toContain(`sdk/backends/${kind}/schema.ts`);
      expect(sources).toContain(`sdk/backends/${kind}/index.ts`);
    }
  });

  it("are imported from outside only by the registry (schema), the loader (index, lazily) and the root entry (index)", () => {
    const bad = edges.filter((e) => {
      const target = kindOf(e.to);
      if (!target || kindOf(e.from) === target) return false;
      const file = e.to.slice(`sdk/backends/${target}/`.length);
      if (e.from === "sdk/contract/registry.ts") return !(file === "schema.ts" && !e.dynamic);
      if (e.from === "sdk/backends/load.ts") return !(file === "index.ts" && e.dynamic);
      if (e.from === "sdk/index.ts") return file !== "index.ts";
      return true;
    });
    expect(bad.map((e) => `${e.from} -> ${e.to}`)).toEqual([]);
  });

  it("keep their schema.ts to data: it imports only the contract and below", () => {
    const bad = edges.filter(
      (e) => /^sdk\/backends\/[^/]+\/schema\.ts$/.test(e.from) && e.to.startsWith("sdk/") && layerOf(e.to) > layerOf("sdk/contract/registry.ts"),
    );
    expect(bad.map((e) => `${e.from} -> ${e.to}`)).toEqual([]);
  });

  it("never names a backend kind in code outside the folders", () => {
    const kinds = BACKEND_KINDS.map((k) => `"${k}"`);
    const allowed = new Set(["sdk/contract/registry.ts", "sdk/backends/load.ts"]);
    const hits = sources
      .filter((f) => !BACKEND_KINDS.includes(kindOf(f) as never) && !allowed.has(f))
      .flatMap((f) =>
        readFileSync(path.join(root, f), "utf8")
          .split("\n")
          .filter(
            (line) =>
              !/^\s*(\/\/|\*|\/\*)/.test(line) && kinds.some((k) => line.includes(`=== ${k}`) || line.includes(`kind: ${k}`) || line.includes(`case ${k}`)),
          )
          .map((line) => `${f}: ${line.trim()}`),
      );
    expect(hits).toEqual([]);
  });
});

/**
 * Layers of sdk/, lowest first, read off the tree: folder = layer (the files directly in sdk/ are
 * the base). A file may import its own layer or lower ones. The one sanctioned reach upward is the
 * registry's import of each kind's schema.ts (data only, checked above).
 */
const LAYERS = [
  "sdk/",
  "sdk/util/",
  "sdk/workspace/",
  "sdk/contract/",
  "sdk/kit/",
  "sdk/manager/",
  "sdk/backends/",
  "sdk/adapters/",
  "sdk/service/",
  "sdk/cli/",
] as const;
function layerOf(f: string): number {
  if (f === "sdk/index.ts") return LAYERS.length;
  const rest = f.slice("sdk/".length);
  const top = rest.includes("/") ? `sdk/${rest.slice(0, rest.indexOf("/") + 1)}` : "sdk/";
  return LAYERS.indexOf(top as (typeof LAYERS)[number]);
}
const layerName = (i: number) => LAYERS[i] ?? "sdk/index.ts";
const sanctioned = (e: Edge) => e.from === "sdk/contract/registry.ts" && /^sdk\/backends\/[^/]+\/schema\.ts$/.test(e.to) && !e.dynamic;

describe("import layers", () => {
  it("place every sdk file in a layer (a new folder under sdk/ needs its place in LAYERS)", () => {
    expect(sources.filter((f) => f.startsWith("sdk/") && layerOf(f) < 0)).toEqual([]);
  });

  it("have no upward arrows", () => {
    const up = edges
      .filter((e) => e.from.startsWith("sdk/") && e.to.startsWith("sdk/") && !sanctioned(e))
      .filter((e) => layerOf(e.to) > layerOf(e.from))
      .map((e) => `${e.from} (${layerName(layerOf(e.from))}) -> ${e.to}`);
    expect(up).toEqual([]);
  });

  it("the checker sees an upward arrow when there is one", () => {
    // Guard against a scan that matches nothing: workspace importing the manager would be upward.
    expect(layerOf("sdk/manager/manager.ts")).toBeGreaterThan(layerOf("sdk/workspace/workspace.ts"));
    expect(layerOf("sdk/kit/runner/client.ts")).toBe(layerOf("sdk/kit/lease.ts"));
    expect(edgesOf("sdk/manager/sandbox-manager.ts").some((e) => e.to === "sdk/manager/manager.ts")).toBe(true);
    expect(edges.length).toBeGreaterThan(200);
  });
});

/** Strongly connected components of the file graph (Tarjan), static and lazy imports alike. */
function cycles(files: readonly string[], all: readonly Edge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const e of all) next.set(e.from, [...(next.get(e.from) ?? []), e.to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  let counter = 0;
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (next.get(v) ?? []).includes(v)) out.push(scc.sort());
    }
  };
  for (const f of files) if (!index.has(f)) visit(f);
  return out;
}

describe("import cycles", () => {
  it("there are none, file by file, lazy imports included", () => {
    expect(cycles(sources, edges)).toEqual([]);
  });

  it("the finder sees a cycle when there is one", () => {
    const fake: Edge[] = [
      { from: "a.ts", to: "b.ts", dynamic: false },
      { from: "b.ts", to: "c.ts", dynamic: true },
      { from: "c.ts", to: "a.ts", dynamic: false },
      { from: "c.ts", to: "d.ts", dynamic: false },
    ];
    expect(cycles(["a.ts", "d.ts"], fake)).toEqual([["a.ts", "b.ts", "c.ts"]]);
  });
});

/** The comment lines before the first line of code (imports count as code). */
function openingComment(text: string): string {
  const lines: string[] = [];
  for (const line of text.split("\n")) {
    if (/^\s*(\/\/|\/\*|\*)/.test(line) || line.trim() === "") lines.push(line);
    else break;
  }
  return lines.join("\n");
}

/** A generated file (`*.generated.ts`, whose first line says by what): its size is its source's. */
const generated = (f: string, text: string) => f.endsWith(".generated.ts") && /^\/\/ Generated by scripts\//.test(text);

describe("file size", () => {
  it("keeps sdk files at 400 lines or under unless the opening comment says why (generated files aside)", () => {
    const big = walk("sdk")
      .map((f) => ({ f, text: readFileSync(path.join(root, f), "utf8") }))
      .filter(({ f, text }) => !generated(f, text))
      .filter(({ text }) => text.split("\n").length > 401)
      .filter(({ text }) => !openingComment(text).includes("Size:"))
      .map(({ f, text }) => `${f} (${text.split("\n").length} lines)`);
    expect(big).toEqual([]);
  });
});

describe("embedded Python", () => {
  // Python lives in .py files with their own lint and tests (sdk/kit/runner/python, test/unit/runner-python.test.ts);
  // TypeScript carries it only as the constants generated from them.
  const PY_LINE = /^\s*(import [a-z_]+(, [a-z_]+)*|def [a-z_]+\(.*\):)\s*$/m;
  it("is only in generated files", () => {
    const hits = walk("sdk")
      .map((f) => ({ f, text: readFileSync(path.join(root, f), "utf8") }))
      .filter(({ f, text }) => !generated(f, text) && PY_LINE.test(text))
      .map(({ f }) => f);
    expect(hits).toEqual([]);
  });

  it("the checker sees a Python line", () => {
    expect(PY_LINE.test("const X = String.raw`\nimport os, sys\n`;")).toBe(true);
    expect(PY_LINE.test("    def step(self):\n")).toBe(true);
    expect(PY_LINE.test('import os from "node:os";')).toBe(false);
  });
});
