import { readFileSync, existsSync, mkdirSync, rmdirSync, writeFileSync } from "node:fs";
import path from "node:path";

/**
 * Per-sandbox cgroups, made without systemd: a child of the service's own cgroup for each controller
 * (cgroup v1 hierarchies, or a cgroup v2 subtree delegated to the service), so the service's own caps
 * still bound what is inside. Creating them needs write access there (root, or a delegated subtree).
 */

/** Caps for every process of one sandbox handle together. */
export interface SandboxLimits {
  /** Tasks (processes and threads) alive at once. */
  maxProcesses: number;
  /** Resident memory plus swap, page cache and tmpfs of the sandbox's processes, in bytes. */
  memoryBytes: number;
  /** CPU time in cores per scheduling period. */
  cpus: number;
}

export type Controller = "pids" | "memory" | "cpu";
const CONTROLLERS: readonly Controller[] = ["pids", "memory", "cpu"];
const CPU_PERIOD_US = 100_000;

/** The service's own cgroup folder for a controller (v1 hierarchy preferred), or null. Read once. */
function ownCgroupDir(controller: Controller): { dir: string; v2: boolean } | null {
  if (!cgroupDirs) cgroupDirs = discoverCgroups();
  return cgroupDirs.get(controller) ?? null;
}
let cgroupDirs: Map<Controller, { dir: string; v2: boolean }> | undefined;

function discoverCgroups(): Map<Controller, { dir: string; v2: boolean }> {
  const out = new Map<Controller, { dir: string; v2: boolean }>();
  let mountinfo: string;
  let membership: string;
  try {
    mountinfo = readFileSync("/proc/self/mountinfo", "utf8");
    membership = readFileSync("/proc/self/cgroup", "utf8");
  } catch {
    return out;
  }
  const paths = new Map<string, string>();
  for (const line of membership.split("\n")) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line);
    if (!m) continue;
    if (m[1] === "0" && m[2] === "") paths.set("", m[3]!);
    for (const c of m[2]!.split(",")) if (c) paths.set(c, m[3]!);
  }
  let v2Mount: { point: string; root: string } | undefined;
  for (const line of mountinfo.split("\n")) {
    const [pre, post] = line.split(" - ");
    if (!pre || !post) continue;
    const fields = pre.split(" ");
    const [fstype, , superOpts = ""] = post.split(" ");
    const root = unescapeMount(fields[3] ?? "/");
    const point = unescapeMount(fields[4] ?? "");
    if (fstype === "cgroup2") v2Mount ??= { point, root };
    if (fstype !== "cgroup") continue;
    for (const c of CONTROLLERS) {
      const own = paths.get(c);
      if (!out.has(c) && own !== undefined && superOpts.split(",").includes(c)) out.set(c, { dir: path.join(point, path.relative(root, own)), v2: false });
    }
  }
  const ownV2 = paths.get("");
  if (v2Mount && ownV2 !== undefined) {
    const dir = path.join(v2Mount.point, path.relative(v2Mount.root, ownV2));
    let enabled: string[] = [];
    try {
      enabled = readFileSync(path.join(dir, "cgroup.subtree_control"), "utf8").trim().split(/\s+/);
    } catch {
      /* not delegated to us */
    }
    for (const c of CONTROLLERS) if (!out.has(c) && enabled.includes(c)) out.set(c, { dir, v2: true });
  }
  return out;
}

function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)));
}

/** Makes the child cgroup and writes its cap; null (and the folder removed) when the machine refuses. */
export function makeCgroup(
  controller: Controller,
  name: string,
  limits: SandboxLimits,
): { dir: string; error?: undefined } | { dir?: undefined; error: string } {
  const own = ownCgroupDir(controller);
  if (!own) return { error: `no ${controller} cgroup hierarchy this process may use` };
  const dir = path.join(own.dir, name);
  try {
    mkdirSync(dir);
  } catch (e) {
    return { error: `cannot create ${dir}: ${(e as NodeJS.ErrnoException).code ?? String(e)}` };
  }
  try {
    const quota = String(Math.max(1000, Math.round(limits.cpus * CPU_PERIOD_US)));
    if (controller === "pids") writeFileSync(path.join(dir, "pids.max"), String(limits.maxProcesses));
    else if (controller === "cpu") {
      if (own.v2) writeFileSync(path.join(dir, "cpu.max"), `${quota} ${CPU_PERIOD_US}`);
      else {
        writeFileSync(path.join(dir, "cpu.cfs_period_us"), String(CPU_PERIOD_US));
        writeFileSync(path.join(dir, "cpu.cfs_quota_us"), quota);
      }
    } else if (own.v2) {
      writeFileSync(path.join(dir, "memory.max"), String(limits.memoryBytes));
      // Swap must not stretch the cap.
      if (existsSync(path.join(dir, "memory.swap.max"))) writeFileSync(path.join(dir, "memory.swap.max"), "0");
    } else {
      writeFileSync(path.join(dir, "memory.limit_in_bytes"), String(limits.memoryBytes));
      // Memory plus swap, equal to the memory cap (present only with swap accounting on).
      if (existsSync(path.join(dir, "memory.memsw.limit_in_bytes"))) writeFileSync(path.join(dir, "memory.memsw.limit_in_bytes"), String(limits.memoryBytes));
    }
  } catch (e) {
    try {
      rmdirSync(dir);
    } catch {
      /* left empty; harmless */
    }
    return { error: `cannot set the ${controller} cap in ${dir}: ${(e as NodeJS.ErrnoException).code ?? String(e)}` };
  }
  return { dir };
}

/** SIGKILLs every member, then removes the folder; bounded to about 2 s. Returns those left behind. */
export async function removeCgroups(dirs: string[]): Promise<string[]> {
  const left: string[] = [];
  for (const dir of dirs) {
    let removed = false;
    for (let round = 0; round < 40 && !removed; round++) {
      let members: number[] = [];
      try {
        members = readFileSync(path.join(dir, "cgroup.procs"), "utf8").split("\n").filter(Boolean).map(Number);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") {
          removed = true;
          break;
        }
      }
      for (const pid of members) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          /* exited meanwhile */
        }
      }
      removed = removeQuietly(dir);
      if (!removed) await new Promise((r) => setTimeout(r, 50));
    }
    if (!removed) left.push(dir);
  }
  return left;
}

export function removeQuietly(dir: string): boolean {
  try {
    rmdirSync(dir);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ENOENT";
  }
}
