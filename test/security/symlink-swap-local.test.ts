/**
 * Attack: a host process swaps folders for symlinks to a canary folder outside the workspace
 * (renameat2 RENAME_EXCHANGE in a tight loop) while every file operation of a LocalWorkspace runs
 * over and over. Checking a path and then reopening it by name loses this race: Read returns the
 * canary's secret, Write and offload create files in it. Nothing may ever reach the canary.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalWorkspace } from "../../sdk/backends/local/index.js";
import { createBuiltinTools } from "../../sdk/workspace/tools/index.js";
import type { WorkspaceTool } from "../../sdk/workspace/tools/common.js";

const SWAP_SECONDS = 10;
const SECRET = `CANARY-SECRET-${randomBytes(8).toString("hex")}`;

/** Swaps each pair of names (relative to argv[1]) with renameat2(RENAME_EXCHANGE), forever. */
const SWAPPER = `
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
os.chdir(sys.argv[1])
pairs = [(a.encode(), b.encode()) for a, b in zip(sys.argv[2::2], sys.argv[3::2])]
print("ready", flush=True)
while True:
    for a, b in pairs:
        libc.renameat2(-100, a, -100, b, 2)
`;

/** Every file below `dir` (symlinks not followed) with its content: the canary must end as it began. */
async function snapshot(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (d: string): Promise<void> => {
    for (const e of await fs.readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) {
        out.set(`${path.relative(dir, p)}/`, "");
        await walk(p);
      } else out.set(path.relative(dir, p), e.isFile() ? await fs.readFile(p, "utf8") : `<${e.isSymbolicLink() ? "link" : "other"}>`);
    }
  };
  await walk(dir);
  return out;
}

