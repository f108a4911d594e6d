import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BubblewrapSandbox } from "../../../sdk/backends/bubblewrap/sandbox.js";
import { RunnerClient, SPAWN_WINDOW, spawnThroughRunner, type RunnerSpawn } from "../../../sdk/kit/runner/index.js";
import type { SandboxProcess } from "../../../sdk/sandbox.js";
import { SandboxProcessTransport } from "../../../sdk/workspace/mcp-transport.js";
import { hostRunner } from "../../support/host-runner.js";

/**
 * `spawn` through the runner, over the protocol alone (the runner as a host process): streamed stdio
 * with backpressure both ways, kill and close, many processes and commands at once, the runner's death.
 */

/** A stdio MCP server in a few lines of stdlib Python (newline-delimited JSON-RPC): initialize, tools/list, tools/call echo. */
const PY_MCP = String.raw`
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "py-echo", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "echo", "description": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}
    elif m["method"] == "tools/call":
        r = {"content": [{"type": "text", "text": "echo:" + m["params"]["arguments"]["text"]}]}
    else:
        r = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n")
    sys.stdout.flush()
`;

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

function collect(s: NodeJS.ReadableStream): Promise<Buffer> {
  const parts: Buffer[] = [];
  s.on("data", (c: Buffer) => parts.push(c));
  return new Promise((resolve) => s.once("end", () => resolve(Buffer.concat(parts))));
}

/** Resident memory of a host process in bytes (the runner is one here). */
async function rss(pid: number): Promise<number> {
  const status = await fs.readFile(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) * 1024;
}

async function alive(pattern: string): Promise<boolean> {
  const ps = (await fs.readdir("/proc")).filter((p) => /^\d+$/.test(p));
  const lines = await Promise.all(ps.map((p) => fs.readFile(`/proc/${p}/cmdline`, "utf8").catch(() => "")));
  return lines.some((c) => c.includes(pattern));
}

async function pidOf(pattern: string): Promise<number> {
  for (const p of (await fs.readdir("/proc")).filter((x) => /^\d+$/.test(x)))
    if ((await fs.readFile(`/proc/${p}/cmdline`, "utf8").catch(() => "")).includes(pattern)) return Number(p);
  throw new Error(`no process ${pattern}`);
}

async function goneSoon(pattern: string): Promise<boolean> {
  for (let i = 0; i < 50 && (await alive(pattern)); i++) await pause(100);
  return !(await alive(pattern));
}

