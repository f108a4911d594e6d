/**
 * Peer benchmark: the same operations on this SDK and on the Python reference (AgentScope's
 * workspace module, pinned in scripts/peer-venv.sh), alternating in one run, printed as ratios
 * ours / reference. Each side is a long-lived driver process (ours.ts, reference_ops.py) that
 * times only the operation itself; process start, input building and clean-up are not timed.
 *
 *   npm run bench:peer                           (= npx tsx bench/peer/run.ts)
 *   npx tsx bench/peer/run.ts --rounds 7 --only offload_data_50pct,manager_hits_100k
 *   npx tsx bench/peer/run.ts --markdown /tmp/peer.md --no-parity
 *   npm run bench:peer -- --rounds 9 --update-readme   (rewrites the tables in bench/peer/README.md and README.md)
 *
 * One warm-up round is run and discarded, then `--rounds` measured rounds (default 5); the side
 * that goes first alternates every round. The ratio is the median of per-round ratios, with
 * their min–max as the spread. The last column is the same ratio over process CPU time (all
 * threads, child processes excluded), which moves less when other work shares the machine; the
 * goal is judged on wall time.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { PEER_DIR, REPO_ROOT, ensurePeerVenv, startOurs, startReference, type DriverClient, type Reply } from "./driver-client.js";
import { writeFixtures } from "./fixtures.js";
import { formatParity, runParity } from "./parity.js";

/**
 * `children`: a side starts processes during the timed region (the reference runs Python shims
 * to migrate the skill layout and to equip partitions; bwrap rows run bwrap), whose CPU time
 * process.cpuUsage / time.process_time do not see, so no CPU-time ratio is shown for them.
 */
export const OPERATIONS: Array<{ name: string; label: string; goal: number; children?: boolean }> = [
  { name: "init_seed20", label: "LocalWorkspace initialize, 20 seed skills", goal: 0.5, children: true },
  { name: "add_skills_100", label: "addSkill ×100 (a third duplicates)", goal: 0.5, children: true },
  { name: "list_skills_10_first", label: "listSkills for 10 agents, first (equips partitions)", goal: 0.5, children: true },
  { name: "list_skills_10_warm", label: "listSkills for 10 agents, warm", goal: 0.5 },
  { name: "offload_tool_result_small", label: "offloadToolResult ×1000 small", goal: 0.5 },
  { name: "offload_tool_result_1mib", label: "offloadToolResult ×20 of 1 MiB", goal: 0.5 },
  { name: "offload_data_50pct", label: "offloadData ×100 of 16 KiB, 50% repeated", goal: 0.5 },
  { name: "offload_context_1000", label: "offloadContext of 1000 messages", goal: 0.5 },
  { name: "manager_hits_100k", label: "manager getWorkspace cache hit ×100,000", goal: 0.1 },
  { name: "assign_per_agent_100k", label: "assignWorkspaceId ×100,000, per_agent", goal: 0.1 },
  { name: "assign_per_user_100k", label: "assignWorkspaceId ×100,000, per_user", goal: 0.1 },
  { name: "assign_per_session_100k", label: "assignWorkspaceId ×100,000, per_session", goal: 0.1 },
  { name: "manager_first_100_concurrent", label: "100 concurrent first getWorkspace, distinct ids", goal: 0.5, children: true },
  { name: "bwrap_exec_true_200", label: "Bubblewrap exec `true` ×200", goal: 0.5, children: true },
];

interface BenchReply extends Reply {
  ms: number;
  cpuMs: number;
  count: number;
  extra: Record<string, unknown>;
}

export interface Row {
  name: string;
  label: string;
  goal: number;
  children?: boolean;
  ours: number[];
  reference: number[];
  ratios: number[];
  /** Per-round CPU-time ratios (process CPU, child processes excluded). */
  cpuRatios: number[];
  error?: string;
  mismatch?: string;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function fmtMs(ms: number): string {
  return ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2);
}
function fmtRatio(r: number): string {
  return r >= 0.1 ? r.toFixed(2) : r >= 0.01 ? r.toFixed(3) : r.toFixed(4);
}

export function formatTable(rows: Row[]): string {
  const out = [
    "| operation | ours ms, median (min–max) | reference ms, median (min–max) | ours / reference, median (min–max) | goal | CPU-time ratio |",
    "|---|---:|---:|---:|:---:|---:|",
  ];
  for (const r of rows) {
    if (r.error || !r.ratios.length) {
      out.push(`| ${r.label} | – | – | n/a: ${r.error ?? "no data"} | ≤ ${r.goal} | – |`);
      continue;
    }
    const span = (xs: number[]) => `${fmtMs(median(xs))} (${fmtMs(Math.min(...xs))}–${fmtMs(Math.max(...xs))})`;
    const ratio = median(r.ratios);
    const mark = ratio <= r.goal ? "✓" : "✗";
    out.push(
      `| ${r.label} | ${span(r.ours)} | ${span(r.reference)} | **${fmtRatio(ratio)}** (${fmtRatio(Math.min(...r.ratios))}–${fmtRatio(Math.max(...r.ratios))}) | ≤ ${r.goal} ${mark} | ${r.children ? "n/a (spawns)" : r.cpuRatios.length ? fmtRatio(median(r.cpuRatios)) : "–"} |`,
    );
  }
  return out.join("\n");
}

