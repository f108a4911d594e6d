import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Sandbox as OsbSandbox } from "@alibaba-group/opensandbox";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Logger } from "../../../sdk/logger.js";
import { OpenSandboxDriver } from "../../../sdk/backends/opensandbox/driver.js";
import { OpenSandboxSandbox } from "../../../sdk/backends/opensandbox/sandbox.js";
import { uniqueId } from "../../contract/fixture.js";
import { expectFallbackFileOps } from "../../support/fallback-checks.js";
import { OPENSANDBOX_TEST_IMAGE, openSandboxServer } from "../../support/opensandbox-server.js";

vi.setConfig({ testTimeout: 240_000, hookTimeout: 240_000 });
const server = await openSandboxServer();

/** The runner behind its HTTP gateway on the real server: both endpoint modes, replicas, a hostile agent, the fallback. */
describe.skipIf(!server).sequential("OpenSandbox through the runner's HTTP gateway", () => {
  let basedir: string;
  const made: Array<{ d: OpenSandboxDriver; id: string }> = [];
  const handles: OpenSandboxSandbox[] = [];

  /** A sandbox of its own; `handle` opens a handle on it as a replica would (its own SDK connection). */
  async function sandbox(o: { useServerProxy?: boolean } = {}) {
    const d = new OpenSandboxDriver({ basedir, image: OPENSANDBOX_TEST_IMAGE, ...o });
    const id = uniqueId("or");
    made.push({ d, id });
    const desc = await d.create({ workspaceId: id, userId: "u-or", managedBy: "runtime" });
    const handle = async (extra: { python?: string; logger?: Logger } = {}) => {
      const sbx = await OsbSandbox.connect({ sandboxId: desc.location.sandboxId!, connectionConfig: d.connection });
      const h = new OpenSandboxSandbox(sbx, { persistent: true, ...extra });
      handles.push(h);
      await h.start();
      return h;
    };
    return { d, id, handle, host: path.join(basedir, id) };
  }

  beforeAll(async () => {
    basedir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-osbr-"));
  });
  afterAll(async () => {
    await Promise.all(handles.map((h) => h.close()));
    for (const { d, id } of made) await d.destroy(id).catch(() => undefined);
    await Promise.all(made.map(({ d }) => d.close()));
    await fs.rm(basedir, { recursive: true, force: true });
  });

  for (const useServerProxy of [false, true]) {
    it(`runs commands, stdin and big files byte-exact through the runner (${useServerProxy ? "through the server's proxy" : "direct endpoint"})`, async () => {
      const s = await sandbox({ useServerProxy });
      const h = await s.handle();
      expect(h.runnerMode).toBe("runner");
      const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      const r = await h.exec(["sh", "-c", "cat; printf 'no newline' >&2"], { stdin: all });
      expect(r.exitCode).toBe(0);
      expect(r.stdout.equals(all)).toBe(true);
      expect(r.stderr.toString()).toBe("no newline");
      const big = randomBytes(3 * 1024 * 1024 + 5);
      await h.writeFile("data/big.bin", big, { mode: 0o640 });
      expect((await fs.readFile(path.join(s.host, "data/big.bin"))).equals(big)).toBe(true);
      expect((await h.readFile("data/big.bin")).equals(big)).toBe(true);
      expect((await h.exec(["stat", "-c", "%a", "data/big.bin"])).stdout.toString().trim()).toBe("640");
      // A silent stream outlives the proxy's idle cut only thanks to the heartbeat; 1 s here just checks it stays usable.
      await new Promise((r) => setTimeout(r, 1000));
      expect((await h.exec(["true"])).exitCode).toBe(0);
    });
  }

  it("refuses symlinks leading out and FIFOs without hanging, as the sandbox sees them", async () => {
    const s = await sandbox();
    const h = await s.handle();
    expect((await h.exec(["sh", "-c", "ln -s /etc/passwd leak; ln -s /etc dir; mkfifo pipe"])).exitCode).toBe(0);
    await expect(h.readFile("leak")).rejects.toMatchObject({ code: "path_escape" });
    await expect(h.writeFile("dir/evil", "x")).rejects.toMatchObject({ code: "path_escape" });
    await expect(h.readFile("pipe")).rejects.toMatchObject({ code: "invalid_argument" });
    expect(await h.exec(["cat", "/etc/hostname"]).then((r) => r.exitCode)).toBe(0);
  });

  it("replicas share one gateway, each with its own runner; one closing does not break the other", async () => {
    const s = await sandbox();
    const [a, b] = await Promise.all([s.handle(), s.handle()]);
    // One socket listens on the gateway's port (8080 = 1F90); the first runner (forked from the gateway) holds none.
    const gateways = await a.exec([
      "sh",
      "-c",
      "grep -c ':1F90 00000000:0000 0A' /proc/net/tcp; cat /opt/agentws/gateway.pid; ls -l /proc/$PPID/fd | grep -c socket:",
    ]);
    const [count, pid, runnerSockets] = gateways.stdout.toString().trim().split("\n");
    expect(count).toBe("1");
    expect(runnerSockets).toBe("0");
    expect((await b.exec(["cat", "/opt/agentws/gateway.pid"])).stdout.toString().trim()).toBe(pid);
    const ppid = async (h: OpenSandboxSandbox) => (await h.exec(["sh", "-c", "echo $PPID"])).stdout.toString().trim();
    // A command's parent is its handle's runner: two different runners.
    expect(await ppid(a)).not.toBe(await ppid(b));
    await a.close();
    expect((await b.exec(["echo", "still here"])).stdout.toString()).toBe("still here\n");
  });

  it("an agent that kills the gateway or its runner costs the call in flight at most; the next one works", async () => {
    const s = await sandbox();
    const h = await s.handle();
    await h.writeFile("keep.txt", "kept");
    // The runner itself (the parent of the command), then the whole gateway.
    await h.exec(["sh", "-c", "kill -9 $PPID"]).catch(() => undefined);
    expect((await h.exec(["echo", "one"])).stdout.toString()).toBe("one\n");
    await h.exec(["sh", "-c", "kill -9 $(cat /opt/agentws/gateway.pid)"]).catch(() => undefined);
    expect((await h.readFile("keep.txt")).toString()).toBe("kept");
    expect((await h.exec(["echo", "two"])).stdout.toString()).toBe("two\n");
  });

  it("without python3 falls back to execd, says so once, and keeps bytes exact", async () => {
    const s = await sandbox();
    const warnings: string[] = [];
    const logger: Logger = { debug: () => undefined, info: () => undefined, warn: (m: string) => void warnings.push(m), error: () => undefined };
    const h = await s.handle({ python: "/nonexistent/python3", logger });
    expect(h.runnerMode).toBe("plain");
    await expectFallbackFileOps(h);
    expect(() => h.spawn(["cat"])).not.toThrow();
    const p = h.spawn(["cat"]);
    expect(await p.exited).toBe(127);
    expect(warnings.filter((w) => /no python3/.test(w))).toHaveLength(1);
  });
});
