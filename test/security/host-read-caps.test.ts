/**
 * Attack (issue 25, item 5): an agent truncates files the host reads to 5 GiB (sparse: no disk used)
 * with one Bash call. Every host-side read of such a file is capped: the skill `.index` is treated as
 * corrupt and rebuilt from the skill folders (no skill is lost), an over-cap `.mcp` or SKILL.md is
 * reported and skipped, a partition copy never holds a whole file in memory, and the service's MCP
 * endpoint keeps answering. On main 5e43587 the `.index` read allocated the whole file: RangeError.
 */
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_SKILL_INDEX_BYTES } from "../../sdk/workspace/skills.js";
import { startTestService, type Running } from "../service/service-fixture.js";
import { attackBackends, bash, type AttackBackend } from "../support/hostile-backends.js";

const FIVE_GIB = "5G";
const env = await attackBackends("caps");
let skillDir: string;

beforeAll(async () => {
  skillDir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-caps-skill-"));
  await fs.writeFile(path.join(skillDir, "SKILL.md"), "---\nname: keeper\ndescription: Must survive a bad index.\n---\nKeep me.\n");
});
afterAll(async () => {
  await env.closeAll();
  await fs.rm(skillDir, { recursive: true, force: true });
});

describe.each(env.backends.map((b) => [b.name, b] as [string, AttackBackend]))("sparse 5 GiB files planted by the agent (%s)", (_name, backend) => {
  it("a 5 GiB skills/<partition>/.index: listSkills answers with every skill and the index is rewritten small", async () => {
    const ws = await backend.open();
    expect(await ws.addSkill(skillDir)).toBeDefined();
    await bash(ws, `truncate -s ${FIVE_GIB} skills/default/.index`);
    expect((await ws.getBackend().stat("skills/default/.index"))!.size).toBe(5 * 1024 ** 3);
    const skills = await ws.listSkills();
    expect(skills.map((s) => s.name)).toEqual(["keeper"]);
    // Rebuilt from the folders and written back: the next call reads a small, valid index.
    expect((await ws.getBackend().stat("skills/default/.index"))!.size).toBeLessThan(MAX_SKILL_INDEX_BYTES);
    expect((await ws.listSkills()).map((s) => s.name)).toEqual(["keeper"]);
    // An agent partition too (a different file, the same read).
    await ws.listSkills({ agentId: "a1" });
    await bash(ws, `truncate -s ${FIVE_GIB} skills/a1/.index`);
    expect((await ws.listSkills({ agentId: "a1" })).map((s) => s.name)).toEqual([]);
  });

  it("a 5 GiB SKILL.md and a 5 GiB .mcp: reported and skipped, the workspace keeps working", async () => {
    const ws = await backend.open();
    await bash(
      ws,
      `mkdir -p skills/default/huge && printf -- '---\\nname: huge\\ndescription: x\\n---\\n' > skills/default/huge/SKILL.md && truncate -s ${FIVE_GIB} skills/default/huge/SKILL.md`,
    );
    expect(await ws.listSkills()).toEqual([]);
    await bash(ws, `truncate -s ${FIVE_GIB} .mcp`);
    // A fresh handle reads .mcp again on initialize.
    expect(await ws.listMcps()).toEqual([]);
  });

  it("a 5 GiB context.jsonl: offloading appends without reading it", async () => {
    const ws = await backend.open();
    await bash(ws, `mkdir -p sessions/s1 && truncate -s ${FIVE_GIB} sessions/s1/context.jsonl`);
    await ws.offloadContext("s1", [{ role: "user", content: "hello" }]);
    expect((await ws.getBackend().stat("sessions/s1/context.jsonl"))!.size).toBeGreaterThan(5 * 1024 ** 3);
  });
});

describe("sparse 5 GiB file in the seed partition (local: the host copies the partition)", () => {
  it("a new agent's partition is copied without holding the file in memory, and stays sparse", async () => {
    const ws = await env.backends[0]!.open();
    await bash(
      ws,
      `mkdir -p skills/.seed/big && printf -- '---\\nname: big\\ndescription: x\\n---\\nbody\\n' > skills/.seed/big/SKILL.md && truncate -s ${FIVE_GIB} skills/.seed/big/blob`,
    );
    expect((await ws.listSkills({ agentId: "fresh" })).map((s) => s.name)).toEqual(["big"]);
    const copied = await ws.getBackend().stat("skills/fresh/big/blob");
    expect(copied!.size).toBe(5 * 1024 ** 3);
    const du = await bash(ws, "du -k skills/fresh/big/blob");
    expect(Number(du.split(/\s/)[0])).toBeLessThan(1024);
  });
});

describe("the service's MCP endpoint after the agent plants a 5 GiB .index (local)", () => {
  let svc: Running;
  beforeAll(async () => {
    svc = await startTestService();
  });
  afterAll(async () => {
    await svc?.close();
  });

  it("tools/list (which lists the skills) answers, before and after", async () => {
    const created = await svc.call("alice", "POST", "/sessions", { agentId: "victim" });
    const { sessionId } = (await created.json()) as { sessionId: string };
    const client = new Client({ name: "test", version: "1" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${svc.url}/sessions/${sessionId}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${svc.tokens.alice}` } },
      }),
    );
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toContain("Skill");
      const planted = await client.callTool({ name: "Bash", arguments: { command: `truncate -s ${FIVE_GIB} skills/victim/.index && echo planted` } });
      expect(JSON.stringify(planted.content)).toContain("planted");
      expect((await client.listTools()).tools.map((t) => t.name)).toContain("Skill");
      expect((await svc.call("alice", "GET", `/sessions/${sessionId}/workspace/skills`)).status).toBe(200);
    } finally {
      await client.close();
    }
  });
});
