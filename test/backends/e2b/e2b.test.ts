import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Sandbox } from "e2b";
import { afterAll, describe, expect, it } from "vitest";
import { E2BDriver, REFERENCE_KEY } from "../../../sdk/backends/e2b/driver.js";
import { e2bError } from "../../../sdk/backends/e2b/client.js";
import { E2BWorkspace } from "../../../sdk/backends/e2b/index.js";
import { LABELS } from "../../../sdk/contract/driver.js";
import { uniqueId } from "../../contract/fixture.js";
import { ECHO_SERVER_IN_WORKSPACE, echoServerBundle } from "../../fixtures/mcp/bundle.js";
import { e2bConnection, e2bEmulator } from "../../support/e2b-emulator.js";

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const emu = await e2bEmulator();
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

describe.skipIf(!emu)("E2B backend: reattach, pause, races and faults (emulator)", () => {
  const conn = () => e2bConnection(emu!);
  const driver = () => new E2BDriver(conn());
  /** The emulator's sandboxes of one workspace id (every copy, running or paused). */
  const copies = (id: string) => emu!.sandboxes().filter((s) => s.metadata[REFERENCE_KEY] === id);
  const workspace = (workspaceId: string, extra: Record<string, unknown> = {}) =>
    new E2BWorkspace({ workspaceId, userId: "u1", agentId: "a1", ...conn(), ...extra });

  afterAll(async () => {
    await emu?.close();
  });

  it("reattaches from a new process: the same sandbox, resumed, with its files", async () => {
    const id = uniqueId("e2b-re");
    const ws = workspace(id);
    await ws.initialize();
    await ws.getBackend().writeFile("notes/a.txt", "from the first process");
    await ws.close();
    expect(copies(id).map((s) => s.state)).toEqual(["paused"]);
    const child = `
      import { E2BWorkspace } from "./sdk/backends/e2b/index.ts";
      const ws = new E2BWorkspace(${JSON.stringify({ workspaceId: id, userId: "u1", agentId: "a1", ...conn() })});
      await ws.initialize();
      const text = (await ws.getBackend().readFile("notes/a.txt")).toString();
      console.log(JSON.stringify({ outcome: ws.ensureOutcome, text, sandboxId: ws.sandboxId }));
      await ws.close();`;
    const { stdout } = await run(process.execPath, ["--import", "tsx", "--input-type=module", "-e", child], { cwd: ROOT, timeout: 120_000 });
    const got = JSON.parse(stdout.trim().split("\n").pop()!) as { outcome: string; text: string; sandboxId: string };
    expect(got).toMatchObject({ outcome: "resumed", text: "from the first process", sandboxId: copies(id)[0]!.sandboxID });
    expect(copies(id)).toHaveLength(1);
  });

  it("pauses, then resumes with every file's checksum and the MCP registrations intact", async () => {
    const id = uniqueId("e2b-pz");
    const ws = workspace(id);
    await ws.initialize();
    const sb = ws.getBackend();
    const files: Record<string, Buffer> = {
      "bin/blob.bin": randomBytes(1024 * 1024),
      "data/x.json": Buffer.from('{"k":1}'),
      "deep/a/b/c.txt": Buffer.from("ünïcødé\n"),
    };
    for (const [p, b] of Object.entries(files)) await sb.writeFile(p, b);
    await sb.writeFile(ECHO_SERVER_IN_WORKSPACE, await echoServerBundle());
    await ws.addMcp({ name: "echo", transport: { type: "stdio", command: "node", args: [ECHO_SERVER_IN_WORKSPACE] } }, { agentId: "a1" });
    const before = (await ws.listMcps({ agentId: "a1" })).map((m) => m.name);
    await ws.close();
    expect(copies(id)[0]!.state).toBe("paused");
    const again = workspace(id);
    await again.initialize();
    expect(again.ensureOutcome).toBe("resumed");
    for (const [p, b] of Object.entries(files)) expect(sha(await again.getBackend().readFile(p))).toBe(sha(b));
    expect((await again.listMcps({ agentId: "a1" })).map((m) => m.name)).toEqual(before);
    expect(before).toContain("echo");
    // The registration still works: its server starts in the resumed sandbox and answers.
    const [echo] = await again.listMcps({ agentId: "a1" });
    expect((await echo!.listTools()).length).toBeGreaterThan(0);
    await again.close();
    expect(copies(id)).toHaveLength(1);
  });

  it("two replicas creating one id at once end with one sandbox (the loser kills its own)", async () => {
    const id = uniqueId("e2b-race");
    const made = await Promise.all([0, 1, 2, 3].map(() => driver().create({ workspaceId: id, managedBy: "runtime", userId: "u1" })));
    expect(new Set(made.map((d) => d.location.sandboxId)).size).toBe(1);
    expect(copies(id)).toHaveLength(1);
    await driver().destroy(id, { deleteData: true });
  });

  it("a slow create racing another still ends with one sandbox", async () => {
    const id = uniqueId("e2b-slow");
    emu!.faults.createDelayMs = 1500;
    try {
      const made = await Promise.all([driver().create({ workspaceId: id, managedBy: "runtime" }), driver().create({ workspaceId: id, managedBy: "runtime" })]);
      expect(made[0]!.location.sandboxId).toBe(made[1]!.location.sandboxId);
    } finally {
      emu!.faults.createDelayMs = undefined;
    }
    expect(copies(id)).toHaveLength(1);
    await driver().destroy(id, { deleteData: true });
  });

  it("429 after the SDK's own retries is rate_limited with retryAfterMs, creates nothing, and carries no key", async () => {
    const id = uniqueId("e2b-429");
    emu!.faults.rateLimit = { count: 20, retryAfterSeconds: 1 };
    const err = await driver()
      .create({ workspaceId: id, managedBy: "runtime" })
      .then(
        () => null,
        (e: unknown) => e as { code?: string; retryAfterMs?: number; message: string },
      );
    const left = emu!.faults.rateLimit.count;
    emu!.faults.rateLimit = undefined;
    expect(err).toMatchObject({ code: "rate_limited" });
    expect(err!.retryAfterMs).toBeGreaterThan(0);
    expect(err!.message).not.toContain(conn().apiKey);
    // The SDK retried (3 retries after the first answer) before giving up.
    expect(20 - left).toBe(4);
    expect(copies(id)).toHaveLength(0);
    // A Retry-After the SDK hands over is kept as it is.
    expect(
      e2bError(Object.assign(new Error("quota: maximum number of concurrent E2B sandboxes"), { name: "RateLimitError", retryAfter: 7 }), "create"),
    ).toMatchObject({
      code: "rate_limited",
      retryAfterMs: 7000,
      message: expect.stringMatching(/quota.*pause or kill idle sandboxes/),
    });
  });

  it("a 5xx during resume is a clear unavailable error and never creates a second sandbox", async () => {
    const id = uniqueId("e2b-5xx");
    const ws = workspace(id);
    await ws.initialize();
    await ws.getBackend().writeFile("keep.txt", "kept");
    await ws.close();
    emu!.faults.resumeFailure = { count: 1, status: 500 };
    const again = workspace(id);
    await expect(again.initialize()).rejects.toMatchObject({ code: "unavailable", message: expect.stringMatching(/resume/) });
    expect(copies(id).map((s) => s.state)).toEqual(["paused"]);
    await again.initialize();
    expect((await again.getBackend().readFile("keep.txt")).toString()).toBe("kept");
    await again.close();
    expect(copies(id)).toHaveLength(1);
  });

  it("a sandbox that disappears is a clear not_found on the open handle; initialize then creates exactly one", async () => {
    const id = uniqueId("e2b-gone");
    const ws = workspace(id);
    await ws.initialize();
    await emu!.vanish(copies(id)[0]!.sandboxID);
    await expect(ws.getBackend().exec(["true"])).rejects.toMatchObject({ code: "not_found", message: expect.stringMatching(/gone|initialize/) });
    await ws.close().catch(() => undefined);
    const again = workspace(id);
    await again.initialize();
    expect(again.ensureOutcome).toBe("created");
    expect(copies(id)).toHaveLength(1);
    await again.close();
  });

  it("finds and adopts a sandbox the Python reference tagged, and stamps ours with its key too", async () => {
    const id = uniqueId("e2b-ref");
    const theirs = await Sandbox.create({ ...conn(), metadata: { [REFERENCE_KEY]: id } });
    await theirs.commands.run("mkdir -p /home/user/workspace && echo hi > /home/user/workspace/from-python.txt");
    const ws = workspace(id);
    await ws.initialize();
    expect(ws.ensureOutcome).toBe("reattached");
    expect(ws.sandboxId).toBe(theirs.sandboxId);
    expect((await ws.getBackend().readFile("from-python.txt")).toString()).toBe("hi\n");
    await ws.close();
    expect(copies(id)).toHaveLength(1);
    const mine = uniqueId("e2b-ours");
    await driver().create({ workspaceId: mine, managedBy: "runtime", userId: "u9" });
    expect(copies(mine)[0]!.metadata).toMatchObject({ [REFERENCE_KEY]: mine, [LABELS.workspaceId]: mine, [LABELS.userId]: "u9" });
    await driver().destroy(mine, { deleteData: true });
  });

  it("renews the keep-alive while in use, so a short timeout never pauses a busy workspace", async () => {
    const id = uniqueId("e2b-ka");
    const ws = workspace(id, { timeoutSeconds: 10 });
    await ws.initialize();
    const until = Date.now() + 14_000;
    while (Date.now() < until) {
      expect((await ws.getBackend().exec(["true"])).exitCode).toBe(0);
      await new Promise((r) => setTimeout(r, 1000));
    }
    expect(copies(id)[0]!.state).toBe("running");
    expect(emu!.calls).toContain("POST /sandboxes/:id/timeout");
    await ws.close();
  });

  it("keeps the API key out of descriptions, and sandbox metadata never overrides the identity", async () => {
    const id = uniqueId("e2b-sec");
    const d = new E2BDriver({ ...conn(), sandboxMetadata: { [LABELS.workspaceId]: "spoofed", team: "t1" } });
    const desc = await d.create({ workspaceId: id, managedBy: "runtime" });
    expect(JSON.stringify(desc)).not.toContain(conn().apiKey);
    expect(copies(id)[0]!.metadata).toMatchObject({ [LABELS.workspaceId]: id, team: "t1" });
    await d.destroy(id, { deleteData: true });
  });
});
