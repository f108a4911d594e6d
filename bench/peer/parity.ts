/**
 * Parity check: replays the same call sequence (scenario.ts) on our LocalWorkspace and on the
 * reference's, each into its own empty temp folder, then compares the two trees file by file and
 * the calls' results. Differences listed in deliberate-differences.ts are reported with their
 * reason; any other difference fails.
 *
 *   npx tsx bench/peer/parity.ts [--reduced] [--keep]
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { compareResults, compareTrees, type Difference } from "./compare.js";
import { DELIBERATE_DIFFERENCES, NORMALISATIONS, type DeliberateDifference } from "./deliberate-differences.js";
import { ensurePeerVenv, startReference, type DriverClient } from "./driver-client.js";
import { runScenario } from "./ours.js";
import { buildScenario, type StepResult } from "./scenario.js";

export interface ParityReport {
  variant: "full" | "reduced";
  steps: number;
  filesCompared: number;
  accepted: Array<Difference & { reason: string }>;
  unexpected: Difference[];
  /** Deliberate entries that matched nothing in this run (stale, or not covered by this variant). */
  unused: DeliberateDifference[];
  oursDir: string;
  referenceDir: string;
}

function classify(differences: Difference[]): { accepted: ParityReport["accepted"]; unexpected: Difference[]; used: Set<DeliberateDifference> } {
  const accepted: ParityReport["accepted"] = [];
  const unexpected: Difference[] = [];
  const used = new Set<DeliberateDifference>();
  for (const d of differences) {
    const hit = DELIBERATE_DIFFERENCES.find((e) => e.match.test(d.key) && (!e.detail || e.detail.test(d.detail)));
    if (hit) {
      used.add(hit);
      accepted.push({ ...d, reason: hit.reason });
    } else unexpected.push(d);
  }
  return { accepted, unexpected, used };
}

/** Runs the scenario on both sides. `reference` may be a running driver (reused) or started here. */
export async function runParity(variant: "full" | "reduced", opts: { reference?: DriverClient; keep?: boolean } = {}): Promise<ParityReport> {
  const root = await mkdtemp(path.join(os.tmpdir(), "peer-parity-"));
  const oursDir = path.join(root, "ours");
  const referenceDir = path.join(root, "reference");
  const ref = opts.reference ?? startReference(await ensurePeerVenv());
  try {
    const steps = await buildScenario(root, variant);
    const refReply = await ref.request<{ id: number; ok: boolean; results: StepResult[] }>({ op: "scenario", workdir: referenceDir, steps });
    const oursResults = await runScenario(oursDir, steps);
    const tree = await compareTrees(oursDir, referenceDir);
    const differences = [...compareResults(steps, oursResults, refReply.results), ...tree.differences];
    const { accepted, unexpected, used } = classify(differences);
    return {
      variant,
      steps: steps.length,
      filesCompared: tree.files,
      accepted,
      unexpected,
      unused: DELIBERATE_DIFFERENCES.filter((e) => !used.has(e)),
      oursDir,
      referenceDir,
    };
  } finally {
    if (!opts.reference) await ref.close();
    if (!opts.keep) await rm(root, { recursive: true, force: true });
  }
}

export function formatParity(r: ParityReport): string {
  const lines = [`Parity (${r.variant}): ${r.steps} calls, ${r.filesCompared} files compared on both trees.`];
  lines.push("", "Normalised before comparing:");
  for (const n of NORMALISATIONS) lines.push(`  - ${n}`);
  lines.push("", `Deliberate differences seen (${r.accepted.length}):`);
  for (const d of r.accepted) lines.push(`  - ${d.key}: ${d.detail}`, `      why: ${d.reason}`);
  if (r.unexpected.length) {
    lines.push("", `UNEXPECTED differences (${r.unexpected.length}):`);
    for (const d of r.unexpected) lines.push(`  - ${d.key}: ${d.detail}`);
  }
  lines.push("", r.unexpected.length ? "PARITY FAILED" : "PARITY OK");
  return lines.join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const variant = process.argv.includes("--reduced") ? "reduced" : "full";
  const keep = process.argv.includes("--keep");
  const report = await runParity(variant, { keep });
  console.log(formatParity(report));
  if (keep) console.log(`\ntrees kept: ours ${report.oursDir}\n            reference ${report.referenceDir}`);
  process.exitCode = report.unexpected.length ? 1 : 0;
}
