/**
 * Attack: Glob patterns that make a backtracking matcher take exponential time
 * (`*a*a*a*a*a*a*a*ab` against one 60-character name blocked the event loop for 47 s), brace bombs
 * in Grep's glob filter, and inputs that used to escape the tools as raw exceptions (an invalid
 * class `[z-a]`, an over-long name in Write). Every call must return, with the right result.
 */
import { spawn } from "node:child_process";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalSandbox } from "../../sdk/kit/host-sandbox.js";
import { createBuiltinTools } from "../../sdk/workspace/tools/index.js";
import type { ToolResult, WorkspaceTool } from "../../sdk/workspace/tools/common.js";

const CHILD = fileURLToPath(new URL("./glob-redos.child.ts", import.meta.url));
/** Far above what a linear matcher needs (milliseconds), far below a backtracking one (minutes). */
const HANG_GUARD_MS = 40_000;

/** Runs the calls in a child process; null when it had not finished within the guard. */
async function runIsolated(root: string, calls: Array<[string, unknown]>): Promise<Array<ToolResult & { thrown?: string }> | null> {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, root, JSON.stringify(calls)], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), HANG_GUARD_MS);
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  clearTimeout(timer);
  if (code !== 0) return null;
  return JSON.parse(out) as Array<ToolResult & { thrown?: string }>;
}

describe("Glob and tool errors under adversarial input", () => {
  let root: string;
  let tools: Map<string, WorkspaceTool>;
  const long = "a".repeat(60);

  beforeAll(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-redos-"));
    await fs.mkdir(path.join(root, "deep/er/still"), { recursive: true });
    await fs.writeFile(path.join(root, long), "aaa\n");
    await fs.writeFile(path.join(root, "deep/er/still", long), "aaa\n");
    await fs.writeFile(path.join(root, `${long}b`), "aaa\n");
    await fs.writeFile(path.join(root, "file.txt"), "text\n");
    tools = new Map(createBuiltinTools(new LocalSandbox(root), { track: (fn) => fn(), grepEngine: "scan" }).map((t) => [t.name, t]));
  });

  afterAll(async () => {
    await fs.rm(root, { recursive: true, force: true });
  });

  it(
    "adversarial patterns return the right matches instead of backtracking",
    async () => {
      const evil = "*a*a*a*a*a*a*a*ab";
      const worse = "*a*a*a*a*a*a*a*a*a*a*a*ab";
      const results = await runIsolated(root, [
        ["Glob", { pattern: evil }],
        ["Glob", { pattern: `**/${worse}` }],
        ["Glob", { pattern: `**/**/**/**/**/**/**/**/${worse}` }],
        ["Grep", { pattern: "aaa", glob: worse }],
        ["Grep", { pattern: "aaa", glob: `**/**/**/**/**/**/**/**/**/**/**/**/${worse}` }],
        ["Grep", { pattern: "aaa", glob: "{a,b}".repeat(24) }],
      ]);
      expect(results, "the calls did not finish within the hang guard").not.toBeNull();
      const [glob, globDeep, globStars, grep, grepStars, braces] = results!;
      expect(glob).toMatchObject({ ok: true, output: path.join(root, `${long}b`) });
      expect(globDeep).toMatchObject({ ok: true, output: path.join(root, `${long}b`) });
      expect(globStars).toMatchObject({ ok: true, output: path.join(root, `${long}b`) });
      expect(grep).toMatchObject({ ok: true, output: path.join(root, `${long}b`) });
      expect(grepStars).toMatchObject({ ok: true, output: path.join(root, `${long}b`) });
      expect(braces).toMatchObject({ ok: false, output: expect.stringMatching(/alternatives/) });
    },
    HANG_GUARD_MS + 20_000,
  );

  it("normal patterns still match as before", async () => {
    expect((await tools.get("Glob")!.execute({ pattern: "**/a*" })).output.split("\n").sort()).toEqual(
      [path.join(root, long), path.join(root, `${long}b`), path.join(root, "deep/er/still", long)].sort(),
    );
    expect((await tools.get("Glob")!.execute({ pattern: "[e-g]ile.t?t" })).output).toBe(path.join(root, "file.txt"));
    expect((await tools.get("Glob")!.execute({ pattern: "[!a]*" })).output).toBe(path.join(root, "file.txt"));
    expect((await tools.get("Grep")!.execute({ pattern: "text", glob: "*.{md,txt}" })).output).toBe(path.join(root, "file.txt"));
  });

  it("an invalid class comes back as an error result from Glob and Grep", async () => {
    const glob = await tools.get("Glob")!.execute({ pattern: "[z-a]*" });
    expect(glob).toMatchObject({ ok: false, output: expect.stringMatching(/invalid character range 'z-a'/) });
    const grep = await tools.get("Grep")!.execute({ pattern: "x", glob: "[z-a]" });
    expect(grep).toMatchObject({ ok: false, output: expect.stringMatching(/invalid character range 'z-a'/) });
  });

  it("an over-long name or a file in place of a folder comes back from Write and Edit as an error result", async () => {
    const tooLong = `${"n".repeat(300)}.txt`;
    const write = await tools.get("Write")!.execute({ file_path: tooLong, content: "x" });
    expect(write).toMatchObject({ ok: false, output: expect.stringMatching(/^Error: /) });
    expect(write.output).not.toMatch(/\/proc\/self\/fd/);
    const nested = await tools.get("Write")!.execute({ file_path: "file.txt/child.txt", content: "x" });
    expect(nested).toMatchObject({ ok: false, output: expect.stringMatching(/^Error: /) });
    const edit = await tools.get("Edit")!.execute({ file_path: tooLong, old_string: "a", new_string: "b" });
    expect(edit.ok).toBe(false);
    const read = await tools.get("Read")!.execute({ file_path: tooLong });
    expect(read.ok).toBe(false);
  });
});
