/**
 * Attack (issue 25, item 7): the agent makes a 2,000-deep folder chain (a file at every level) with one
 * Bash call, then anyone runs Glob `**\/*` over it. On main 5e43587 Glob listed every folder by its full
 * path, twice per level: 4,000 calls each resolving up to 2,000 components (quadratic; over 60 s through
 * the runner). Now the subtree below a `**` comes from one walk with a descriptor per level and is matched
 * as an automaton: the sandbox calls stay a handful and the matcher steps linear in the entries.
 */
import { afterAll, describe, expect, it } from "vitest";
import type { Sandbox } from "../../sdk/sandbox.js";
import { globFiles } from "../../sdk/workspace/tools/glob.js";
import { attackBackends, bash, type AttackBackend } from "../support/hostile-backends.js";

const DEPTH = 2000;
const env = await attackBackends("chain");
afterAll(() => env.closeAll());

/** A chain `chain/d/d/.../d` DEPTH deep with `f.txt` at every level, made by the agent (chdir: no path is ever longer than a name). */
const MAKE_CHAIN = `python3 -c "
import os
os.mkdir('chain'); os.chdir('chain')
for i in range(${DEPTH}):
    open('f.txt', 'w').write('x')
    os.mkdir('d'); os.chdir('d')
print('made')
"`;

/** The sandbox with every call that resolves a path counted. */
function counting(sb: Sandbox): { sandbox: Sandbox; calls: () => number } {
  let n = 0;
  const counted = new Set(["list", "listPage", "readDirTyped", "walkTree", "stat", "readFile"]);
  const sandbox = new Proxy(sb, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (counted.has(String(prop))) n++;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { sandbox, calls: () => n };
}

describe.each(env.backends.map((b) => [b.name, b] as [string, AttackBackend]))("Glob over a %s workspace's 2,000-deep chain", (_name, backend) => {
  it("`**/*` finds every file in a handful of sandbox calls and linear matcher steps, not truncated", { timeout: 180_000 }, async () => {
    const ws = await backend.open();
    try {
      expect(await bash(ws, MAKE_CHAIN)).toContain("made");
      const { sandbox, calls } = counting(ws.getBackend());
      const r = await globFiles(sandbox, "", "**/*");
      expect(r.truncated).toBe(false);
      expect(r.matches.length).toBe(DEPTH);
      // One walk (plus nothing per level): main made 2 listings per level, 4,000 in all.
      expect(calls()).toBeLessThanOrEqual(4);
      // 2 * DEPTH entries, 2 pattern positions each at most.
      expect(r.steps).toBeLessThanOrEqual(2 * (2 * DEPTH) * 2);

      // The tool itself, as an agent calls it.
      const glob = ws.listTools().find((t) => t.name === "Glob")!;
      const out = await glob.execute({ pattern: "chain/**/f.txt", head_limit: 5 });
      expect(out.ok).toBe(true);
      expect(out.metadata).toMatchObject({ count: DEPTH, walkTruncated: false });
    } finally {
      await bash(ws, "rm -rf chain");
    }
  });
});

describe("Glob is time-bounded (local)", () => {
  it("past its deadline it answers with what it has, marked truncated", { timeout: 120_000 }, async () => {
    const ws = await env.backends[0]!.open();
    try {
      await bash(ws, MAKE_CHAIN);
      const r = await globFiles(ws.getBackend(), "", "**/*", { timeoutMs: 1 });
      expect(r.truncated).toBe(true);
      expect(r.matches.length).toBeLessThan(DEPTH);
    } finally {
      await bash(ws, "rm -rf chain");
    }
  });
});
