/**
 * Reduced parity check against the Python reference (AgentScope's workspace module, pinned in
 * scripts/peer-venv.sh): the same calls on both, trees compared file by file. The venv is created
 * once and cached (~/.cache/agent-workspaces); when it cannot be created (no Python >= 3.10, PyPI
 * unreachable) the test is skipped with the reason printed. The full check runs with
 * `npm run bench:peer` or `npx tsx bench/peer/parity.ts`.
 */
import { cp, readFile, rm, writeFile } from "node:fs/promises";
import { mkdtemp } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compareTrees } from "../../bench/peer/compare.js";
import { ensurePeerVenv, startReference, type DriverClient } from "../../bench/peer/driver-client.js";
import { formatParity, runParity, type ParityReport } from "../../bench/peer/parity.js";

let reference: DriverClient | undefined;
let skipReason = "";

beforeAll(async () => {
  try {
    reference = startReference(await ensurePeerVenv());
    await reference.request({ op: "version" });
  } catch (e) {
    skipReason = `reference venv unavailable: ${(e instanceof Error ? e.message : String(e)).split("\n").slice(0, 3).join(" ")}`;
    console.warn(`[peer-parity] skipped: ${skipReason}`);
    reference = undefined;
  }
}, 900_000);

afterAll(async () => {
  await reference?.close();
});

describe("parity with the Python reference (reduced scenario)", () => {
  let report: ParityReport | undefined;
  let scratch: string | undefined;

  afterAll(async () => {
    if (report) await rm(path.dirname(report.oursDir), { recursive: true, force: true });
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  it("produces the same workspace tree, bar listed differences", async (ctx) => {
    if (!reference) return ctx.skip(skipReason);
    report = await runParity("reduced", { reference, keep: true });
    console.log(formatParity(report));
    expect(report.unexpected).toEqual([]);
    // The scenario really wrote the artefacts it is meant to compare.
    expect(report.filesCompared).toBeGreaterThanOrEqual(15);
    const index = JSON.parse(await readFile(path.join(report.referenceDir, "skills", "alice", ".index"), "utf8")) as {
      skills: Record<string, { skill_name: string }>;
    };
    expect(Object.values(index.skills).map((s) => s.skill_name)).toEqual(["seed-alpha", "seed-beta", "extra-one", "extra-one (1)"]);
  }, 120_000);

  it("notices a changed, a missing and an extra file (the comparison can fail)", async (ctx) => {
    if (!reference || !report) return ctx.skip(skipReason || "parity run did not happen");
    scratch = await mkdtemp(path.join(os.tmpdir(), "peer-parity-tamper-"));
    const ours = path.join(scratch, "ours");
    await cp(report.oursDir, ours, { recursive: true });
    await writeFile(path.join(ours, "sessions", "s1", "tool_result-call-1.txt"), "tampered");
    await rm(path.join(ours, "skills", "alice", "extra-one"), { recursive: true });
    await writeFile(path.join(ours, "sessions", "s1", "stray.txt"), "x");
    const { differences } = await compareTrees(ours, report.referenceDir);
    const keys = differences.map((d) => d.key);
    expect(keys).toContain("content:sessions/s1/tool_result-call-1.txt");
    expect(keys).toContain("only-reference:skills/alice/extra-one/SKILL.md");
    expect(keys).toContain("only-ours:sessions/s1/stray.txt");
  });
});