describe("spawn through the runner", () => {
  let root: string;
  let client: RunnerClient;
  const spawn = (argv: string[], more: Partial<RunnerSpawn> = {}, c = client): SandboxProcess =>
    spawnThroughRunner(Promise.resolve({ client: c }), { argv, cwd: "", env: {}, ...more });
  beforeAll(async () => {
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "agentws-runner-spawn-")));
    client = new RunnerClient(hostRunner(root));
    await client.ready;
  });
  afterAll(async () => {
    await client.stop();
    await fs.rm(root, { recursive: true, force: true });
  });

  it("streams stdin to the process and stdout and stderr apart, then the exit code; the cwd is resolved under the root", async () => {
    await fs.mkdir(path.join(root, "sub"));
    const p = spawn(["sh", "-c", 'while read l; do echo "out:$l"; echo "err:$l" >&2; done; pwd; exit 3'], { cwd: "sub" });
    const [out, err] = [collect(p.stdout), collect(p.stderr)];
    p.stdin.write("one\n");
    p.stdin.write("two\n");
    p.stdin.end();
    expect(await p.exited).toBe(3);
    expect((await out).toString()).toBe(`out:one\nout:two\n${root}/sub\n`);
    expect((await err).toString()).toBe("err:one\nerr:two\n");
    const missing = spawn(["true"], { cwd: "nope" });
    const why = collect(missing.stderr);
    expect(await missing.exited).toBe(127);
    expect((await why).toString()).toMatch(/^spawn true: .*working directory 'nope'/);
    const nobin = spawn(["/no/such/binary"]);
    const said = collect(nobin.stderr);
    expect(await nobin.exited).toBe(127);
    expect((await said).toString()).toMatch(/No such file/);
  });

  it("a real MCP client talks to a stdio server spawned through it", async () => {
    const transport = new SandboxProcessTransport(() => spawn(["python3", "-c", PY_MCP]), { closeGraceMs: 500 });
    const mcp = new Client({ name: "t", version: "1" });
    await mcp.connect(transport);
    expect((await mcp.listTools()).tools.map((t) => t.name)).toEqual(["echo"]);
    const calls = await Promise.all(Array.from({ length: 20 }, (_, i) => mcp.callTool({ name: "echo", arguments: { text: `m${i}` } })));
    expect(calls.map((c) => (c.content as { text: string }[])[0]!.text)).toEqual(Array.from({ length: 20 }, (_, i) => `echo:m${i}`));
    await mcp.close();
    expect(transport.exitCode).not.toBeUndefined();
  });

  it("runs many processes and commands at once on one runner, each with its own streams", async () => {
    const procs = Array.from({ length: 24 }, (_, i) => spawn(["sh", "-c", `cat; echo done${i} >&2`]));
    const outs = procs.map((p) => collect(p.stdout));
    const errs = procs.map((p) => collect(p.stderr));
    const execs = Array.from({ length: 24 }, (_, i) => client.exec({ argv: ["sh", "-c", `echo x${i}`], cwd: "", env: {}, maxOutputBytes: 1024 }));
    const bodies = procs.map((p, i) => {
      const body = Buffer.alloc(100_000 + i * 997, i + 1);
      p.stdin.end(body);
      return body;
    });
    expect(await Promise.all(procs.map((p) => p.exited))).toEqual(procs.map(() => 0));
    for (const [i, o] of (await Promise.all(outs)).entries()) expect(o.equals(bodies[i]!)).toBe(true);
    expect((await Promise.all(errs)).map(String)).toEqual(procs.map((_, i) => `done${i}\n`));
    expect((await Promise.all(execs)).map((r) => r.stdout.toString())).toEqual(execs.map((_, i) => `x${i}\n`));
  });

  it("a process flooding stdout to a slow reader waits on its own pipe: memory stays bounded on both sides", async () => {
    const before = await rss(client.pid!);
    // 256 MiB of output; the reader takes 64 KiB every few ms for a while, then drains the rest.
    const p = spawn(["python3", "-c", "import os\nb = b'y' * 65536\nfor _ in range(4096): os.write(1, b)"]);
    let got = 0;
    let peakBuffered = 0;
    const hash = createHash("sha256");
    for (let i = 0; i < 150; i++) {
      await pause(4);
      const c = p.stdout.read(65536) as Buffer | null;
      if (c) {
        got += c.length;
        hash.update(c);
      }
      peakBuffered = Math.max(peakBuffered, p.stdout.readableLength);
    }
    // Held back: what the host buffers is the window, not the flood.
    expect(peakBuffered).toBeLessThanOrEqual(SPAWN_WINDOW + 65536);
    expect(got).toBeLessThan(64 << 20);
    expect((await rss(client.pid!)) - before).toBeLessThan(32 << 20);
    p.stdout.on("data", (c: Buffer) => {
      got += c.length;
    });
    expect(await p.exited).toBe(0);
    await new Promise((r) => (p.stdout.readableEnded ? r(null) : p.stdout.once("end", r)));
    expect(got).toBe(256 << 20);
  });

  it("stdin has backpressure: a process that does not read holds the writer at the window", async () => {
    const p = spawn(["sh", "-c", "sleep 0.5; exec wc -c"]);
    const out = collect(p.stdout);
    let accepted = 0;
    const chunk = Buffer.alloc(256 << 10, 1);
    while (p.stdin.write(chunk)) accepted += chunk.length;
    // The writer was told to wait well before all of 8 MiB went anywhere.
    expect(accepted).toBeLessThanOrEqual(SPAWN_WINDOW + (256 << 10));
    for (let i = 0; i < 30; i++) if (!p.stdin.write(chunk)) await new Promise((r) => p.stdin.once("drain", r));
    p.stdin.end();
    expect(await p.exited).toBe(0);
    expect(Number((await out).toString().trim())).toBe(accepted + chunk.length + 30 * chunk.length);
  });

  it("kill ends the process and everything it started, setsid escapees included; ending stdin is an EOF", async () => {
    const secs = `${60 + Math.random()}`.slice(0, 8);
    const p = spawn(["sh", "-c", `setsid sleep ${secs} >/dev/null 2>&1 </dev/null & sleep ${secs}`]);
    for (let i = 0; i < 50 && !(await alive(`sleep\0${secs}`)); i++) await pause(20);
    p.kill();
    expect(await p.exited).toBeNull();
    expect(await goneSoon(`sleep\0${secs}`)).toBe(true);
    // A kill before the runner took the process: it never runs.
    const early = spawnThroughRunner(
      pause(50).then(() => ({ client })),
      { argv: ["sleep", secs], cwd: "", env: {} },
    );
    early.kill();
    expect(await early.exited).toBeNull();
    const cat = spawn(["cat"]);
    const echoed = collect(cat.stdout);
    cat.stdin.end("bye");
    expect(await cat.exited).toBe(0);
    expect((await echoed).toString()).toBe("bye");
    // Writing after the end is dropped, not an error.
    await new Promise<void>((r) => cat.stdin.write("late", () => r()));
  });

  it("the runner's death settles its processes: exited, the streams end, stderr says why", async () => {
    const own = new RunnerClient(hostRunner(root));
    await own.ready;
    const secs = `${60 + Math.random()}`.slice(0, 8);
    const p = spawn(["sh", "-c", `echo started; sleep ${secs}`], {}, own);
    const [out, err] = [collect(p.stdout), collect(p.stderr)];
    for (let i = 0; i < 50 && !(await alive(`sleep\0${secs}`)); i++) await pause(20);
    process.kill(-own.pid!, "SIGKILL");
    expect(await p.exited).toBeNull();
    expect((await out).toString()).toBe("started\n");
    expect((await err).toString()).toMatch(/runner stopped/);
    // (A runner killed outright cannot kill anything; a sandbox's own boundary does: see the Bubblewrap case below.)
    process.kill(-Number((await fs.readFile(`/proc/${await pidOf(`sleep\0${secs}`)}/stat`, "utf8")).split(" ")[4]), "SIGKILL");
    // A spawn on the dead runner fails at once, the same way.
    const late = spawn(["true"], {}, own);
    expect(await late.exited).toBeNull();
  });

  it("stopping the runner (the sandbox's close) kills what it spawned", async () => {
    // Stopped as Docker stops it: its stdin closes, and it kills its processes before it exits.
    const t = hostRunner(root);
    const own = new RunnerClient({ ...t, kill: () => t.stdin.end() });
    await own.ready;
    const secs = `${60 + Math.random()}`.slice(0, 8);
    const p = spawn(["sleep", secs], {}, own);
    for (let i = 0; i < 50 && !(await alive(`sleep\0${secs}`)); i++) await pause(20);
    await own.stop();
    expect(await p.exited).toBeNull();
    expect(await goneSoon(`sleep\0${secs}`)).toBe(true);
  });
});

