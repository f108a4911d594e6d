// Size: the Daytona backend's lifecycle proofs in one file, sharing one emulator: reattach from another process, stop/start integrity, archive, the convergence race, each fault switch, the reference's labels, secrets.
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { DaytonaDriver, REFERENCE_LABEL } from "../../../sdk/backends/daytona/driver.js";
import { DaytonaWorkspace } from "../../../sdk/backends/daytona/index.js";
import { LABELS } from "../../../sdk/contract/driver.js";
import { RateLimitedError } from "../../../sdk/errors.js";
import type { Logger } from "../../../sdk/logger.js";
import { ECHO_SERVER_IN_WORKSPACE, echoServerBundle } from "../../fixtures/mcp/bundle.js";
import { uniqueId } from "../../contract/fixture.js";
import { rejection } from "../../contract/helpers.js";
import { EMULATOR_API_KEY, emulatorSpec, startDaytonaEmulator } from "../../support/daytona-emulator.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const run = promisify(execFile);
const emulator = await startDaytonaEmulator();

describe.skipIf(!emulator)("Daytona backend through the emulator", () => {
  const emu = emulator!;
  const made = new Set<string>();
  const id = (p = "dtl") => {
    const w = uniqueId(p);
    made.add(w);
    return w;
  };
  const spec = (extra: Record<string, unknown> = {}) => ({ ...emulatorSpec(emu), ...extra });
  const driver = (extra: Record<string, unknown> = {}) => new DaytonaDriver(spec(extra));
  const sandboxesOf = (w: string) => emu.sandboxes({ [LABELS.workspaceId]: w });
  const sums = async (ws: DaytonaWorkspace) =>
    (await ws.getBackend().exec(["sh", "-c", "find . -type f ! -path './.mcp-fixture/*' -print0 | sort -z | xargs -0 sha256sum"])).stdout.toString();

  afterAll(async () => {
    const d = driver();
    await Promise.all([...made].map((w) => d.destroy(w).catch(() => undefined)));
    await emu.close();
  });

  it("labels the sandbox with the identity and passes env and the auto-stop interval", async () => {
    const w = id();
    const d = driver({ env: { GREETING: "hi" }, autoStopInterval: 42 });
    const desc = await d.create({ workspaceId: w, managedBy: "pulumi", userId: "u1", agentId: "a1", tags: { team: "x" } });
    const seen = emu.inspect(desc.location.sandboxId!)!;
    expect(seen.labels).toMatchObject({
      [LABELS.workspaceId]: w,
      [LABELS.userId]: "u1",
      [LABELS.agentId]: "a1",
      [LABELS.managedBy]: "pulumi",
      "agent-workspaces.tag.team": "x",
    });
    expect(seen.autoStopInterval).toBe(42);
    const sb = await d.connect(w);
    expect((await sb.exec(["sh", "-c", 'printf %s "$GREETING"'])).stdout.toString()).toBe("hi");
    await d.updateTags(w, { team: "y" });
    expect((await d.find(w))!.tags).toEqual({ team: "y" });
    expect(sandboxesOf(w)).toHaveLength(1);
  });

  it("reattaches from a new process: same sandbox, same files, same MCP registrations", async () => {
    const w = id();
    const ws = new DaytonaWorkspace({ workspaceId: w, ...spec(), teardown: "keep" });
    await ws.initialize();
    await ws.getBackend().writeFile("notes/hello.txt", "from the first process");
    await ws.addMcp({ name: "web", transport: { type: "http", url: "http://127.0.0.1:9/mcp" } }, { agentId: "a1", sessionId: "s1" });
    await ws.close();
    const { stdout } = await run(
      process.execPath,
      [
        "--import",
        "tsx",
        path.join(ROOT, "test/support/daytona-reattach.ts"),
        JSON.stringify({ workspaceId: w, apiKey: EMULATOR_API_KEY, apiUrl: emu.apiUrl, file: "notes/hello.txt" }),
      ],
      {
        cwd: ROOT,
        timeout: 120_000,
      },
    );
    const out = JSON.parse(stdout.trim().split("\n").pop()!) as { ok: boolean; outcome: string; text: string; mcps: string[]; error?: string };
    expect(out, out.error).toMatchObject({ ok: true, outcome: "reattached", text: "from the first process", mcps: ["web"] });
    expect(sandboxesOf(w)).toHaveLength(1);
  });

  it("stops on close and starts on initialize with every file's checksum and the MCP registrations intact", async () => {
    const w = id();
    const ws = new DaytonaWorkspace({ workspaceId: w, ...spec() });
    await ws.initialize();
    const sb = ws.getBackend();
    await sb.writeFile("data/blob.bin", randomBytes(1 << 20));
    await sb.writeFile("deep/a/b/c.txt", "text\n");
    await sb.writeFile(ECHO_SERVER_IN_WORKSPACE, await echoServerBundle());
    await ws.addMcp({ name: "echo", transport: { type: "stdio", command: "node", args: [ECHO_SERVER_IN_WORKSPACE] } }, { agentId: "a1", sessionId: "s1" });
    const mcpFile = (await sb.readFile(".mcp")).toString();
    const before = await sums(ws);
    await ws.close();
    const sandboxId = sandboxesOf(w)[0]!;
    expect(emu.inspect(sandboxId)!.state).toBe("stopped");

    const again = new DaytonaWorkspace({ workspaceId: w, ...spec() });
    await again.initialize();
    try {
      expect(again.ensureOutcome).toBe("resumed");
      expect(await sums(again)).toBe(before);
      expect((await again.getBackend().readFile(".mcp")).toString()).toBe(mcpFile);
      const [echo] = await again.listMcps({ agentId: "a1", sessionId: "s1" });
      expect(echo?.name).toBe("echo");
      const r = await echo!.callTool("echo", { text: "after restart" });
      expect(JSON.stringify(r)).toContain("after restart");
    } finally {
      await again.close();
    }
    expect(sandboxesOf(w)).toEqual([sandboxId]);
  });

  it("archives a stopped sandbox and starts it again with its files", async () => {
    const w = id();
    const d = driver();
    await d.create({ workspaceId: w, managedBy: "runtime" });
    await (await d.connect(w)).writeFile("kept.txt", "archived");
    await d.archive(w);
    expect((await d.find(w))!.location.daytonaState).toBe("archived");
    await d.resume(w);
    expect((await (await d.connect(w)).readFile("kept.txt")).toString()).toBe("archived");
  });

  it("two replicas creating one id at once end with one sandbox", async () => {
    const w = id("race");
    // A slow create widens the window: both creates are in flight before either lists.
    emu.faults.createDelayMs = 1500;
    try {
      const [a, b] = await Promise.all([driver().create({ workspaceId: w, managedBy: "runtime" }), driver().create({ workspaceId: w, managedBy: "runtime" })]);
      expect(a.location.sandboxId).toBe(b.location.sandboxId);
    } finally {
      emu.faults.createDelayMs = 0;
    }
    expect(sandboxesOf(w)).toHaveLength(1);
  });

  it("finds and keeps a sandbox the Python reference created (agentscope.workspace.id)", async () => {
    const w = id("ref");
    const d = driver();
    const theirs = await d.client.create({ labels: { [REFERENCE_LABEL]: w } }, { timeout: 120 });
    const ws = new DaytonaWorkspace({ workspaceId: w, ...spec(), teardown: "keep" });
    await ws.initialize();
    try {
      expect(ws.ensureOutcome).toBe("reattached");
      expect((await d.find(w))!.location).toMatchObject({ sandboxId: theirs.id, origin: "agentscope" });
    } finally {
      await ws.close();
    }
    expect(emu.sandboxes({ [REFERENCE_LABEL]: w })).toEqual([theirs.id]);
    expect(sandboxesOf(w)).toEqual([]);
  });

  describe("fault switches", () => {
    it("429 with Retry-After becomes rate_limited with retryAfterMs, and nothing is created", async () => {
      const w = id();
      emu.faults.retryAfterSeconds = 7;
      emu.faults.rateLimited = 1000;
      try {
        const e = await rejection(driver().create({ workspaceId: w, managedBy: "runtime" }));
        expect(e).toBeInstanceOf(RateLimitedError);
        expect(e.code).toBe("rate_limited");
        expect((e as RateLimitedError).retryAfterMs).toBe(7000);
        expect(e.retryable).toBe(true);
      } finally {
        emu.faults.rateLimited = 0;
      }
      expect(sandboxesOf(w)).toHaveLength(0);
      await driver().create({ workspaceId: w, managedBy: "runtime" });
      expect(sandboxesOf(w)).toHaveLength(1);
    });

    it("a 5xx while starting fails the resume and never creates a second sandbox", async () => {
      const w = id();
      const first = new DaytonaWorkspace({ workspaceId: w, ...spec() });
      await first.initialize();
      await first.getBackend().writeFile("f.txt", "one");
      await first.close();
      emu.faults.failStarts = 1;
      const again = new DaytonaWorkspace({ workspaceId: w, ...spec() });
      const e = await rejection(again.initialize());
      expect(e.code).toBe("unavailable");
      expect(sandboxesOf(w)).toHaveLength(1);
      await again.initialize();
      try {
        expect(again.ensureOutcome).toBe("resumed");
        expect((await again.getBackend().readFile("f.txt")).toString()).toBe("one");
      } finally {
        await again.close();
      }
      expect(sandboxesOf(w)).toHaveLength(1);
    });

    it("a create slower than timeoutSeconds fails with timeout; the next ensure adopts the late sandbox", async () => {
      const w = id();
      emu.faults.createDelayMs = 4000;
      try {
        const e = await rejection(driver({ timeoutSeconds: 1 }).create({ workspaceId: w, managedBy: "runtime" }));
        expect(e.code).toBe("timeout");
      } finally {
        emu.faults.createDelayMs = 0;
      }
      expect(sandboxesOf(w)).toHaveLength(1);
      const d = await driver().create({ workspaceId: w, managedBy: "runtime" });
      expect(d.state).toBe("running");
      expect(sandboxesOf(w)).toEqual([d.location.sandboxId]);
    });

    it("a sandbox that disappears: operations say it is gone, the next initialize recreates it once", async () => {
      const w = id();
      const ws = new DaytonaWorkspace({ workspaceId: w, ...spec(), expectExisting: true, teardown: "keep" });
      await ws.initialize();
      await emu.vanish(sandboxesOf(w)[0]!);
      const e = await rejection(ws.getBackend().readFile("anything"));
      expect(e.code).toBe("not_found");
      expect(e.message).toMatch(/gone/);
      await ws.close();
      await ws.initialize();
      try {
        expect(ws.ensureOutcome).toBe("recreated");
      } finally {
        await ws.close();
      }
      expect(sandboxesOf(w)).toHaveLength(1);
    });

    it("a quota refusal says what to do", async () => {
      emu.faults.quotaExceeded = true;
      try {
        const e = await rejection(driver().create({ workspaceId: id(), managedBy: "runtime" }));
        expect(e.code).toBe("rate_limited");
        expect(e.retryable).toBe(false);
        expect(e.message).toMatch(/archive or delete idle sandboxes/);
      } finally {
        emu.faults.quotaExceeded = false;
      }
    });
  });

  it("never puts the API key in errors, descriptions or logs", async () => {
    const sentinel = `sk-sentinel-${randomBytes(8).toString("hex")}`;
    const lines: string[] = [];
    const logger: Logger = {
      debug: (m, f) => void lines.push(m + JSON.stringify(f ?? {})),
      info: (m, f) => void lines.push(m + JSON.stringify(f ?? {})),
      warn: (m, f) => void lines.push(m + JSON.stringify(f ?? {})),
      error: (m, f) => void lines.push(m + JSON.stringify(f ?? {})),
    };
    const w = id();
    const d = new DaytonaDriver({ ...emulatorSpec(emu, sentinel) });
    const desc = await d.create({ workspaceId: w, managedBy: "runtime" }, { logger });
    emu.faults.rateLimited = 1;
    const e = await rejection(d.find(w));
    emu.faults.rateLimited = 0;
    const ws = new DaytonaWorkspace({ workspaceId: w, ...emulatorSpec(emu, sentinel), logger, teardown: "destroy" });
    await ws.initialize();
    await ws.close();
    const seen = [JSON.stringify(desc), e.message, JSON.stringify(e.details ?? {}), String(e.cause ?? ""), ...lines].join("\n");
    expect(seen).not.toContain(sentinel);
  });
});
