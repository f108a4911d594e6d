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
import { pathToFileURL } from "node:url";
import { compareResults, compareTrees, type Difference } from "./compare.js";
import { DELIBERATE_DIFFERENCES, NORMALISATIONS, type DeliberateDifference } from "./deliberate-differences.js";
import { ensurePeerVenv, startReference, type DriverClient } from "./driver-client.js";
import { runScenario } from "./ours.js";
import { buildScenario, type StepResult } from "./scenario.js";

export interface ParityReport {
  variant: "full" | "reduced";
  steps: number;
  filesCompared: number;
  /** Differences matched by a "deliberate" entry. */
  accepted: Array<Difference & { entry: DeliberateDifference }>;
  /** Differences matched by an "open" entry: known parity bugs on our side, reported every run. */
  open: Array<Difference & { entry: DeliberateDifference }>;
  unexpected: Difference[];
  /** Deliberate entries that matched nothing in this run (stale, or not covered by this variant). */
  unused: DeliberateDifference[];
  oursDir: string;
  referenceDir: string;
}

function classify(differences: Difference[]): Pick<ParityReport, "accepted" | "open" | "unexpected"> & { used: Set<DeliberateDifference> } {
  const accepted: ParityReport["accepted"] = [];
  const open: ParityReport["open"] = [];
  const unexpected: Difference[] = [];
  const used = new Set<DeliberateDifference>();
  for (const d of differences) {
    // Entries describe paths inside a workspace; a snapshot's "@<label>/" prefix is not part of them.
    const bare = d.key.replace(/^([a-z-]+):@[^/]+\//, "$1:");
    const hit = DELIBERATE_DIFFERENCES.find((e) => e.match.test(bare) && (!e.detail || e.detail.test(d.detail)));
    if (!hit) unexpected.push(d);
    else {
      used.add(hit);
      (hit.status === "open" ? open : accepted).push({ ...d, entry: hit });
    }
  }
  return { accepted, open, unexpected, used };
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
    // Each snapshot pair, then the final trees; snapshot paths are prefixed "@<label>/".
    const labels = steps.flatMap((s) => (s.call === "snapshot" ? [s.label] : []));
    let filesCompared = 0;
    const differences = compareResults(steps, oursResults, refReply.results);
    for (const label of [...labels, undefined]) {
      const suffix = label === undefined ? "" : `@${label}`;
      const tree = await compareTrees(oursDir + suffix, referenceDir + suffix);
      filesCompared += tree.files;
      for (const d of tree.differences) {
        const target = label === undefined ? d.target : `@${label}/${d.target}`;
        differences.push({ ...d, target, key: `${d.kind}:${target}` });
      }
    }
    const { accepted, open, unexpected, used } = classify(differences);
    return {
      variant,
      steps: steps.length,
      filesCompared,
      accepted,
      open,
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

/** Groups differences under the entry that explains them, reason first. */
function grouped(items: Array<Difference & { entry: DeliberateDifference }>): string[] {
  const by = new Map<DeliberateDifference, Difference[]>();
  for (const d of items) by.set(d.entry, [...(by.get(d.entry) ?? []), d]);
  const lines: string[] = [];
  for (const [entry, ds] of by) {
    lines.push(`  - ${entry.reason}${entry.owner ? `\n    fix in: ${entry.owner}` : ""}`);
    for (const d of ds) lines.push(`      ${d.key}: ${d.detail}`);
  }
  return lines;
}

export function formatParity(r: ParityReport): string {
  const lines = [`Parity (${r.variant}): ${r.steps} calls on both sides, ${r.filesCompared} files compared.`];
  lines.push("", "Normalised before comparing:");
  for (const n of NORMALISATIONS) lines.push(`  - ${n}`);
  lines.push("", `Deliberate differences (${r.accepted.length}):`, ...grouped(r.accepted));
  if (r.open.length) lines.push("", `Open parity bugs on our side, known and reported (${r.open.length}):`, ...grouped(r.open));
  if (r.unexpected.length) {
    lines.push("", `UNEXPECTED differences (${r.unexpected.length}):`);
    for (const d of r.unexpected) lines.push(`  - ${d.key}: ${d.detail}`);
  }
  const stale = r.unused.filter((e) => e.status === "open");
  if (r.variant === "full" && stale.length) lines.push("", `Open entries that no longer occur (remove them): ${stale.map((e) => e.owner).join("; ")}`);
  lines.push("", r.unexpected.length ? "PARITY FAILED" : r.open.length ? `PARITY OK except ${r.open.length} open difference(s) listed above` : "PARITY OK");
  return lines.join("\n");
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const variant = process.argv.includes("--reduced") ? "reduced" : "full";
  const keep = process.argv.includes("--keep");
  const report = await runParity(variant, { keep });
  console.log(formatParity(report));
  if (keep) console.log(`\ntrees kept: ours ${report.oursDir}\n            reference ${report.referenceDir}`);
  process.exitCode = report.unexpected.length ? 1 : 0;
}
