/**
 * Attack (issue 9, item 1): a process inside a sandbox swaps folders for symlinks to a host folder
 * (renameat2 RENAME_EXCHANGE) in a tight loop while the host runs every file operation on the
 * workspace. Host-side code that checks a path and then reopens it by name follows the swapped link
 * and reads or writes host files. The canary host folder must end with zero reads (no tool output or
 * error ever carries its secret) and zero new or changed files.
 */
import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import type { Workspace } from "../../sdk/workspace/workspace.js";
import { linkTwins, swapFor, swapRaceSuite } from "../support/swap-race.js";

const SECONDS = 10;
const SECRET = `CANARY-${randomBytes(8).toString("hex")}`;
/** Swapped pairs: the real folder and its symlink twin leading to the canary. */
const PAIRS = ["d", "skills/agent-1", "sessions/s1"];

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
  const sb = ws.getBackend();
  await linkTwins(sb, canary, PAIRS);
  await sb.writeFile("d/secret.txt", "benign\n");
  await sb.writeFile("d/only-in-canary.txt", "benign\n");
  await sb.mkdir("d/evil");
  const tools = Object.fromEntries(ws.listTools().map((t) => [t.name, t]));
  const swapper = swapFor(sb, SECONDS, PAIRS);
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
  const swaps = await swapper;
  // The outputs of each copy made during the race, too.
  for (const c of await sb.list("copies").catch(() => [])) outputs.push(JSON.stringify(await sb.list(`copies/${c.name}`).catch(() => [])));
  // The secret, or a name only the canary holds, in any output or error is a host read.
  return { swaps, calls, leaks: outputs.filter((o) => o.includes(SECRET) || o.includes("tool_result-x")) };
}

await swapRaceSuite("symlink swap from inside the sandbox (issue 9 item 1)", { seconds: SECONDS, makeCanary, race, minCalls: 100 });
