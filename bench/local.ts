/**
 * Local workspace benchmarks, each a ratio against a baseline measured in the same run (medians
 * over several rounds, ours and baseline alternating):
 *   1. initialize() seeding 20 skills  vs  fs.cp of the same 20 folders        goal ≤ 1.5x
 *   2. addSkill of an already indexed skill  vs  one fs.stat                  goal: no copy happens
 *   3. offloadToolResult of 1 MiB  vs  one fs.writeFile of it                  goal ≤ 1.3x
 *   4. LocalSandbox readFile / writeFile of 4 KiB three folders deep (descriptor walk, openat
 *      through /proc/self/fd)  vs  the name-based walk it replaced (lstat per component, then
 *      open by name, as at aa2a25b)                                             goal ≤ 1.3x
 * Run: npx tsx bench/local.ts
 */
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { randomBytes } from "node:crypto";
import fsSync, { constants as fsc } from "node:fs";
import { LocalSandbox } from "../sdk/kit/host-sandbox.js";
import { LocalWorkspace } from "../sdk/backends/local/index.js";

const ROUNDS = 9;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const time = async (fn: () => Promise<unknown>) => {
  const t = performance.now();
  await fn();
  return performance.now() - t;
};

async function makeSkills(root: string, count: number): Promise<string[]> {
  const paths: string[] = [];
  for (let i = 0; i < count; i++) {
    const dir = path.join(root, `skill-${i}`);
    await fs.mkdir(path.join(dir, "scripts"), { recursive: true });
    await fs.writeFile(
      path.join(dir, "SKILL.md"),
      `---\nname: skill-${i}\ndescription: Benchmark skill number ${i}.\n---\n\n${"Instructions. ".repeat(200)}\n`,
    );
    await fs.writeFile(path.join(dir, "scripts", "run.py"), `print(${i})\n`.repeat(100));
    await fs.writeFile(path.join(dir, "reference.md"), "x".repeat(8 * 1024));
    paths.push(dir);
  }
  return paths;
}

