import { PDFDocument, StandardFonts } from "pdf-lib";
import { describe, expect, it } from "vitest";
import type { Workspace } from "../../sdk/workspace/workspace.js";
import { createBuiltinTools, type GrepEngine, type WorkspaceTool } from "../../sdk/workspace/tools/index.js";
import { hasRipgrep } from "../../sdk/workspace/tools/grep.js";
import { useWorkspaces, type WorkspaceFixture } from "./fixture.js";
import { rejection } from "./helpers.js";

type Tools = Record<string, WorkspaceTool>;
const byName = (tools: WorkspaceTool[]): Tools => Object.fromEntries(tools.map((t) => [t.name, t]));

/** The six built-in tools (reference §3.3) over any backend, confined to the workspace. */
export function toolsContract(fixture: WorkspaceFixture): void {
  describe(`built-in tools contract (${fixture.name})`, () => {
    const { open } = useWorkspaces(fixture);
    const setup = async (): Promise<{ ws: Workspace; t: Tools; wd: string }> => {
      const ws = await open();
      return { ws, t: byName(ws.listTools()), wd: ws.getBackend().workdir };
    };

    it("lists Bash, Edit, Glob, Grep, Read, Write with JSON schemas for models", async () => {
      const { ws } = await setup();
      const tools = ws.listTools();
      expect(tools.map((t) => t.name)).toEqual(["Bash", "Edit", "Glob", "Grep", "Read", "Write"]);
      const t = byName(tools);
      expect(t.Read!.jsonSchema).toMatchObject({
        type: "object",
        required: ["file_path"],
        properties: { offset: { type: "integer" }, limit: { maximum: 2000 } },
      });
      expect(t.Grep!.jsonSchema).toMatchObject({
        properties: { "-A": { type: "integer" }, output_mode: { enum: ["content", "files_with_matches", "count"] } },
      });
      for (const tool of tools) expect(tool.description.length).toBeGreaterThan(10);
    });

    it("rejects bad input with an error naming the field", async () => {
      const { t } = await setup();
      const cases: Array<[string, unknown, string]> = [
        ["Bash", {}, "Bash.command"],
        ["Bash", { command: "true", timeout: -1 }, "Bash.timeout"],
        ["Bash", { command: "true", timeout: 1.5 }, "Bash.timeout"],
        ["Read", { file_path: "a", limit: 2001 }, "Read.limit"],
        ["Read", { file_path: "a", offset: 0 }, "Read.offset"],
        ["Write", { file_path: "a" }, "Write.content"],
        ["Edit", { file_path: "a", old_string: "", new_string: "x" }, "Edit.old_string"],
        ["Grep", { pattern: "x", output_mode: "lines" }, "Grep.output_mode"],
        ["Grep", { pattern: "x", head_limit: -1 }, "Grep.head_limit"],
        ["Glob", { pattern: 3 }, "Glob.pattern"],
      ];
      for (const [tool, input, field] of cases) {
        const e = await rejection(t[tool]!.execute(input));
        expect(e.code, `${tool} ${JSON.stringify(input)}`).toBe("invalid_argument");
        expect(e.field).toBe(field);
      }
    });

    describe("Bash", () => {
      it("runs in the workspace root and joins stdout and stderr", async () => {
        const { t, ws } = await setup();
        await ws.getBackend().writeFile("marker.txt", "here");
        const r = await t.Bash!.execute({ command: "cat marker.txt; echo err >&2" });
        expect(r).toMatchObject({ ok: true, output: "here\nerr\n" });
        expect((await t.Bash!.execute({ command: "printf 'a\\r\\nb'" })).output).toBe("a\nb");
      });

      it("reports failures with the command, stdout and stderr", async () => {
        const { t } = await setup();
        const r = await t.Bash!.execute({ command: "echo out; echo bad >&2; exit 4" });
        expect(r.ok).toBe(false);
        expect(r.output).toBe("Command failed: echo out; echo bad >&2; exit 4\n\nStdout:\nout\n\nStderr:\nbad\n");
        expect(r.metadata).toMatchObject({ exitCode: 4 });
      });

      it("times out with the reference's message and clamps huge timeouts", async () => {
        const { t } = await setup();
        const t0 = Date.now();
        const r = await t.Bash!.execute({ command: "sleep 5", timeout: 300 });
        expect(r).toMatchObject({ ok: false, output: "Command timed out after 300ms: sleep 5" });
        expect(Date.now() - t0).toBeLessThan(4000);
        expect((await t.Bash!.execute({ command: "echo ok", timeout: 99_999_999 })).output).toBe("ok\n");
      });

      it("caps output at 30000 characters with the truncation suffix", async () => {
        const { t } = await setup();
        const r = await t.Bash!.execute({ command: "head -c 50000 /dev/zero | tr '\\0' a" });
        expect(r.output).toBe("a".repeat(30000) + "\n... (output truncated)");
        expect(r.metadata).toMatchObject({ truncated: true });
        const failed = await t.Bash!.execute({ command: "head -c 50000 /dev/zero | tr '\\0' b; exit 1" });
        expect(failed.output.length).toBe(30000 + "\n... (output truncated)".length);
      });

      it("counts as activity while it runs", async () => {
        const { t, ws } = await setup();
        const running = t.Bash!.execute({ command: "sleep 0.3" });
        await new Promise((r) => setTimeout(r, 100));
        expect(ws.inFlight).toBeGreaterThan(0);
        await running;
        expect(ws.inFlight).toBe(0);
      });
    });

    describe("Read / Write / Edit", () => {
      it("writes with parents, reports lines and a diff from /dev/null, and accepts absolute or relative paths", async () => {
        const { t, ws, wd } = await setup();
        const r = await t.Write!.execute({ file_path: `${wd}/deep/a/b.txt`, content: "one\ntwo\nthree" });
        expect(r.output).toBe(`The file ${wd}/deep/a/b.txt has been written successfully (3 lines).`);
        expect(r.metadata).toMatchObject({ file_path: `${wd}/deep/a/b.txt`, occurrences: 1 });
        expect(r.metadata!.diff).toBe(`--- /dev/null\n+++ b/${wd}/deep/a/b.txt\n@@ -0,0 +1,3 @@\n+one\n+two\n+three`);
        expect((await ws.getBackend().readFile("deep/a/b.txt")).toString()).toBe("one\ntwo\nthree");
        const over = await t.Write!.execute({ file_path: "deep/a/b.txt", content: "one\n2\nthree" });
        expect(over.metadata!.diff).toBe(`--- a/${wd}/deep/a/b.txt\n+++ b/${wd}/deep/a/b.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three`);
        expect((await t.Write!.execute({ file_path: "n.txt", content: "x\n" })).output).toContain("(1 lines)");
        expect((await t.Write!.execute({ file_path: "n.txt", content: "" })).output).toContain("(0 lines)");
      });

      it("keeps a replaced file's permission bits (a script stays executable after Write and Edit)", async () => {
        const { t } = await setup();
        await t.Bash!.execute({ command: "printf 'echo one\\n' > run.sh && chmod 750 run.sh" });
        await t.Write!.execute({ file_path: "run.sh", content: "echo two\n" });
        expect((await t.Bash!.execute({ command: "stat -c %a run.sh && ./run.sh" })).output).toBe("750\ntwo\n");
        await t.Edit!.execute({ file_path: "run.sh", old_string: "two", new_string: "three" });
        expect((await t.Bash!.execute({ command: "stat -c %a run.sh && ./run.sh" })).output).toBe("750\nthree\n");
        await t.Write!.execute({ file_path: "fresh.txt", content: "x" });
        expect((await t.Bash!.execute({ command: "stat -c %a fresh.txt" })).output).toBe("644\n");
      });

      it("reads numbered lines with offset, limit, CRLF normalisation and long-line cuts", async () => {
        const { t, ws, wd } = await setup();
        const lines = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`);
        await ws.getBackend().writeFile("f.txt", lines.join("\r\n") + "\r\n");
        const all = await t.Read!.execute({ file_path: `${wd}/f.txt` });
        expect(all.output.split("\n")[0]).toBe("     1\tline 1");
        expect(all.output.split("\n")).toHaveLength(30);
        const part = await t.Read!.execute({ file_path: "f.txt", offset: 10, limit: 2 });
        expect(part.output).toBe("    10\tline 10\n    11\tline 11");
        await ws.getBackend().writeFile("long.txt", "x".repeat(2500));
        expect((await t.Read!.execute({ file_path: "long.txt" })).output).toBe(`     1\t${"x".repeat(2000)}[truncated]`);
        const past = await t.Read!.execute({ file_path: "f.txt", offset: 99 });
        expect(past).toMatchObject({ ok: true, output: "", metadata: { totalLines: 30 } });
      });

      it("reports missing files and directories as failed results", async () => {
        const { t, ws, wd } = await setup();
        await ws.getBackend().mkdir("adir");
        expect(await t.Read!.execute({ file_path: "nope.txt" })).toMatchObject({ ok: false, output: `Error: File does not exist: ${wd}/nope.txt` });
        expect(await t.Read!.execute({ file_path: "adir" })).toMatchObject({ ok: false, output: `Error: Path is a directory, not a file: ${wd}/adir` });
        expect(await t.Edit!.execute({ file_path: "nope.txt", old_string: "a", new_string: "b" })).toMatchObject({
          ok: false,
          output: `Error: File not found: ${wd}/nope.txt`,
        });
        expect((await t.Write!.execute({ file_path: "adir", content: "x" })).ok).toBe(false);
      });

      it("returns images as base64 data", async () => {
        const { t, ws } = await setup();
        const png = Buffer.from("89504e470d0a1a0a0000000d49484452", "hex");
        await ws.getBackend().writeFile("pic.png", png);
        const r = await t.Read!.execute({ file_path: "pic.png" });
        expect(r.metadata).toMatchObject({ mediaType: "image/png", data: png.toString("base64") });
      });

      it("reads PDFs as text per page, with page ranges, and names what is wrong", async () => {
        const { t, ws, wd } = await setup();
        const sb = ws.getBackend();
        await sb.writeFile("three.pdf", await pdfWithPages(3));
        await sb.writeFile("long.pdf", await pdfWithPages(25));
        await sb.writeFile("fake.pdf", "not a pdf at all");
        const all = await t.Read!.execute({ file_path: "three.pdf" });
        expect(all.output).toBe(
          "--- Page 1/3 ---\nPage one of 3\nline two\n\n--- Page 2/3 ---\nPage two of 3\nline two\n\n--- Page 3/3 ---\nPage three of 3\nline two",
        );
        expect(all.metadata).toMatchObject({ totalPages: 3, firstPage: 1, lastPage: 3 });
        expect((await t.Read!.execute({ file_path: "three.pdf", pages: "2" })).output).toBe("--- Page 2/3 ---\nPage two of 3\nline two");
        const tail = await t.Read!.execute({ file_path: `${wd}/long.pdf`, pages: "6-25" });
        expect(tail.output.split("\n\n")).toHaveLength(20);
        expect(tail.output.startsWith("--- Page 6/25 ---\nPage six of 25")).toBe(true);
        const refused = async (input: Record<string, unknown>, pattern: RegExp) => {
          const r = await t.Read!.execute(input);
          expect(r.ok).toBe(false);
          expect(r.output).toMatch(pattern);
        };
        await refused({ file_path: "long.pdf" }, /has 25 pages; pass pages/);
        await refused({ file_path: "long.pdf", pages: "1-21" }, /asks for 21 pages; at most 20/);
        await refused({ file_path: "three.pdf", pages: "4" }, /invalid pages "4".*within 1-3/);
        await refused({ file_path: "three.pdf", pages: "3-2" }, /invalid pages/);
        await refused({ file_path: "three.pdf", pages: "two" }, /invalid pages/);
        await refused({ file_path: "fake.pdf" }, /fake\.pdf: not a readable PDF/);
        await refused({ file_path: "missing.pdf" }, /File does not exist/);
      });

      it("edits exactly: unique match, replace_all, literal replacement text", async () => {
        const { t, ws, wd } = await setup();
        const sb = ws.getBackend();
        await sb.writeFile("e.txt", "alpha beta\ngamma beta\n");
        const multi = await t.Edit!.execute({ file_path: "e.txt", old_string: "beta", new_string: "B" });
        expect(multi.ok).toBe(false);
        expect(multi.output).toBe(
          `Error: old_string appears 2 times in ${wd}/e.txt. Set replace_all=true to replace all occurrences, or make old_string more specific.`,
        );
        expect((await t.Edit!.execute({ file_path: "e.txt", old_string: "zeta", new_string: "B" })).output).toBe(`Error: old_string not found in ${wd}/e.txt`);
        expect((await t.Edit!.execute({ file_path: "e.txt", old_string: "beta", new_string: "beta" })).output).toBe(
          "Error: old_string and new_string are identical. No changes to make.",
        );
        const one = await t.Edit!.execute({ file_path: `${wd}/e.txt`, old_string: "alpha beta", new_string: "$& $1 $$" });
        expect(one.output).toBe(`Successfully replaced 1 occurrence in ${wd}/e.txt`);
        expect((await sb.readFile("e.txt")).toString()).toBe("$& $1 $$\ngamma beta\n");
        const all = await t.Edit!.execute({ file_path: "e.txt", old_string: "a", new_string: "A", replace_all: true });
        expect(all.output).toBe(`Successfully replaced all 3 occurrences in ${wd}/e.txt`);
        expect(all.metadata).toMatchObject({ occurrences: 3 });
        expect(String(all.metadata!.diff)).toContain("-gamma beta\n+gAmmA betA");
        expect((await sb.readFile("e.txt")).toString()).toBe("$& $1 $$\ngAmmA betA\n");
      });
    });

    describe("Glob", () => {
      it("matches *, ?, ** under the workspace root by default, newest first, hidden names included, with paging", async () => {
        const { t, ws, wd } = await setup();
        const sb = ws.getBackend();
        for (const f of ["a.ts", "b.ts", "src/c.ts", "src/deep/d.ts", "src/e.js", ".hidden/h.ts", "src/.dot.ts", "x1.md", "x22.md"]) await sb.writeFile(f, f);
        await ws.getBackend().exec(["touch", "-d", "2001-01-01", "a.ts"]);
        await ws.getBackend().exec(["touch", "-d", "2002-01-01", "src/deep/d.ts"]);
        const r = await t.Glob!.execute({ pattern: "**/*.ts" });
        const found = r.output.split("\n");
        expect(found.slice().sort()).toEqual(
          [`${wd}/.hidden/h.ts`, `${wd}/a.ts`, `${wd}/b.ts`, `${wd}/src/.dot.ts`, `${wd}/src/c.ts`, `${wd}/src/deep/d.ts`].sort(),
        );
        expect(found.slice(-2)).toEqual([`${wd}/src/deep/d.ts`, `${wd}/a.ts`]);
        expect((await t.Glob!.execute({ pattern: "x?.md" })).output).toBe(`${wd}/x1.md`);
        expect((await t.Glob!.execute({ pattern: "*.ts", path: "src" })).output.split("\n").sort()).toEqual([`${wd}/src/.dot.ts`, `${wd}/src/c.ts`]);
        expect((await t.Glob!.execute({ pattern: `${wd}/src/*.js` })).output).toBe(`${wd}/src/e.js`);
        expect((await t.Glob!.execute({ pattern: ".hidden/*.ts" })).output).toBe(`${wd}/.hidden/h.ts`);
        expect((await t.Glob!.execute({ pattern: "*.py" })).output).toBe("No files found matching pattern: *.py");
        expect(await t.Glob!.execute({ pattern: "*", path: "missing" })).toMatchObject({ ok: false, output: `Directory not found: ${wd}/missing` });
        const page = await t.Glob!.execute({ pattern: "**/*.ts", head_limit: 2, offset: 4 });
        expect(page.output).toBe(`${found[4]}\n${found[5]}`);
        const cut = await t.Glob!.execute({ pattern: "**/*.ts", head_limit: 2, offset: 1 });
        expect(cut.output).toBe(`${found[1]}\n${found[2]}\n\n[Showing results with pagination = limit: 2, offset: 1]`);
      });

      it("never searches the host's working directory (fault 30)", async () => {
        const { t } = await setup();
        expect((await t.Glob!.execute({ pattern: "package.json" })).output).toBe("No files found matching pattern: package.json");
        expect((await t.Grep!.execute({ pattern: "agent-workspaces" })).output).toBe("No matches found for pattern: agent-workspaces");
      });
    });

    describe("Grep", () => {
      const seed = async (ws: Workspace) => {
        const sb = ws.getBackend();
        await sb.writeFile("src/app.ts", "const Alpha = 1;\nconst beta = 2;\n// alpha again\nexport {};\n");
        await sb.writeFile("src/util.js", "function alpha() {}\n");
        await sb.writeFile("docs/readme.md", "Alpha docs\n\nmore\n");
        await sb.writeFile(".config/hidden.txt", "alpha hidden\n");
        await sb.writeFile(".git/config", "alpha in git\n");
        await sb.writeFile("many.txt", Array.from({ length: 20 }, (_, i) => `hit ${i}`).join("\n") + "\n");
        await sb.writeFile("bin.dat", Buffer.from([0x61, 0x6c, 0x70, 0x68, 0x61, 0, 1, 2]));
      };
      const engines: GrepEngine[] = ["auto", "scan", "rg"];
      for (const engine of engines) {
        it(`finds files, lines and counts (${engine} engine)`, async () => {
          const ws = await open();
          if (engine === "rg" && !(await hasRipgrep(ws.getBackend())))
            return void console.log(`[${fixture.name}] rg not in the sandbox; rg engine checks skipped`);
          const grep = byName(createBuiltinTools(ws.getBackend(), { track: (fn) => fn(), grepEngine: engine })).Grep!;
          const wd = ws.getBackend().workdir;
          await seed(ws);
          expect((await grep.execute({ pattern: "alpha" })).output.split("\n")).toEqual([`${wd}/.config/hidden.txt`, `${wd}/src/app.ts`, `${wd}/src/util.js`]);
          expect((await grep.execute({ pattern: "alpha", i: true })).output.split("\n")).toEqual([
            `${wd}/.config/hidden.txt`,
            `${wd}/docs/readme.md`,
            `${wd}/src/app.ts`,
            `${wd}/src/util.js`,
          ]);
          expect((await grep.execute({ pattern: "alpha", case_insensitive: true, output_mode: "count", glob: "*.{ts,md}" })).output).toBe(
            `${wd}/docs/readme.md:1\n${wd}/src/app.ts:2`,
          );
          expect((await grep.execute({ pattern: "alpha", i: true, path: "src", type: "js" })).output).toBe(`${wd}/src/util.js`);
          expect((await grep.execute({ pattern: "beta", output_mode: "content", path: "src/app.ts" })).output).toBe("2:const beta = 2;");
          expect((await grep.execute({ pattern: "beta", output_mode: "content", path: "src", "-C": 1 })).output).toBe(
            `${wd}/src/app.ts-1-const Alpha = 1;\n${wd}/src/app.ts:2:const beta = 2;\n${wd}/src/app.ts-3-// alpha again`,
          );
          expect((await grep.execute({ pattern: "beta", output_mode: "content", path: "src", n: false })).output).toBe(`${wd}/src/app.ts:const beta = 2;`);
          expect((await grep.execute({ pattern: "Alpha = 1;\\nconst", multiline: true, output_mode: "files_with_matches" })).output).toBe(`${wd}/src/app.ts`);
          expect((await grep.execute({ pattern: "-dash-" })).output).toBe("No matches found for pattern: -dash-");
          expect((await grep.execute({ pattern: "nothing-here" })).output).toBe("No matches found for pattern: nothing-here");
        });

        it(`pages with head_limit and offset (${engine} engine)`, async () => {
          const ws = await open();
          if (engine === "rg" && !(await hasRipgrep(ws.getBackend()))) return;
          const grep = byName(createBuiltinTools(ws.getBackend(), { track: (fn) => fn(), grepEngine: engine })).Grep!;
          await seed(ws);
          const page = await grep.execute({ pattern: "^hit", output_mode: "content", path: "many.txt", head_limit: 5, offset: 3 });
          expect(page.output).toBe("4:hit 3\n5:hit 4\n6:hit 5\n7:hit 6\n8:hit 7\n\n[Showing results with pagination = limit: 5, offset: 3]");
          const first = await grep.execute({ pattern: "^hit", output_mode: "content", path: "many.txt", head_limit: 2 });
          expect(first.output).toBe("1:hit 0\n2:hit 1\n\n[Showing results with pagination = limit: 2]");
          const all = await grep.execute({ pattern: "^hit", output_mode: "content", path: "many.txt", head_limit: 0 });
          expect(all.output.split("\n")).toHaveLength(20);
          const defaultLimit = await grep.execute({ pattern: "^hit", output_mode: "content", path: "many.txt" });
          expect(defaultLimit.output).not.toContain("[Showing");
        });
      }

      it("reports an invalid regex as a failed result", async () => {
        const { t } = await setup();
        const r = await t.Grep!.execute({ pattern: "(unclosed" });
        expect(r.ok).toBe(false);
        expect(r.output).toMatch(/regex parse error|ripgrep error/);
      });
    });

    describe("confinement", () => {
      const outside = ["../escape.txt", "/etc/passwd", "a/../../x"];
      it("refuses paths that leave the workspace in every file tool", async () => {
        const { t, ws } = await setup();
        await ws.getBackend().writeFile("a/ok.txt", "x");
        const calls = (p: string): Array<[string, Promise<unknown>]> => [
          ["Read", t.Read!.execute({ file_path: p })],
          ["Write", t.Write!.execute({ file_path: p, content: "pwned" })],
          ["Edit", t.Edit!.execute({ file_path: p, old_string: "root", new_string: "toor" })],
          ["Glob", t.Glob!.execute({ pattern: "*", path: p })],
          ["Grep", t.Grep!.execute({ pattern: "root", path: p })],
        ];
        for (const p of outside)
          for (const [tool, call] of calls(p)) {
            const e = await rejection(call);
            expect(e.code, `${tool} ${p}`).toBe("path_escape");
          }
        expect((await rejection(t.Glob!.execute({ pattern: "../*" }))).code).toBe("path_escape");
        expect((await rejection(t.Glob!.execute({ pattern: "/etc/*" }))).code).toBe("path_escape");
      });

      it("refuses to follow symlinks out of the workspace", async () => {
        const { t, ws, wd } = await setup();
        const sb = ws.getBackend();
        const made = await sb.exec(["sh", "-c", "ln -s /etc etc-link && ln -s /etc/passwd passwd-link && ln -s /etc/hostname host-link"]);
        expect(made.exitCode).toBe(0);
        for (const p of ["passwd-link", `${wd}/passwd-link`, "etc-link/passwd"]) {
          expect((await rejection(t.Read!.execute({ file_path: p }))).code, `Read ${p}`).toBe("path_escape");
          expect((await rejection(t.Edit!.execute({ file_path: p, old_string: "root", new_string: "toor" }))).code, `Edit ${p}`).toBe("path_escape");
          expect((await rejection(t.Write!.execute({ file_path: p, content: "pwned" }))).code, `Write ${p}`).toBe("path_escape");
          expect((await rejection(t.Grep!.execute({ pattern: "root", path: p }))).code, `Grep ${p}`).toBe("path_escape");
        }
        expect((await rejection(t.Glob!.execute({ pattern: "*", path: "etc-link" }))).code).toBe("path_escape");
        // Walks from the root do not follow links out either.
        expect((await t.Glob!.execute({ pattern: "**/passwd" })).output).toBe("No files found matching pattern: **/passwd");
        expect((await t.Glob!.execute({ pattern: "etc-link/*" })).output).toBe("No files found matching pattern: etc-link/*");
        for (const engine of ["auto", "scan"] as const) {
          const grep = byName(createBuiltinTools(sb, { track: (fn) => fn(), grepEngine: engine })).Grep!;
          expect((await grep.execute({ pattern: "root:" })).output, engine).toBe("No matches found for pattern: root:");
        }
        const r = await sb.exec(["sh", "-c", "head -c 5 /etc/passwd"]);
        expect(r.stdout.toString()).not.toBe("pwned");
      });
    });
  });
}

const NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"];

/** A PDF whose page i reads "Page <i in words or digits> of <n>" then "line two". */
async function pdfWithPages(n: number): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (let i = 1; i <= n; i++) {
    const page = doc.addPage([300, 200]);
    page.drawText(`Page ${NUMBERS[i] ?? i} of ${n}`, { x: 20, y: 150, size: 14, font });
    page.drawText("line two", { x: 20, y: 120, size: 12, font });
  }
  return doc.save();
}
