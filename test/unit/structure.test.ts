import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { BACKEND_KINDS } from "../../sdk/backends/registry.js";

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
      .filter((e) => e.isDirectory() && e.name !== "shared")
      .map((e) => e.name);
    expect([...folders].sort()).toEqual([...BACKEND_KINDS].sort());
    for (const kind of BACKEND_KINDS) {
      expect(sources).toContain(`sdk/backends/${kind}/schema.ts`);
      expect(sources).toContain(`sdk/backends/${kind}/index.ts`);
    }
  });

  it("are imported from outside only by the registry (schema eagerly, index lazily) and the root entry (index)", () => {
    const bad = edges.filter((e) => {
      const target = kindOf(e.to);
      if (!target || target === "shared" || kindOf(e.from) === target) return false;
      const file = e.to.slice(`sdk/backends/${target}/`.length);
      if (e.from === "sdk/backends/registry.ts") return !(file === "schema.ts" && !e.dynamic) && !(file === "index.ts" && e.dynamic);
      if (e.from === "sdk/index.ts") return file !== "index.ts";
      return true;
    });
    expect(bad.map((e) => `${e.from} -> ${e.to}`)).toEqual([]);
  });

  it("never names a backend kind in code outside the folders", () => {
    const kinds = BACKEND_KINDS.map((k) => `"${k}"`);
    const allowed = new Set(["sdk/backends/registry.ts"]);
    const hits = sources
      .filter((f) => !BACKEND_KINDS.includes(kindOf(f) as never) && !allowed.has(f))
      .flatMap((f) =>
        readFileSync(path.join(root, f), "utf8")
          .split("\n")
          .filter((line) => !/^\s*(\/\/|\*|\/\*)/.test(line) && kinds.some((k) => line.includes(`=== ${k}`) || line.includes(`kind: ${k}`) || line.includes(`case ${k}`)))
          .map((line) => `${f}: ${line.trim()}`),
      );
    expect(hits).toEqual([]);
  });
});

/**
 * Layers of sdk/, lowest first; a file may import its own layer or lower ones. The registry's lazy
 * `import()` of backend modules is the one sanctioned upward reach (that is what makes code lazy).
 */
const LAYERS: Array<[name: string, test: (f: string) => boolean]> = [
  ["base: errors, logger, sandbox types", (f) => ["sdk/errors.ts", "sdk/logger.ts", "sdk/sandbox.ts"].includes(f)],
  ["util, paths, boundary mappings", (f) => f.startsWith("sdk/util/") || ["sdk/paths.ts", "sdk/errors-http.ts"].includes(f)],
  ["workspace", (f) => f.startsWith("sdk/workspace/")],
  [
    "backend contract: driver, module, schemas, registry, fleet, leases, owner store",
    (f) =>
      ["sdk/backends/driver.ts", "sdk/backends/module.ts", "sdk/backends/spec.ts", "sdk/backends/registry.ts", "sdk/fleet.ts"].includes(f) ||
      /^sdk\/backends\/[^/]+\/schema\.ts$/.test(f) ||
      ["lease.ts", "owner-store.ts", "resuming-sandbox.ts"].some((n) => f === `sdk/backends/shared/${n}`),
  ],
  ["shared backend runtime: driver workspace, host sandbox, runner", (f) => f.startsWith("sdk/backends/shared/") && f !== "sdk/backends/shared/sandbox-manager.ts"],
  ["manager", (f) => f.startsWith("sdk/manager/")],
  ["backends: each folder, sandbox managers", (f) => f.startsWith("sdk/backends/")],
  ["framework adapters (their own entry points)", (f) => f.startsWith("sdk/adapters/")],
  ["entry points: cli, service, root index", (f) => f.startsWith("sdk/cli/") || f.startsWith("sdk/service/") || f === "sdk/index.ts"],
];
const layerOf = (f: string) => LAYERS.findIndex(([, t]) => t(f));

describe("import layers", () => {
  it("place every sdk file in a layer", () => {
    expect(sources.filter((f) => f.startsWith("sdk/") && layerOf(f) < 0)).toEqual([]);
  });

  it("have no upward arrows", () => {
    const up = edges
      .filter((e) => e.from.startsWith("sdk/") && !(e.dynamic && e.from === "sdk/backends/registry.ts"))
      .filter((e) => (e.to.startsWith("sdk/") ? layerOf(e.to) > layerOf(e.from) : layerOf(e.from) < LAYERS.length - 1))
      .map((e) => `${e.from} (${LAYERS[layerOf(e.from)]![0]}) -> ${e.to}`);
    expect(up).toEqual([]);
  });

  it("the checker sees an upward arrow when there is one", () => {
    // Guard against a scan that matches nothing: workspace importing the manager would be upward.
    expect(layerOf("sdk/manager/manager.ts")).toBeGreaterThan(layerOf("sdk/workspace/workspace.ts"));
    expect(edgesOf("sdk/backends/shared/sandbox-manager.ts").some((e) => e.to === "sdk/manager/manager.ts")).toBe(true);
    expect(edges.length).toBeGreaterThan(200);
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


describe("file size", () => {
  it("keeps sdk files under about 400 lines unless the opening comment says why", () => {
    const big = walk("sdk")
      .map((f) => ({ f, text: readFileSync(path.join(root, f), "utf8") }))
      .filter(({ text }) => text.split("\n").length > 420)
      .filter(({ text }) => !openingComment(text).includes("Size:"))
      .map(({ f, text }) => `${f} (${text.split("\n").length} lines)`);
    expect(big).toEqual([]);
  });
});
