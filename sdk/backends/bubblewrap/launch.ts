import { spawn as spawnChild, type ChildProcessWithoutNullStreams } from "node:child_process";
import { randomBytes } from "node:crypto";
import { accessSync, constants, existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Logger } from "../../logger.js";

/**
 * How a bwrap process is started: with an environment of its own (never the service's: `--clearenv`
 * clears only the sandboxed child, while bwrap itself stays pid 1's parent and its environment is
 * readable from inside through /proc), and inside a per-sandbox cgroup holding the process and
 * memory caps when the machine lets us make one.
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

/** What bwrap itself runs with: a fixed PATH, nothing from the service. */
export const BWRAP_HOST_ENV: Readonly<Record<string, string>> = Object.freeze({ PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", LANG: "C.UTF-8" });

/** The bwrap binary as an absolute path, looked up on the service's PATH once (the child's PATH is fixed). */
export function resolveBwrap(bwrap: string): string {
  if (bwrap.includes("/")) return bwrap;
  const hit = resolved.get(bwrap);
  if (hit) return hit;
  for (const dir of (process.env.PATH ?? "").split(":")) {
    if (!dir.startsWith("/")) continue;
    const candidate = path.join(dir, bwrap);
    try {
      accessSync(candidate, constants.X_OK);
    } catch {
      continue;
    }
    resolved.set(bwrap, candidate);
    return candidate;
  }
  // Not found: spawning the bare name fails with ENOENT, which callers report as "bwrap missing".
  return bwrap;
}
const resolved = new Map<string, string>();

type Controller = "pids" | "memory" | "cpu";
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

/** Warned once per process and reason: an operator sees it, a busy service does not repeat it. */
const warned = new Set<string>();
function warnOnce(logger: Logger | undefined, key: string, msg: string, fields: Record<string, unknown>): void {
  if (!logger || warned.has(key)) return;
  warned.add(key);
  logger.warn(msg, fields);
}

/** Makes the child cgroup and writes its cap; null (and the folder removed) when the machine refuses. */
function makeCgroup(controller: Controller, name: string, limits: SandboxLimits): { dir: string; error?: undefined } | { dir?: undefined; error: string } {
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

/**
 * Joins the cgroups given as arguments, then becomes bwrap: the process is inside the caps before
 * bwrap or anything it starts can fork. Exits 125 when it cannot join (the command fails; no
 * uncapped sandbox starts). `sh -c SCRIPT argv0 N dir1..dirN bwrap args...`.
 */
const JOIN_SCRIPT = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1/cgroup.procs" || exit 125; shift; n=$((n-1)); done; exec "$@"';
const HOST_SH = "/bin/sh";

export interface BwrapLauncherOptions {
  bwrap?: string | undefined;
  /** Caps for this handle's processes; none: no cgroup (the caller's own limits apply). */
  limits?: SandboxLimits | undefined;
  logger?: Logger | undefined;
}

/**
 * Starts the bwrap processes of one sandbox handle. With limits, every process goes into one cgroup
 * per controller made for this handle (`agentws-<random>` under the service's own cgroup, so the
 * service's own caps still bound it); close() kills what is left in it and removes it.
 * When the machine cannot make a cgroup (no permission, no controller), that cap is not enforced
 * and one warning per process says so.
 */
export class BwrapLauncher {
  readonly #bwrap: string;
  readonly #limits: SandboxLimits | undefined;
  readonly #logger: Logger | undefined;
  /** Per controller, the cgroup this handle's processes join; undefined until first use. */
  #dirs: Partial<Record<Controller, string>> | undefined;
  #closed = false;
  #live = 0;
  #sweeping: Promise<void> | undefined;

  constructor(options: BwrapLauncherOptions = {}) {
    this.#bwrap = resolveBwrap(options.bwrap ?? "bwrap");
    this.#limits = options.limits;
    this.#logger = options.logger;
  }

  /** Which caps the kernel enforces for this handle (made on first use). */
  get enforced(): Record<keyof SandboxLimits, boolean> {
    const dirs = this.#cgroups();
    return { maxProcesses: dirs.pids !== undefined, memoryBytes: dirs.memory !== undefined, cpus: dirs.cpu !== undefined };
  }

  /** bwrap with `args`, pipes on all three streams, in its own process group. */
  spawn(args: string[]): ChildProcessWithoutNullStreams {
    const dirs = Object.values(this.#cgroups());
    const [cmd, argv] = dirs.length ? [HOST_SH, ["-c", JOIN_SCRIPT, "agentws-cgroup-join", String(dirs.length), ...dirs, this.#bwrap, ...args]] : [this.#bwrap, args];
    const child = spawnChild(cmd, argv, { stdio: ["pipe", "pipe", "pipe"], detached: true, env: { ...BWRAP_HOST_ENV } });
    if (dirs.length) {
      this.#live++;
      let counted = true;
      const done = () => {
        if (!counted) return;
        counted = false;
        this.#live--;
        if (this.#closed && this.#live === 0) void this.#sweep();
      };
      child.once("exit", done);
      child.once("error", done);
    }
    return child;
  }

  /**
   * Kills whatever is still in this handle's cgroups (a process that left its group with setsid
   * included) and removes them. A later spawn makes fresh ones, removed when its process ends.
   */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#sweep();
  }

  #cgroups(): Partial<Record<Controller, string>> {
    if (!this.#limits) return {};
    if (this.#dirs) return this.#dirs;
    const name = `agentws-${randomBytes(8).toString("hex")}`;
    const dirs: Partial<Record<Controller, string>> = {};
    const wanted: [Controller, keyof SandboxLimits][] = [
      ["pids", "maxProcesses"],
      ["memory", "memoryBytes"],
      ["cpu", "cpus"],
    ];
    for (const [controller, option] of wanted) {
      const made = makeCgroup(controller, name, this.#limits);
      if (made.dir) dirs[controller] = made.dir;
      else
        warnOnce(this.#logger, controller, `bubblewrap: ${option} is not enforced on this machine (${made.error}); run the service as root or in a cgroup v2 subtree delegated to it with the ${controller} controller`, {
          option,
        });
    }
    if (!existsSync(HOST_SH)) {
      warnOnce(this.#logger, "sh", `bubblewrap: maxProcesses, memoryBytes and cpus are not enforced: ${HOST_SH} is missing`, {});
      for (const d of Object.values(dirs)) removeQuietly(d);
      this.#dirs = {};
      return this.#dirs;
    }
    this.#dirs = dirs;
    return dirs;
  }

  #sweep(): Promise<void> {
    this.#sweeping ??= (async () => {
      const dirs = Object.values(this.#dirs ?? {});
      this.#dirs = undefined;
      const left = await removeCgroups(dirs);
      if (left.length) this.#logger?.warn("bubblewrap: a sandbox cgroup could not be removed", { cgroups: left });
    })().finally(() => (this.#sweeping = undefined));
    return this.#sweeping;
  }
}

/** SIGKILLs every member, then removes the folder; bounded to about 2 s. Returns those left behind. */
async function removeCgroups(dirs: string[]): Promise<string[]> {
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

function removeQuietly(dir: string): boolean {
  try {
    rmdirSync(dir);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ENOENT";
  }
}