async function main(): Promise<void> {
  const base = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-bench-"));
  try {
    const skills = await makeSkills(path.join(base, "src"), 20);
    const rows: Array<{ figure: string; ours: number; baseline: number; goal: string; ok: boolean; note?: string }> = [];

    // 1. initialize with 20 seed skills vs fs.cp of the same folders.
    {
      const ours: number[] = [];
      const baseline: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        const runOurs = async () => {
          const ws = new LocalWorkspace({ workdir: path.join(base, `init-${r}`), skillPaths: skills });
          ours.push(await time(() => ws.initialize()));
          await ws.close();
        };
        const runBase = async () => {
          const dst = path.join(base, `cp-${r}`);
          baseline.push(
            await time(async () => {
              await fs.mkdir(dst, { recursive: true });
              for (const s of skills) await fs.cp(s, path.join(dst, path.basename(s)), { recursive: true });
            }),
          );
        };
        if (r % 2 === 0) await runOurs().then(runBase);
        else await runBase().then(runOurs);
      }
      const ratio = median(ours) / median(baseline);
      rows.push({ figure: "initialize, 20 seed skills / fs.cp of them", ours: median(ours), baseline: median(baseline), goal: "≤ 1.5x", ok: ratio <= 1.5 });

      // Informational: initialize copies up to 16 folders at a time; compare with fs.cp doing the same.
      const parallel: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        const dst = path.join(base, `pcp-${r}`);
        await fs.mkdir(dst, { recursive: true });
        parallel.push(await time(() => Promise.all(skills.map((s) => fs.cp(s, path.join(dst, path.basename(s)), { recursive: true })))));
      }
      rows.push({ figure: "initialize / fs.cp of all 20 in parallel", ours: median(ours), baseline: median(parallel), goal: "info", ok: true });
    }

    // 2. Repeated addSkill of an indexed skill vs one fs.stat; nothing may be copied.
    {
      const ws = new LocalWorkspace({ workdir: path.join(base, "dedup") });
      await ws.initialize();
      await ws.addSkill(skills[0]!);
      const partition = path.join(ws.workdir, "skills", "default");
      const before = await snapshot(partition);
      const N = 200;
      const ours: number[] = [];
      const baseline: number[] = [];
      let returned = 0;
      for (let r = 0; r < ROUNDS; r++) {
        ours.push(
          (await time(async () => {
            for (let i = 0; i < N; i++) if ((await ws.addSkill(skills[0]!)) !== undefined) returned++;
          })) / N,
        );
        baseline.push(
          (await time(async () => {
            for (let i = 0; i < N; i++) await fs.stat(path.join(skills[0]!, "SKILL.md"));
          })) / N,
        );
      }
      const after = await snapshot(partition);
      const copied = returned !== 0 || before !== after;
      await ws.close();
      rows.push({
        figure: "addSkill of an indexed skill / one fs.stat",
        ours: median(ours),
        baseline: median(baseline),
        goal: "no copy",
        ok: !copied,
        note: copied ? "FILES CHANGED: a copy happened" : `no file copied or touched in ${ROUNDS * N} calls (partition tree, inodes and mtimes identical)`,
      });
    }

    // 3. offloadToolResult of 1 MiB vs one fs.writeFile of it; single operations, interleaved so load noise hits both.
    {
      const ws = new LocalWorkspace({ workdir: path.join(base, "offload") });
      await ws.initialize();
      const body = "0123456789abcdef".repeat(64 * 1024);
      const plain = path.join(base, "plain");
      await fs.mkdir(plain);
      const TRIALS = 25 * ROUNDS;
      const ours: number[] = [];
      const baseline: number[] = [];
      for (let i = 0; i < TRIALS; i++) {
        const runOurs = async () => ours.push(await time(() => ws.offloadToolResult("bench", { id: `t${i}`, output: body })));
        const runBase = async () => baseline.push(await time(() => fs.writeFile(path.join(plain, `t${i}.txt`), body)));
        if (i % 2 === 0) await runOurs().then(runBase);
        else await runBase().then(runOurs);
      }
      await ws.close();
      const ratio = median(ours) / median(baseline);
      rows.push({ figure: "offloadToolResult 1 MiB / fs.writeFile 1 MiB", ours: median(ours), baseline: median(baseline), goal: "≤ 1.3x", ok: ratio <= 1.3 });
    }

    // 4. Descriptor walk vs the name-based walk it replaced, per call, three folders deep.
    {
      const root = fsSync.realpathSync(await fs.mkdtemp(path.join(base, "walk-")));
      const sandbox = new LocalSandbox(root);
      const rel = "a/b/c/file.txt";
      const data = Buffer.alloc(4096, 7);
      await sandbox.writeFile(rel, data);
      const N = 2000;
      for (const [figure, ours, baseline] of [
        ["readFile 4 KiB, 3 deep: descriptors / by name", () => sandbox.readFile(rel), async () => nameBasedRead(root, rel)],
        ["writeFile 4 KiB, 3 deep: descriptors / by name", () => sandbox.writeFile(rel, data), async () => nameBasedWrite(root, rel, data)],
      ] as const) {
        const o: number[] = [];
        const b: number[] = [];
        for (let r = 0; r < ROUNDS; r++) {
          const runOurs = async () =>
            o.push(
              (await time(async () => {
                for (let i = 0; i < N; i++) await ours();
              })) / N,
            );
          const runBase = async () =>
            b.push(
              (await time(async () => {
                for (let i = 0; i < N; i++) await baseline();
              })) / N,
            );
          if (r % 2 === 0) await runOurs().then(runBase);
          else await runBase().then(runOurs);
        }
        rows.push({ figure, ours: median(o), baseline: median(b), goal: "≤ 1.3x", ok: median(o) / median(b) <= 1.3 });
      }
    }

    console.log(
      `Local workspace benchmarks (medians; ${ROUNDS} rounds, ours and baseline alternating; node ${process.version}, ${os.cpus().length} CPUs, load ${os.loadavg()[0]!.toFixed(1)})\n`,
    );
    console.log(["figure".padEnd(46), "ours ms".padStart(10), "base ms".padStart(10), "ratio".padStart(8), "goal".padStart(9), "  ok"].join(""));
    for (const r of rows)
      console.log(
        [
          r.figure.padEnd(46),
          r.ours.toFixed(3).padStart(10),
          r.baseline.toFixed(3).padStart(10),
          `${(r.ours / r.baseline).toFixed(2)}x`.padStart(8),
          r.goal.padStart(9),
          r.ok ? "  yes" : "  NO",
        ].join(""),
      );
    for (const r of rows) if (r.note) console.log(`\n${r.figure}: ${r.note}`);
    if (rows.some((r) => !r.ok)) process.exitCode = 1;
  } finally {
    await fs.rm(base, { recursive: true, force: true });
  }
}

/** aa2a25b's readFile: lstat every component (by name), then open the path by name and read it. */
function nameBasedRead(root: string, rel: string): Buffer {
  let current = root;
  for (const part of rel.split("/")) {
    current = `${current}/${part}`;
    fsSync.lstatSync(current, { throwIfNoEntry: false });
  }
  const fd = fsSync.openSync(current, fsc.O_RDONLY | fsc.O_NONBLOCK);
  try {
    fsSync.fstatSync(fd);
    return fsSync.readFileSync(fd);
  } finally {
    fsSync.closeSync(fd);
  }
}

/** aa2a25b's writeFile: lstat every component, then a temp file and a rename, both by name. */
function nameBasedWrite(root: string, rel: string, data: Uint8Array): void {
  let current = root;
  for (const part of rel.split("/")) {
    current = `${current}/${part}`;
    fsSync.lstatSync(current, { throwIfNoEntry: false });
  }
  const tmp = `${current}.tmp-${randomBytes(6).toString("hex")}`;
  fsSync.writeFileSync(tmp, data, { mode: 0o644, flag: "wx" });
  fsSync.renameSync(tmp, current);
}

/** Every path under `dir` with its inode, size and mtime: any copy or rewrite changes it. */
async function snapshot(dir: string): Promise<string> {
  const out: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const name of (await fs.readdir(d)).sort()) {
      const p = path.join(d, name);
      const st = await fs.lstat(p);
      out.push(`${path.relative(dir, p)} ${st.ino} ${st.size} ${st.mtimeMs}`);
      if (st.isDirectory()) await walk(p);
    }
  };
  await walk(dir);
  return out.join("\n");
}

await main();
