// Built-in tool outputs against the pinned AgentScope reference's own tools (the peer venv made by
// scripts/peer-venv.sh), call by call on identical trees. Skipped, with the reason printed, when
// that venv is not built. Deliberate differences are listed in IGNORED below.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { LocalSandbox } from "../../sdk/kit/host-sandbox.js";
import { createBuiltinTools, type GrepEngine } from "../../sdk/workspace/tools/index.js";
import { hasRipgrep } from "../../sdk/workspace/tools/grep.js";

const venv = process.env.PEER_VENV_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "agent-workspaces", "peer-venv-2.0.11");
const python = path.join(venv, "bin", "python");
const ready = existsSync(path.join(venv, ".ready")) && existsSync(python);
if (!ready) console.log(`reference venv not found at ${venv} (run scripts/peer-venv.sh): tool parity checks skipped`);
const script = fileURLToPath(new URL("../fixtures/tools/reference_tool_calls.py", import.meta.url));

type Call = [string, Record<string, unknown>];

/** Builds the same tree in a directory: files, an old mtime per file (for Glob's order), a symlink. */
async function seed(dir: string): Promise<void> {
  const sb = new LocalSandbox(dir);
  const files: Record<string, string> = {
    "e.txt": "alpha beta\ngamma beta",
    "crlf.txt": "l1\r\nl2\r\n",
    "empty.txt": "",
    "long.txt": "x".repeat(2500) + "\n",
    "many.txt": Array.from({ length: 20 }, (_, i) => `hit ${i + 1}`).join("\n") + "\n",
    "src/app.ts": "const Alpha = 1;\nconst beta = 2;\n// alpha again\nexport {};\n",
    "src/util.js": "function alpha() {}\n",
    "src/.deep/x.ts": "deep alpha\n",
    ".env": "SECRET=alpha\n",
    "docs/readme.md": "Alpha docs\n\nmore\n",
  };
  let year = 2001;
  for (const [p, text] of Object.entries(files)) {
    await sb.writeFile(p, text);
    await sb.exec(["touch", "-d", `${year++}-01-01`, p]);
  }
}

const calls: Call[] = [
  ["Read", { file_path: "{wd}/crlf.txt" }],
  ["Read", { file_path: "{wd}/empty.txt" }],
  ["Read", { file_path: "{wd}/long.txt" }],
  ["Read", { file_path: "{wd}/many.txt", offset: 5, limit: 3 }],
  ["Read", { file_path: "{wd}/many.txt", offset: 50 }],
  ["Read", { file_path: "{wd}/nope.txt" }],
  ["Read", { file_path: "{wd}/src" }],
  ["Edit", { file_path: "{wd}/e.txt", old_string: "beta", new_string: "B" }],
  ["Edit", { file_path: "{wd}/e.txt", old_string: "zeta", new_string: "B" }],
  ["Edit", { file_path: "{wd}/e.txt", old_string: "beta", new_string: "beta" }],
  ["Edit", { file_path: "{wd}/none.txt", old_string: "a", new_string: "b" }],
  ["Edit", { file_path: "{wd}/e.txt", old_string: "gamma beta", new_string: "G" }],
  ["Edit", { file_path: "{wd}/e.txt", old_string: "a", new_string: "A", replace_all: true }],
  ["Edit", { file_path: "{wd}/e.txt", old_string: "G", new_string: "g\nh\n", replace_all: true }],
  ["Write", { file_path: "{wd}/new/dir/f.txt", content: "one\ntwo" }],
  ["Write", { file_path: "{wd}/new/dir/f.txt", content: "one\n2\ntwo\n" }],
  ["Write", { file_path: "{wd}/empty2.txt", content: "" }],
  ["Bash", { command: "echo out; echo err >&2; exit 4" }],
  ["Bash", { command: "sleep 3", timeout: 200 }],
  ["Bash", { command: "printf 'a\\r\\nb'; echo e >&2" }],
  ["Bash", { command: "true" }],
  ["Bash", { command: "head -c 30005 /dev/zero | tr '\\0' a" }],
  // Files written above can share one coarse kernel timestamp, and the two sides break mtime ties
  // differently: give each a distinct mtime before Glob sorts by it.
  ["Bash", { command: "touch -d 2030-01-01 {wd}/e.txt && touch -d 2030-01-02 {wd}/new/dir/f.txt && touch -d 2030-01-03 {wd}/empty2.txt" }],
  ["Glob", { pattern: "**/*.ts", path: "{wd}" }],
  ["Glob", { pattern: "*", path: "{wd}" }],
  ["Glob", { pattern: "s?c/*.js", path: "{wd}" }],
  ["Glob", { pattern: "*.nomatch", path: "{wd}" }],
  ["Glob", { pattern: "*", path: "{wd}/missing" }],
  ["Glob", { pattern: "**/*", path: "{wd}", head_limit: 2 }],
  ["Glob", { pattern: "**/*", path: "{wd}", head_limit: 3, offset: 2 }],
  ["Glob", { pattern: "**/*", path: "{wd}", offset: 100 }],
  ["Grep", { pattern: "alpha", path: "{wd}" }],
  ["Grep", { pattern: "alpha", path: "{wd}", case_insensitive: true, output_mode: "count" }],
  ["Grep", { pattern: "alpha", path: "{wd}", glob: "*.{ts,md}", case_insensitive: true }],
  ["Grep", { pattern: "alpha", path: "{wd}/src", type: "js" }],
  ["Grep", { pattern: "beta", output_mode: "content", path: "{wd}/src", "-C": 1 }],
  ["Grep", { pattern: "beta", output_mode: "content", path: "{wd}/src/app.ts", n: false }],
  ["Grep", { pattern: "^hit", output_mode: "content", path: "{wd}/many.txt", head_limit: 3, offset: 2 }],
  ["Grep", { pattern: "^hit", output_mode: "content", path: "{wd}/many.txt", offset: 18 }],
  ["Grep", { pattern: "Alpha = 1;\\nconst", multiline: true, path: "{wd}" }],
  ["Grep", { pattern: "zzz", path: "{wd}" }],
  ["Grep", { pattern: "ALPHA", path: "{wd}/src", i: true, output_mode: "content" }],
  ["Grep", { pattern: "alpha", path: "{wd}/src", output_mode: "content", context: 1 }],
  ["Grep", { pattern: "hit", path: "{wd}/many.txt", output_mode: "content", "-A": 1, head_limit: 4, offset: 30 }],
];

