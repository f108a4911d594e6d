/**
 * Attack (issue 9, item 1): a process inside a sandbox swaps folders for symlinks to a host folder
 * (renameat2 RENAME_EXCHANGE) in a tight loop while the host runs every file operation on the
 * workspace. Host-side code that checks a path and then reopens it by name follows the swapped link
 * and reads or writes host files. The canary host folder must end with zero reads (no tool output or
 * error ever carries its secret) and zero new or changed files.
 */
import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapWorkspace } from "../../sdk/backends/bubblewrap/workspace.js";
import { DockerDriver } from "../../sdk/backends/docker/driver.js";
import { DockerWorkspace } from "../../sdk/backends/docker/workspace.js";
import type { Sandbox } from "../../sdk/sandbox.js";
import type { Workspace } from "../../sdk/workspace/workspace.js";
import { BASE_IMAGE, dockerEngine } from "../support/docker-engine.js";

const SECONDS = 10;
const SECRET = `CANARY-${randomBytes(8).toString("hex")}`;
/** Swapped pairs: the real folder and its symlink twin leading to the canary. */
const PAIRS = ["d", "skills/agent-1", "sessions/s1"];

const SWAPPER = String.raw`
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
exch = getattr(libc, "renameat2", None)
def swap(a, b):
    if exch is not None:
        return exch(-100, a, -100, b, 2)
    return libc.syscall(316, -100, a, -100, b, 2)
os.chdir(sys.argv[2])
pairs = [(p.encode(), (p + ".l").encode()) for p in sys.argv[3:]]
end = time.time() + float(sys.argv[1])
n = 0
while time.time() < end:
    for a, b in pairs:
        if swap(a, b) == 0:
            n += 1
# Leave every real folder in place.
for a, b in pairs:
    if os.path.islink(a):
        swap(a, b)
print(n)
`;

async function snapshot(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fs.readdir(dir, { withFileTypes: true, recursive: true })) {
    const p = path.join(e.parentPath, e.name);
    out.push(`${path.relative(dir, p)}:${e.isFile() ? await fs.readFile(p, "utf8") : e.isDirectory() ? "dir" : "other"}`);
  }
  return out.sort();
}

async function makeCanary(root: string): Promise<string> {
  const canary = path.join(root, "canary");
  await fs.mkdir(path.join(canary, "evil"), { recursive: true });
  await fs.writeFile(path.join(canary, "secret.txt"), `${SECRET}\n`);
  await fs.writeFile(path.join(canary, "only-in-canary.txt"), `${SECRET}\n`);
  await fs.writeFile(path.join(canary, "evil", "SKILL.md"), `---\nname: evil\ndescription: ${SECRET}\n---\nbody ${SECRET}\n`);
  await fs.writeFile(path.join(canary, "tool_result-x.txt"), SECRET);
  return canary;
}