describe("spawn through the runner in Bubblewrap", () => {
  let dir: string;
  let sb: BubblewrapSandbox;
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-spawn-bw-"));
    await fs.mkdir(path.join(dir, "ws"));
    await fs.mkdir(path.join(dir, "tmp"));
    sb = await BubblewrapSandbox.open({ hostRoot: path.join(dir, "ws"), hostTmp: path.join(dir, "tmp"), network: "none", persistent: true });
  });
  afterAll(async () => {
    await sb.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("a stdio MCP server runs on the handle's one runner; the runner killed mid-spawn takes it down, the next spawn gets a fresh runner", async () => {
    const transport = new SandboxProcessTransport(() => sb.spawn(["python3", "-c", PY_MCP]), { closeGraceMs: 500 });
    const mcp = new Client({ name: "t", version: "1" });
    await mcp.connect(transport);
    const runner = sb.runnerPid!;
    // No bwrap of its own: the server is a child of the runner's sandbox.
    expect(await descendantsOf(runner)).toContain(await pidOf("py-echo"));
    expect(((await mcp.callTool({ name: "echo", arguments: { text: "hi" } })).content as { text: string }[])[0]!.text).toBe("echo:hi");
    const secs = `${60 + Math.random()}`.slice(0, 8);
    const p = sb.spawn(["sleep", secs]);
    for (let i = 0; i < 50 && !(await alive(`sleep\0${secs}`)); i++) await pause(20);
    process.kill(-runner, "SIGKILL");
    expect(await p.exited).toBeNull();
    expect(await goneSoon(`sleep\0${secs}`)).toBe(true);
    expect(await goneSoon("py-echo")).toBe(true);
    for (let i = 0; i < 50 && !transport.closed; i++) await pause(20);
    expect(transport.closed).toBe(true);
    const again = sb.spawn(["sh", "-c", "echo again"]);
    const out = collect(again.stdout);
    expect(await again.exited).toBe(0);
    expect((await out).toString()).toBe("again\n");
    expect(sb.runnerPid).not.toBe(runner);
  });
});

/** Every descendant of a host pid. */
async function descendantsOf(pid: number): Promise<number[]> {
  const out: number[] = [];
  const todo = [pid];
  while (todo.length) {
    const p = todo.pop()!;
    const kids = await fs.readFile(`/proc/${p}/task/${p}/children`, "utf8").catch(() => "");
    for (const k of kids.trim().split(/\s+/).filter(Boolean)) {
      out.push(Number(k));
      todo.push(Number(k));
    }
  }
  return out;
}