describe("symlink swap race against a LocalWorkspace (host process)", () => {
  let base: string;
  let canary: string;
  let root: string;
  let ws: LocalWorkspace;
  let swapper: ChildProcess | undefined;

  beforeAll(async () => {
    base = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-swap-"));
    canary = path.join(base, "canary");
    root = path.join(base, "ws");
    // The canary mirrors every name the operations use, so a followed link finds something to read.
    const secretSkill = `---\nname: canary-skill\ndescription: ${SECRET}\n---\n${SECRET}\n`;
    for (const d of ["d", "skill", "part/s1", "sess", "data"]) await fs.mkdir(path.join(canary, d), { recursive: true });
    await fs.writeFile(path.join(canary, "d/file.txt"), `${SECRET}\n`);
    await fs.writeFile(path.join(canary, "d/edit.txt"), `alpha beta ${SECRET}\n`);
    await fs.writeFile(path.join(canary, "d/CANARY-NAME.txt"), `${SECRET}\n`);
    await fs.writeFile(path.join(canary, "skill/SKILL.md"), secretSkill);
    await fs.writeFile(path.join(canary, "part/s1/SKILL.md"), secretSkill);
    await fs.writeFile(path.join(canary, "sess/context.jsonl"), `${SECRET}\n`);

    ws = new LocalWorkspace({ workdir: root });
    await ws.initialize();
    const inside = (p: string) => path.join(root, p);
    const skill = (name: string) => `---\nname: ${name}\ndescription: inside skill ${name}\n---\nbody\n`;
    await fs.mkdir(inside("d"), { recursive: true });
    await fs.writeFile(inside("d/file.txt"), "inside\n");
    await fs.writeFile(inside("d/edit.txt"), "alpha\n");
    await fs.symlink(path.join(canary, "d"), inside("dl"));
    for (const [dir, link] of [
      ["skills/.seed/s1", "skills/.seed/sl"],
      ["skills/default/s2", "skills/default/sl"],
    ]) {
      await fs.mkdir(inside(dir!), { recursive: true });
      await fs.writeFile(inside(`${dir}/SKILL.md`), skill(path.basename(dir!)));
      await fs.symlink(path.join(canary, "skill"), inside(link!));
    }
    await fs.mkdir(inside("skills/pa/s1"), { recursive: true });
    await fs.writeFile(inside("skills/pa/s1/SKILL.md"), skill("pa-s1"));
    await fs.symlink(path.join(canary, "part"), inside("skills/pal"));
    await fs.mkdir(inside("sessions/s1"), { recursive: true });
    await fs.symlink(path.join(canary, "sess"), inside("sessions/sl"));
    await fs.mkdir(inside("data"), { recursive: true });
    await fs.symlink(path.join(canary, "data"), inside("datal"));
  });

  afterAll(async () => {
    if (swapper?.pid !== undefined && swapper.exitCode === null) swapper.kill("SIGKILL");
    await ws?.close();
    await fs.rm(base, { recursive: true, force: true });
  });

  it(
    `reads nothing from and writes nothing into the canary while folders are swapped for ${SWAP_SECONDS} s`,
    async () => {
      const before = await snapshot(canary);
      const hostSkills = path.join(base, "host-skills");
      const pairs = [
        "d",
        "dl",
        "skills/.seed/s1",
        "skills/.seed/sl",
        "skills/default/s2",
        "skills/default/sl",
        "skills/pa",
        "skills/pal",
        "sessions/s1",
        "sessions/sl",
        "data",
        "datal",
      ];
      swapper = spawn("python3", ["-c", SWAPPER, root, ...pairs], { stdio: ["ignore", "pipe", "inherit"] });
      await new Promise<void>((resolve, reject) => {
        swapper!.stdout!.once("data", () => resolve());
        swapper!.once("exit", (code) => reject(new Error(`swapper exited with ${code}`)));
      });

      const sandbox = ws.getBackend();
      const tools = new Map<string, WorkspaceTool>(ws.listTools().map((t) => [t.name, t]));
      const scanGrep = createBuiltinTools(sandbox, { track: (fn) => fn(), grepEngine: "scan" }).find((t) => t.name === "Grep")!;
      const seen: Array<{ op: string; text: string }> = [];
      const record = async (op: string, fn: () => Promise<unknown>) => {
        try {
          seen.push({ op, text: JSON.stringify((await fn()) ?? null) });
        } catch (e) {
          seen.push({ op, text: `error: ${(e as Error).message}` });
        }
      };
      const run = (name: string, input: unknown) => record(name, () => tools.get(name)!.execute(input));

      let rounds = 0;
      const deadline = Date.now() + SWAP_SECONDS * 1000;
      while (Date.now() < deadline) {
        const i = rounds++;
        const skillDir = path.join(hostSkills, `k${i}`);
        await fs.mkdir(skillDir, { recursive: true });
        await fs.writeFile(path.join(skillDir, "SKILL.md"), `---\nname: k${i}\ndescription: host skill ${i}\n---\nbody ${i}\n`);
        await Promise.all([
          run("Read", { file_path: "d/file.txt" }),
          run("Read", { file_path: "d/edit.txt" }),
          run("Write", { file_path: `d/w-${i}.txt`, content: "written" }),
          run("Write", { file_path: "d/file.txt", content: "inside\n" }),
          run("Edit", { file_path: "d/edit.txt", old_string: i % 2 ? "beta" : "alpha", new_string: i % 2 ? "alpha" : "beta" }),
          run("Glob", { pattern: "d/**/*.txt" }),
          run("Glob", { pattern: "*/*.txt" }),
          run("Grep", { pattern: "CANARY|inside", path: "d", output_mode: "content" }),
          record("Grep(scan)", () => scanGrep.execute({ pattern: "CANARY|inside", path: "d", output_mode: "content" })),
          record("listSkills", () => ws.listSkills()),
          record("listSkills", () => ws.listSkills({ agentId: `a${i}` })),
          record("listSkills", () => ws.listSkills({ agentId: "pa" })),
          record("addSkill", () => ws.addSkill(skillDir, { agentId: "pa" })),
          record("offloadToolResult", () => ws.offloadToolResult("s1", { id: `t${i}`, output: `result ${i}` } as never)),
          record("offloadContext", () => ws.offloadContext("s1", [{ name: "u", role: "user", content: `line ${i}` }] as never)),
          record("offloadData", () =>
            ws.offloadData({
              type: "data",
              id: `b${i}`,
              source: { type: "base64", data: Buffer.from(`blob ${i}`).toString("base64"), media_type: "image/png" },
              name: "p.png",
            } as never),
          ),
          record("readFile", () => sandbox.readFile("d/file.txt")),
          record("list", () => sandbox.list("d")),
          record("readDirTyped", () => sandbox.readDirTyped!("d")),
          record("stat", () => sandbox.stat("d/file.txt")),
          record("copyTree", () => sandbox.copyTree!("d", `copies/c${i}`)),
          record("createFile", () => sandbox.createFile!(`d/c-${i}.txt`, "created")),
          record("appendFile", () => sandbox.appendFile("d/app.txt", "appended\n")),
          record("mkdir", () => sandbox.mkdir(`d/m${i}`)),
          record("rename", () => sandbox.rename(`d/w-${i}.txt`, `d/r-${i}.txt`)),
          record("remove", () => sandbox.remove(`d/c-${i - 1}.txt`)),
          record("remove", () => sandbox.remove(`d/m${i - 1}`)),
          record("writeFile", () => sandbox.writeFile(`d/x-${i}.txt`, "x", { exclusive: true })),
        ]);
      }
      swapper.kill("SIGKILL");
      await new Promise((resolve) => swapper!.once("exit", resolve));

      // The race was real: many rounds ran, operations succeeded inside and were refused when swapped.
      expect(rounds).toBeGreaterThan(20);
      expect(seen.some(({ op, text }) => op === "Read" && text.includes("inside"))).toBe(true);
      expect(seen.some(({ text }) => /outside the workspace|symlink/.test(text))).toBe(true);
      const leaks: Record<string, number> = {};
      for (const { op, text } of seen) if (text.includes(SECRET) || text.includes("CANARY-NAME")) leaks[op] = (leaks[op] ?? 0) + 1;
      expect.soft(leaks).toEqual({});
      expect.soft(await snapshot(canary)).toEqual(before);
      // Nothing read from the canary was copied into the workspace either.
      const copied = [...(await snapshot(root)).entries()].filter(([, content]) => content.includes(SECRET)).map(([p]) => p);
      expect(copied).toEqual([]);
    },
    (SWAP_SECONDS + 60) * 1000,
  );

  it("closes every descriptor it opens, on success and on failure", async () => {
    const sandbox = ws.getBackend();
    const openFds = async () => (await fs.readdir("/proc/self/fd")).length;
    const ops = (i: number) => [
      sandbox.readFile("d/file.txt"),
      sandbox.readFile("dl/file.txt"),
      sandbox.readFile("d/missing"),
      sandbox.readFile("d"),
      sandbox.list("d"),
      sandbox.list("dl"),
      sandbox.list("d/file.txt"),
      sandbox.readDirTyped!("d"),
      sandbox.stat("d/file.txt"),
      sandbox.stat("dl/file.txt"),
      sandbox.stat("d/nope/x"),
      sandbox.writeFile(`fd/w${i}.txt`, "w"),
      sandbox.writeFile("dl/w.txt", "w"),
      sandbox.writeFile(`fd/w${i}.txt`, "w", { exclusive: true }),
      sandbox.createFile!(`fd/c${i}.txt`, "c"),
      sandbox.createFile!("dl/c.txt", "c"),
      sandbox.appendFile("fd/a.txt", "a"),
      sandbox.mkdir(`fd/m${i}/n`),
      sandbox.mkdir("dl/m"),
      sandbox.rename(`fd/c${i}.txt`, `fd/r${i}.txt`),
      sandbox.rename("fd/none", "fd/none2"),
      sandbox.copyTree!("fd", `fdcopy/${i}`),
      sandbox.copyTree!("dl", `fdcopy/l${i}`),
      sandbox.remove(`fd/m${i}`),
      sandbox.remove("dl/file.txt"),
    ];
    await Promise.allSettled(ops(-1));
    const before = await openFds();
    for (let i = 0; i < 50; i++) await Promise.allSettled(ops(i));
    expect(await openFds()).toBe(before);
  });
});
