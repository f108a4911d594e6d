import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { GENERATED, PYTHON_DIR, PYTHON_SOURCES, renderGenerated } from "../../scripts/runner-source.js";
import { HTTP_RUNNER_VERSION, httpGatewayScript } from "../../sdk/kit/runner/http-channel.js";
import { RUNNER_SOURCE } from "../../sdk/kit/runner/python.generated.js";

/**
 * The runner's Python (sdk/kit/runner/python): the shipped constants match the .py files, every file
 * compiles, pyflakes finds nothing (pinned, from a cached venv: scripts/python-lint.sh), and its own unit
 * tests (python/tests, stdlib unittest) pass.
 */
const root = path.resolve(import.meta.dirname, "../..");
const pyFiles = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f.endsWith(".py"))
    .map((f) => path.join(dir, f));
const allPy = [...pyFiles(PYTHON_DIR), ...pyFiles(path.join(PYTHON_DIR, "tests"))];
const scratch = mkdtempSync(path.join(tmpdir(), "agentws-runner-python-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function run(cmd: string, args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(cmd, args, { cwd: root, encoding: "utf8", env: { ...process.env, PYTHONDONTWRITEBYTECODE: "1", ...env }, timeout: 300_000 });
  return { code: r.status, out: `${r.stdout ?? ""}${r.stderr ?? ""}${r.error ? String(r.error) : ""}` };
}

/** pyflakes on files through the cached venv (built on first use): exit code and findings. */
const pyflakes = (files: string[]) => run(path.join(root, "scripts/python-lint.sh"), files);

describe("runner Python", () => {
  it("python.generated.ts matches the .py files (run `npx tsx scripts/runner-source.ts` after changing one)", () => {
    expect(readFileSync(GENERATED, "utf8")).toBe(renderGenerated());
    expect(RUNNER_SOURCE).toBe(readFileSync(path.join(PYTHON_DIR, "runner.py"), "utf8"));
    // Every shipped .py file has its constant, and tests/ ships nothing.
    expect(PYTHON_SOURCES.map((s) => s.file).sort()).toEqual(
      pyFiles(PYTHON_DIR)
        .map((f) => path.basename(f))
        .sort(),
    );
  });

  it("keeps the runner's version a hash of its text, and the source small enough to travel as one argument", () => {
    expect(HTTP_RUNNER_VERSION).toMatch(/^[0-9a-f]{16}$/);
    // textRunnerArgv passes the source as one argv string: Linux caps one at 128 KiB.
    expect(Buffer.byteLength(RUNNER_SOURCE)).toBeLessThan(120 << 10);
  });

  it("boots the gateway by calling its start's main with the parts (python/tests/test_gateway.py checks the rest of the chain)", () => {
    const script = httpGatewayScript({ home: "/h", port: 1, root: "/r" });
    expect(script).toContain('exec(compile(A[0],"agentws-gateway-start","exec"));main(A)');
  });

  it("compiles every file (py_compile)", () => {
    const script =
      "import os, py_compile, sys\nfor i, f in enumerate(sys.argv[2:]):\n    py_compile.compile(f, cfile=os.path.join(sys.argv[1], '%d.pyc' % i), doraise=True)\n";
    const r = run("python3", ["-c", script, scratch, ...allPy]);
    expect(r.out).toBe("");
    expect(r.code).toBe(0);
  });

  it("has no pyflakes findings", () => {
    const r = pyflakes(allPy);
    expect(r.out).toBe("");
    expect(r.code).toBe(0);
  }, 300_000); // the first run on a fresh machine builds the venv from PyPI

  it("the pyflakes check fails on a finding (an undefined name, an unused import)", () => {
    const bad = path.join(scratch, "bad.py");
    writeFileSync(bad, "import os\n\ndef f():\n    return undefined_name\n");
    const r = pyflakes([bad]);
    expect(r.code).toBe(1);
    expect(r.out).toContain("undefined name 'undefined_name'");
    expect(r.out).toContain("'os' imported but unused");
  }, 300_000);

  it("passes its own unit tests (python -m unittest discover sdk/kit/runner/python/tests)", () => {
    const tests = path.join(PYTHON_DIR, "tests");
    const r = run("python3", ["-m", "unittest", "discover", "-s", tests, "-t", tests, "-v"]);
    if (r.code !== 0) console.error(r.out);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^OK/m);
    // A discovery that found nothing would say OK too.
    const ran = Number(/^Ran (\d+) tests?/m.exec(r.out)?.[1] ?? 0);
    expect(ran).toBeGreaterThan(50);
  }, 120_000);
});