/** Runs the swap race in the sandbox for SECONDS while every file operation runs from the host. */
async function race(ws: Workspace, canary: string, hostTmp: string): Promise<{ swaps: number; calls: number; leaks: string[] }> {
  const sb: Sandbox = ws.getBackend();
  for (const p of PAIRS) {
    await sb.mkdir(p);
    expect((await sb.exec(["ln", "-sfn", canary, `${p}.l`])).exitCode).toBe(0);
  }
  await sb.writeFile("d/secret.txt", "benign\n");
  await sb.writeFile("d/only-in-canary.txt", "benign\n");
  await sb.mkdir("d/evil");
  const tools = Object.fromEntries(ws.listTools().map((t) => [t.name, t]));
  const swapper = sb.exec(["python3", "-c", SWAPPER, String(SECONDS), sb.workdir, ...PAIRS], { timeoutMs: (SECONDS + 30) * 1000 });
  const outputs: string[] = [];
  const record = async (p: Promise<unknown>) => {
    try {
      const v = await p;
      outputs.push(typeof v === "string" ? v : Buffer.isBuffer(v) ? v.toString("latin1") : JSON.stringify(v ?? null));
    } catch (e) {
      outputs.push(String((e as Error)?.message ?? e));
    }
  };
  const end = Date.now() + SECONDS * 1000;
  let calls = 0;
  for (let i = 0; Date.now() < end; i++) {
    const skillSrc = path.join(hostTmp, `skill-${i}`);
    await fs.mkdir(skillSrc, { recursive: true });
    await fs.writeFile(path.join(skillSrc, "SKILL.md"), `---\nname: ok-${i}\ndescription: fine\n---\nbody\n`);
    await Promise.all([
      record(tools.Read!.execute({ file_path: "d/secret.txt" })),
      record(tools.Write!.execute({ file_path: `d/new-${i}.txt`, content: "x" })),
      record(tools.Edit!.execute({ file_path: "d/secret.txt", old_string: "benign", new_string: "benign" })),
      record(tools.Glob!.execute({ pattern: "*", path: "d" })),
      record(tools.Grep!.execute({ pattern: "CANARY", path: "d" })),
      record(ws.listSkills({ agentId: "agent-1" })),
      record(ws.addSkill(skillSrc, { agentId: "agent-1" })),
      record(ws.offloadToolResult("s1", { id: `t${i}`, output: "result" })),
      record(ws.offloadContext("s1", [{ role: "user", content: "hello" }])),
      record(sb.readFile("d/only-in-canary.txt")),
      record(sb.readDirTyped ? sb.readDirTyped("d") : sb.list("d")),
      record(sb.copyTree ? sb.copyTree("d", `copies/c${i}`) : Promise.resolve()),
      record(sb.createFile ? sb.createFile(`d/created-${i}.txt`, "x") : Promise.resolve()),
      record(sb.list("d/evil")),
      record(sb.appendFile("d/log.txt", "line\n")),
    ]);
    calls += 15;
  }
  const r = await swapper;
  const swaps = Number(r.stdout.toString().trim());
  // The outputs of each copy made during the race, too.
  for (const c of await sb.list("copies").catch(() => [])) outputs.push(JSON.stringify(await sb.list(`copies/${c.name}`).catch(() => [])));
  // The secret, or a name only the canary holds, in any output or error is a host read.
  return { swaps, calls, leaks: outputs.filter((o) => o.includes(SECRET) || o.includes("tool_result-x")) };
}

const engine = await dockerEngine();

describe("symlink swap from inside the sandbox (issue 9 item 1)", () => {
  let root: string;
  beforeAll(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-swap-"));
  });
  afterAll(async () => {
    await fs.rm(root, { recursive: true, force: true });
  });

  it("Bubblewrap: no host read, no host write", { timeout: (SECONDS + 60) * 1000 }, async () => {
    const canary = await makeCanary(path.join(root, "bw"));
    const before = await snapshot(canary);
    const ws = new BubblewrapWorkspace({ workspaceId: `swap-${randomBytes(4).toString("hex")}`, basedir: path.join(root, "bw", "base") });
    await ws.initialize();
    try {
      const { swaps, calls, leaks } = await race(ws, canary, path.join(root, "bw", "src"));
      expect(swaps).toBeGreaterThan(1000);
      expect(calls).toBeGreaterThan(100);
      expect(leaks).toEqual([]);
      expect(await snapshot(canary)).toEqual(before);
    } finally {
      await ws.close();
    }
  });

  it.skipIf(!engine)("Docker with its host folder: no host read, no host write", { timeout: (SECONDS + 120) * 1000 }, async () => {
    const canary = await makeCanary(path.join(root, "dk"));
    const before = await snapshot(canary);
    const basedir = path.join(root, "dk", "base");
    const workspaceId = `swap-${randomBytes(4).toString("hex")}`;
    const ws = new DockerWorkspace({ workspaceId, basedir, baseImage: BASE_IMAGE });
    await ws.initialize();
    try {
      expect((ws.getBackend() as unknown as { fileAccess: string }).fileAccess).toBe("host");
      const { swaps, calls, leaks } = await race(ws, canary, path.join(root, "dk", "src"));
      expect(swaps).toBeGreaterThan(1000);
      expect(calls).toBeGreaterThan(100);
      expect(leaks).toEqual([]);
      expect(await snapshot(canary)).toEqual(before);
    } finally {
      await ws.close();
      await new DockerDriver({ basedir, baseImage: BASE_IMAGE }).destroy(workspaceId).catch(() => undefined);
    }
  });
});