/**
 * Replaces the block between the peer-table markers in bench/peer/README.md and in the
 * repository README (which carries the same markers for this command); a file without them is left alone.
 */
async function updateReadme(block: string): Promise<void> {
  const start = "<!-- peer-table:start -->";
  const end = "<!-- peer-table:end -->";
  for (const file of [path.join(PEER_DIR, "README.md"), path.join(REPO_ROOT, "README.md")]) {
    const text = await readFile(file, "utf8").catch(() => "");
    const i = text.indexOf(start);
    const j = text.indexOf(end);
    if (i < 0 || j < i) {
      console.error(`${file}: no ${start} ... ${end} markers, not updated`);
      continue;
    }
    await writeFile(file, `${text.slice(0, i + start.length)}\n${block}\n${text.slice(j)}`);
    console.error(`table written to ${file}`);
  }
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const rounds = Number(arg("--rounds") ?? 5);
  const only = arg("--only")?.split(",");
  const ops = OPERATIONS.filter((o) => !only || only.includes(o.name));
  const fx = await mkdtemp(path.join(os.tmpdir(), "peer-fixtures-"));
  console.error("preparing: reference venv, fixtures, drivers");
  const python = await ensurePeerVenv();
  await writeFixtures(fx);
  const ref = startReference(python);
  const ours = startOurs();
  try {
    const [rv, ov] = await Promise.all([ref.request({ op: "version" }), ours.request({ op: "version" })]);
    const load = () => os.loadavg()[0]!.toFixed(1);
    const loadAtStart = load();
    let header = `reference: agentscope ${String(rv.version)} on Python ${String(rv.python)}; ours: Node ${String(ov.version)}; ${os.cpus().length} CPUs; ${rounds} rounds + 1 warm-up`;
    console.error(header);

    const rows: Row[] = ops.map((o) => ({ ...o, ours: [], reference: [], ratios: [], cpuRatios: [] }));
    for (let round = 0; round <= rounds; round++) {
      const warm = round === 0;
      console.error(warm ? "warm-up round" : `round ${round}/${rounds}`);
      for (const row of rows) {
        if (row.error) continue;
        const sides: Array<[DriverClient, "ours" | "reference"]> =
          round % 2
            ? [
                [ours, "ours"],
                [ref, "reference"],
              ]
            : [
                [ref, "reference"],
                [ours, "ours"],
              ];
        const got: Partial<Record<"ours" | "reference", BenchReply>> = {};
        try {
          for (const [client, side] of sides) got[side] = await client.request<BenchReply>({ op: "bench", name: row.name, fixtures: fx });
        } catch (e) {
          row.error = (e instanceof Error ? e.message : String(e)).split("\n")[0]!.slice(0, 160);
          console.error(`  ${row.name}: ${row.error}`);
          continue;
        }
        const a = got.ours!;
        const b = got.reference!;
        // Same work on both sides, or the ratio means nothing.
        if (a.count !== b.count || JSON.stringify(a.extra) !== JSON.stringify(b.extra))
          row.mismatch = `ours ${a.count} ${JSON.stringify(a.extra)} vs reference ${b.count} ${JSON.stringify(b.extra)}`;
        if (warm) continue;
        row.ours.push(a.ms);
        row.reference.push(b.ms);
        row.ratios.push(a.ms / b.ms);
        if (b.cpuMs > 0) row.cpuRatios.push(a.cpuMs / b.cpuMs);
      }
    }

    // Other work on the machine widens the spread; say how busy it was.
    header += `; load average ${loadAtStart} at start, ${load()} at end`;
    const table = formatTable(rows);
    console.log(`\n${header}\n\n${table}`);
    const mismatches = rows.filter((r) => r.mismatch);
    for (const r of mismatches) console.log(`\nnote: ${r.name} did different work: ${r.mismatch}`);

    let parityText = "";
    if (!process.argv.includes("--no-parity")) {
      const report = await runParity("full", { reference: ref });
      parityText = formatParity(report);
      console.log(`\n${parityText}`);
      if (report.unexpected.length) process.exitCode = 1;
    }
    const md = arg("--markdown");
    if (md) await writeFile(md, `${header}\n\n${table}\n${parityText ? `\n\`\`\`\n${parityText}\n\`\`\`\n` : ""}`);
    if (process.argv.includes("--update-readme")) await updateReadme(`${new Date().toISOString().slice(0, 10)}, ${header}\n\n${table}`);
  } finally {
    await Promise.all([ref.close(), ours.close()]);
    await rm(fx, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
