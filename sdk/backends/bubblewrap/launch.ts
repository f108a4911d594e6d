import { spawn as spawnChild, spawnSync, type ChildProcessWithoutNullStreams } from "node:child_process";
import { randomBytes } from "node:crypto";
import { accessSync, constants, existsSync } from "node:fs";
import path from "node:path";
import type { Logger } from "../../logger.js";
import { makeCgroup, removeCgroups, removeQuietly, type Controller, type SandboxLimits } from "./cgroups.js";

export type { SandboxLimits } from "./cgroups.js";

/**
 * How a bwrap process is started: with an environment of its own (never the service's: `--clearenv`
 * clears only the sandboxed child, while bwrap itself stays pid 1's parent and its environment is
 * readable from inside through /proc), and inside a per-sandbox cgroup holding the process and
 * memory caps when the machine lets us make one (cgroups.ts).
 */

/** What bwrap itself runs with: a fixed PATH, nothing from the service. */
export const BWRAP_HOST_ENV: Readonly<Record<string, string>> = Object.freeze({
  PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  LANG: "C.UTF-8",
});

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

/** Whether this bwrap knows an option (its --help lists it); asked once per binary and option. */
export function bwrapSupports(bwrap: string, option: string): boolean {
  const key = `${bwrap}\0${option}`;
  let hit = supported.get(key);
  if (hit === undefined) {
    const r = spawnSync(bwrap, ["--help"], { encoding: "utf8", env: { ...BWRAP_HOST_ENV }, timeout: 10_000 });
    hit = new RegExp(`^\\s*${option}\\b`, "m").test(`${r.stdout ?? ""}${r.stderr ?? ""}`);
    supported.set(key, hit);
  }
  return hit;
}
const supported = new Map<string, boolean>();

/** Warned once per process and reason: an operator sees it, a busy service does not repeat it. */
const warned = new Set<string>();
function warnOnce(logger: Logger | undefined, key: string, msg: string, fields: Record<string, unknown>): void {
  if (!logger || warned.has(key)) return;
  warned.add(key);
  logger.warn(msg, fields);
}

/**
 * Joins the cgroups given as arguments, then becomes bwrap: the process is inside the caps before
 * bwrap or anything it starts can fork. Exits 125 when it cannot join (the command fails; no
 * uncapped sandbox starts). `sh -c SCRIPT argv0 N dir1..dirN bwrap args...`.
 */
const JOIN_SCRIPT = 'unset PWD OLDPWD; n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1/cgroup.procs" || exit 125; shift; n=$((n-1)); done; exec "$@"';
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
    const [cmd, argv] = dirs.length
      ? [HOST_SH, ["-c", JOIN_SCRIPT, "agentws-cgroup-join", String(dirs.length), ...dirs, this.#bwrap, ...args]]
      : [this.#bwrap, args];
    // cwd "/": the shell that joins the cgroups would put the service's working directory in bwrap's PWD.
    const child = spawnChild(cmd, argv, { stdio: ["pipe", "pipe", "pipe"], detached: true, cwd: "/", env: { ...BWRAP_HOST_ENV } });
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
        warnOnce(
          this.#logger,
          controller,
          `bubblewrap: ${option} is not enforced on this machine (${made.error}); run the service as root or in a cgroup v2 subtree delegated to it with the ${controller} controller`,
          {
            option,
          },
        );
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
