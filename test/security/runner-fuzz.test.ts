/**
 * Issue 25's hostile-runner fuzz test. A child service process (runner-fuzz.child.ts) works for 60 s
 * with two workspaces whose runners are a fuzzing program inside real Bubblewrap sandboxes (every
 * request answered by a random attack: headers and payloads claiming 600 MiB to 4 GiB with up to
 * 256 MiB sent, sizes of -1 / NaN / over the cap, unknown and duplicate ids, replies for other calls
 * and of the wrong kind, endless output, a slow drip, silence, an abrupt exit mid-frame, random bytes,
 * some honest answers), while it does normal work (write, read back, exec, list) on three other
 * workspaces: two Bubblewrap ones with the real runner and a host folder.
 *
 * Must hold: the process survives (exit code 0), every call on a hostile runner ends in a typed
 * error or a result within its caps, every call on the other workspaces succeeds, and the process's
 * resident memory stays under MAX_RSS. The bound: this child idles at about 80 MiB and peaks near
 * 130 MiB here; what the host may hold for a hostile runner is capped per call (a listing's 64 MiB, a
 * read's maxBytes, an exec's output), and two hostile calls are in flight at a time, so 400 MiB leaves
 * room for both caps and the collector's slack, while any one claim taken at its word (600 MiB to
 * 4 GiB) breaks it. Failed on main 5e43587: the child died within seconds (an uncaught RangeError
 * from a size frame, ERR_STRING_TOO_LONG from a header).
 */
import { spawn } from "node:child_process";
import { promises as fs, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const CHILD = fileURLToPath(new URL("./runner-fuzz.child.ts", import.meta.url));
const SECONDS = 60;
const MAX_RSS = 400 * (1 << 20);

/** The child's resident memory in bytes (0 once it is gone). */
function rssOf(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

interface Done {
  hostileCalls: number;
  hostileOk: number;
  typed: number;
  untyped: string[];
  runners: number;
  normalOps: number;
  normalFailures: string[];
}

describe("hostile-runner fuzz against a service process doing normal work", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "agentws-fuzz-")));
  });
  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it(`survives ${SECONDS} s of forged frames with bounded memory, and every other workspace's call succeeds`, { timeout: (SECONDS + 90) * 1000 }, async () => {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, dir, String(SECONDS)], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr.on("data", (c: Buffer) => (err = (err + c.toString()).slice(-4000)));
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, rssOf(child.pid!))), 200);
    // A child whose calls hang (no host-side deadlines) is ended, and fails below, rather than outliving the test.
    const limit = setTimeout(() => child.kill("SIGKILL"), (SECONDS + 60) * 1000);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once("exit", (c, s) => resolve([c, s])));
    clearTimeout(limit);
    clearInterval(sampler);
    const lines = out.split("\n").filter((l) => l.startsWith("{"));
    const done = lines.map((l) => JSON.parse(l) as { done?: Done }).find((l) => l.done)?.done;
    const ready = (JSON.parse(lines[0] ?? "{}") as { ready?: { rss: number } }).ready?.rss ?? 0;
    console.log(
      `[runner fuzz] ${SECONDS} s: exit ${code}${signal ? ` (${signal})` : ""}; RSS at start ${(ready / 2 ** 20).toFixed(0)} MiB, peak ${(peak / 2 ** 20).toFixed(0)} MiB (bound ${MAX_RSS / 2 ** 20} MiB); ` +
        `${done?.hostileCalls} hostile calls (${done?.typed} typed errors, ${done?.hostileOk} within caps) over ${done?.runners} runners; ${done?.normalOps} normal calls`,
    );
    expect({ code, signal }, err).toEqual({ code: 0, signal: null });
    expect(done, out.slice(-2000)).toBeDefined();
    expect(done!.untyped).toEqual([]);
    expect(done!.normalFailures).toEqual([]);
    // The fuzz did run: many attacks, many runners ended and replaced, and the other workspaces kept working.
    expect(done!.hostileCalls).toBeGreaterThan(100);
    expect(done!.runners).toBeGreaterThan(50);
    expect(done!.normalOps).toBeGreaterThan(400);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThan(MAX_RSS);
  });
});
