/**
 * Attack (issue 25, item 7): the agent leaves a FIFO nobody writes and points Grep at it. ripgrep opens
 * a path it is given without checking what it is, so on main 5e43587 it sat in open() for Grep's whole
 * 30 s timeout. Now the sandbox's own non-blocking open tells a special file first, and a folder walk
 * only ever reads what it saw as a regular file: Grep answers at once with every engine.
 */
import { afterAll, describe, expect, it } from "vitest";
import type { ToolResult } from "../../sdk/workspace/tools/common.js";
import { grepTool } from "../../sdk/workspace/tools/grep.js";
import { attackBackends, bash, type AttackBackend } from "../support/hostile-backends.js";

const env = await attackBackends("fifo");
afterAll(() => env.closeAll());

/** Settles `p`, or "hung" after `ms` (well under Grep's 30 s timeout): a guard against a hang, not a timing assertion. */
async function settleOrHang(p: Promise<ToolResult>, ms = 15_000): Promise<ToolResult | "hung"> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<"hung">((resolve) => (timer = setTimeout(() => resolve("hung"), ms)));
  try {
    return await Promise.race([p, guard]);
  } finally {
    clearTimeout(timer);
  }
}

describe.each(env.backends.map((b) => [b.name, b] as [string, AttackBackend]))("Grep and a FIFO in a %s workspace", (_name, backend) => {
  for (const engine of ["auto", "rg", "scan"] as const)
    it(`engine ${engine}: a FIFO as the target is refused at once; a folder holding one is searched`, { timeout: 60_000 }, async () => {
      const ws = await backend.open();
      await bash(ws, "mkfifo pipe && mkdir -p d && mkfifo d/p2 && echo 'hello fifo' > d/a.txt && ln -s ../pipe d/link");
      const grep =
        engine === "auto"
          ? ws.listTools().find((t) => t.name === "Grep")!
          : grepTool({ sandbox: ws.getBackend(), track: (fn: () => Promise<unknown>) => fn() } as never, engine);

      const direct = await settleOrHang(grep.execute({ pattern: "hello", path: "pipe" }));
      expect(direct).not.toBe("hung");
      const r = direct as ToolResult;
      expect(r.output).not.toMatch(/timed out/i);
      expect(r.ok).toBe(false);
      expect(r.output).toMatch(/not a regular file/i);

      // Through a symlink to it, too.
      const linked = await settleOrHang(grep.execute({ pattern: "hello", path: "d/link" }));
      expect(linked).not.toBe("hung");
      expect((linked as ToolResult).output).not.toMatch(/timed out/i);

      const folder = await settleOrHang(grep.execute({ pattern: "hello", path: "d", output_mode: "content" }));
      expect(folder).not.toBe("hung");
      expect((folder as ToolResult).ok).toBe(true);
      expect((folder as ToolResult).output).toContain("hello fifo");
    });
});
