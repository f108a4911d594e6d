import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { BwrapLauncher, BWRAP_HOST_ENV } from "../../../sdk/backends/bubblewrap/launch.js";

/** A minimal sandbox: the host's root read-only, its own pid namespace. */
const ARGS = ["--die-with-parent", "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--"];

function output(launcher: BwrapLauncher, argv: string[]): Promise<{ code: number | null; out: string }> {
  const child = launcher.spawn([...ARGS, ...argv]);
  const chunks: Buffer[] = [];
  child.stdout.on("data", (c: Buffer) => chunks.push(c));
  child.stdin.end();
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, out: Buffer.concat(chunks).toString() })));
}

const LIMITS = { maxProcesses: 40, memoryBytes: 256 * 1024 ** 2, cpus: 1.5 };
/** Root on a machine with cgroup controllers mounted: where the caps can be made at all. */
const canCap = process.getuid?.() === 0 && existsSync("/sys/fs/cgroup");

describe("BwrapLauncher", () => {
  it("starts bwrap with its own fixed environment, not the service's", async () => {
    process.env.AGENTWS_LAUNCH_PROBE = "leak";
    try {
      const { out } = await output(new BwrapLauncher(), ["cat", "/proc/1/environ"]);
      expect(
        Object.fromEntries(
          out
            .split("\0")
            .filter(Boolean)
            .map((kv) => kv.split("=", 2) as [string, string]),
        ),
      ).toEqual(BWRAP_HOST_ENV);
    } finally {
      delete process.env.AGENTWS_LAUNCH_PROBE;
    }
  });

  it.skipIf(!canCap)("puts every process in the handle's cgroups with the caps written; close() kills what is left (setsid too) and removes them", async () => {
    const launcher = new BwrapLauncher({ limits: LIMITS });
    expect(launcher.enforced).toEqual({ maxProcesses: true, memoryBytes: true, cpus: true });
    // A process that leaves its session keeps running after its bwrap's command returns...
    const escaped = launcher.spawn([
      ...ARGS.filter((a) => a !== "--die-with-parent"),
      "sh",
      "-c",
      "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo started; sleep 300",
    ]);
    escaped.stdin.end();
    await new Promise((r) => escaped.stdout.once("data", r));
    // Seen from the host (inside, a cgroup namespace shows "/").
    const membership = readFileSync(`/proc/${escaped.pid}/cgroup`, "utf8");
    const pids = /:pids:(\S+)/.exec(membership)?.[1];
    expect(pids, membership).toMatch(/\/agentws-[0-9a-f]{16}$/);
    const dir = `/sys/fs/cgroup/pids${pids}`;
    expect(readFileSync(`${dir}/pids.max`, "utf8").trim()).toBe("40");
    expect(readFileSync(`${dir}/cgroup.procs`, "utf8").trim()).not.toBe("");
    // ...until close(): nothing is left in the cgroup, and the cgroup is gone.
    await launcher.close();
    expect(existsSync(dir)).toBe(false);
  });
});