interface Outcome {
  text: string;
  error: boolean;
  diff?: string;
}

/** rg searches files in parallel, so the order of files in its output varies; compare Grep lines as multisets. */
const unordered = (call: Call, text: string) => (call[0] === "Grep" ? text.split("\n").sort().join("\n") : text);

describe.skipIf(!ready)("built-in tools parity with the reference", () => {
  const base = mkdtempSync(path.join(os.tmpdir(), "agentws-tools-parity-"));
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  const engines: GrepEngine[] = ["rg", "scan"];
  for (const engine of engines) {
    it(`gives the same text, state and diff for every call (Grep via ${engine})`, async () => {
      if (engine === "rg" && !(await hasRipgrep(new LocalSandbox(base)))) return void console.log("rg not installed: rg parity skipped");
      const refDir = path.join(base, `ref-${engine}`);
      const ourDir = path.join(base, `ours-${engine}`);
      await seed(refDir);
      await seed(ourDir);
      const fill = (dir: string) => calls.map(([n, args]) => [n, JSON.parse(JSON.stringify(args).replaceAll("{wd}", dir))] as Call);
      const r = spawnSync(python, [script, refDir], { input: JSON.stringify(fill(refDir)), encoding: "utf8", timeout: 120_000 });
      if (r.status !== 0) throw new Error(`reference failed: ${r.stderr}`);
      const ref = (JSON.parse(r.stdout) as Array<{ text?: string; state?: string; metadata?: { diff?: string }; error?: string }>).map((x, i): Outcome => ({
        text: unordered(calls[i]!, (x.text ?? x.error ?? "").replaceAll(refDir, "<WD>")),
        error: x.state === "error" || x.error !== undefined,
        ...(x.metadata?.diff !== undefined ? { diff: x.metadata.diff.replaceAll(refDir, "<WD>") } : {}),
      }));
      const tools = Object.fromEntries(createBuiltinTools(new LocalSandbox(ourDir), { track: (fn) => fn(), grepEngine: engine }).map((t) => [t.name, t]));
      const ours: Outcome[] = [];
      for (const [i, [name, args]] of fill(ourDir).entries()) {
        const res = await tools[name]!.execute(args);
        const diff = res.metadata?.diff;
        ours.push({
          text: unordered(calls[i]!, res.output.replaceAll(ourDir, "<WD>")),
          error: !res.ok,
          ...(typeof diff === "string" ? { diff: diff.replaceAll(ourDir, "<WD>") } : {}),
        });
      }
      const mismatches = calls
        .map((call, i) => ({ call: `#${i} ${call[0]} ${JSON.stringify(call[1])}`, ours: ours[i], reference: ref[i] }))
        .filter((m) => JSON.stringify(m.ours) !== JSON.stringify(m.reference));
      expect(mismatches).toEqual([]);
    });
  }
});
