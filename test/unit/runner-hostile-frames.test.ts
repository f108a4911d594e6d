/**
 * The host side of the runner channel against a runner that lies (the agent may have become its runner):
 * every adversarial frame ends THAT runner with a typed error to its callers, the next call gets a fresh
 * runner from the supervisor, and the claimed sizes never turn into host memory.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterEach, describe, expect, it } from "vitest";
import { UnavailableError, isWorkspaceError } from "../../sdk/errors.js";
import { RunnerFiles, RunnerSupervisor, type RunnerClient } from "../../sdk/kit/runner/index.js";
import { fakeRunner, honest, prefix, reply, type FakeRequest, type FakeRunner } from "../support/fake-runner.js";
import { spawnThroughRunner } from "../../sdk/kit/runner/spawn.js";
import { textChannelReader } from "../../sdk/kit/runner/text-channel.js";
import { demuxBounded } from "../../sdk/backends/docker/runner.js";
import { PassThrough } from "node:stream";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/** Host memory held by Buffers, after a full collection (what a claimed size would pin). */
function heldBytes(): number {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.arrayBuffers + m.heapUsed;
}

const MiB = 1 << 20;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Settles `p` or fails after `ms` (on a host without the fixes, many of these calls hang for ever). */
async function within<T>(p: Promise<T>, ms = 5000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await within(p);
  } catch (e) {
    return e;
  }
  throw new Error("the call succeeded");
}

const sups: RunnerSupervisor[] = [];
afterEach(async () => {
  await Promise.all(sups.splice(0).map((s) => s.stop()));
});

/** A supervisor whose first runner runs `script` and every later one is honest; short deadlines. */
function harness(script: (r: FakeRunner, q: FakeRequest) => void) {
  const runners: FakeRunner[] = [];
  const sup = new RunnerSupervisor(
    () => {
      const r = fakeRunner(runners.length === 0 ? script : honest);
      runners.push(r);
      return r;
    },
    { callTimeoutMs: 1500, killGraceMs: 300 },
  );
  sups.push(sup);
  const files = new RunnerFiles(async () => ({ client: sup.get() }));
  return { sup, runners, files, first: sup.get() };
}

/** The runner was ended (not the process), and the next call works on a fresh one. */
async function recovers(h: ReturnType<typeof harness>, first: RunnerClient): Promise<void> {
  await within(first.exited);
  expect(first.alive).toBe(false);
  expect(h.runners[0]!.killed).toBe(true);
  expect(await within(h.files.stat("x"))).toMatchObject({ type: "file", size: 2 });
  expect(h.sup.current).not.toBe(first);
  expect(h.runners.length).toBe(2);
}

function expectUnavailable(e: unknown, why: RegExp): void {
  expect(e).toBeInstanceOf(UnavailableError);
  expect(isWorkspaceError(e) && e.code).toBe("unavailable");
  expect((e as Error).message).toMatch(why);
}

describe("a hostile runner ends itself, never the host", () => {
  it("a header claiming 600 MiB: refused on its prefix, nothing buffered", async () => {
    const h = harness((r, q) => {
      r.send(prefix(q.id, 600 * MiB, 0));
      for (let i = 0; i < 32; i++) r.send(Buffer.allocUnsafe(MiB));
    });
    const before = heldBytes();
    const e = await rejection(h.files.readFile("a", { maxBytes: 1000 }));
    expectUnavailable(e, /header/);
    expect(heldBytes() - before).toBeLessThan(16 * MiB);
    await recovers(h, h.first);
  });

  it("a payload claim of 4 GiB with 256 MiB sent: refused on its header, the bytes sent are not kept", async () => {
    const h = harness((r, q) => {
      r.send(Buffer.concat([prefix(q.id, 7, 0xffffffff), Buffer.from("x\x000\x000\x000")]));
      // Distinct buffers, as a real channel delivers them: a reader that kept them would hold 256 MiB.
      for (let i = 0; i < 256; i++) r.send(Buffer.allocUnsafe(MiB));
    });
    const before = heldBytes();
    const res = await within(h.first.exec({ argv: ["true"], cwd: "", env: {}, maxOutputBytes: 1000 }));
    expect(res.exitCode).toBe(-1);
    expect(res.stderr.toString()).toMatch(/ended by the host.*over its/);
    expect(heldBytes() - before).toBeLessThan(16 * MiB);
    await recovers(h, h.first);
  });

  it("a partial frame is dropped when the runner is ended (memory returns after the kill)", async () => {
    // 30 MiB of a 32 MiB exec result (within the cap of a 16 MiB exec), then silence: the exec's timeout ends it.
    const h = harness((r, q) => {
      if (q.op !== "x") return;
      r.send(Buffer.concat([prefix(q.id, 7, 32 * MiB), Buffer.from("x\x000\x000\x000")]));
      for (let i = 0; i < 30; i++) r.send(Buffer.allocUnsafe(MiB));
    });
    const before = heldBytes();
    const res = await within(h.first.exec({ argv: ["sleep", "9"], cwd: "", env: {}, maxOutputBytes: 16 * MiB, timeoutMs: 200 }));
    expect(res.timedOut).toBe(true);
    expect(heldBytes() - before).toBeLessThan(8 * MiB);
    await recovers(h, h.first);
  });

  it("a size frame of -1, of NaN, or over the read's cap", async () => {
    for (const size of ["-1", "NaN", "4294967296", "1001", "99999999999999999999"]) {
      const h = harness((r, q) => void r.send(reply(q.id, ["s", size])));
      const e = await rejection(h.files.readFile("a", { maxBytes: 1000 }));
      expectUnavailable(e, /size/);
      await recovers(h, h.first);
    }
  });

  it("a read never returns more than maxBytes, whatever the runner sends", async () => {
    const h = harness((r, q) => {
      r.send(reply(q.id, ["s", 10]));
      for (let i = 0; i < 4; i++) r.send(reply(q.id, ["d"], Buffer.alloc(500, 7)));
      r.send(reply(q.id, ["o", 2000]));
    });
    const e = await rejection(h.files.readFile("a", { maxBytes: 1000 }));
    expectUnavailable(e, /over its/);
    await recovers(h, h.first);
  });

  it("a read without maxBytes is still capped by the host (the runner is told the cap)", async () => {
    let asked = "";
    const h = harness((r, q) => {
      asked = q.fields[3] ?? "";
      r.send(reply(q.id, ["s", 2 ** 31]));
    });
    const e = await rejection(h.files.readFile("a"));
    expect(asked).toBe(String(1 << 30));
    expectUnavailable(e, /size/);
    await recovers(h, h.first);
  });

  it("a size under the cap that is never sent allocates at most 64 MiB ahead of the bytes", async () => {
    const h = harness((r, q) => void r.send(reply(q.id, ["s", 900 * MiB])));
    const before = heldBytes();
    const call = h.files.readFile("a");
    call.catch(() => undefined);
    await pause(200);
    // Pending: the runner's word alone (900 MiB) must not have become host memory.
    expect(heldBytes() - before).toBeLessThan(80 * MiB);
    expectUnavailable(await rejection(call), /deadline|timed out|did not answer|within/);
    await recovers(h, h.first);
  });

  it("a reply for an id nobody waits for, a duplicate reply, a reply of the wrong kind", async () => {
    const unknown = harness((r, q) => void r.send(reply(q.id + 1000, ["o"])));
    expectUnavailable(await rejection(unknown.files.stat("a")), /id \d+, which no call/);
    await recovers(unknown, unknown.first);

    const twice = harness((r, q) => {
      r.send(reply(q.id, ["o", "f", 2, 1000, "a"]));
      r.send(reply(q.id, ["o", "f", 2, 1000, "a"]));
    });
    expect(await within(twice.files.stat("a"))).toMatchObject({ size: 2 });
    await recovers(twice, twice.first);

    // A read and an exec in flight; the runner answers the read with an exec's result.
    const ids: Record<string, number> = {};
    const crossed = harness((r, q) => {
      ids[q.op] = q.id;
      if (ids.x && ids.r) r.send(reply(ids.r, ["x", 0, 0, 0]));
    });
    const read = crossed.files.readFile("a", { maxBytes: 10 });
    const exec = crossed.first.exec({ argv: ["true"], cwd: "", env: {}, maxOutputBytes: 10 });
    expectUnavailable(await rejection(read), /'x' frame for a read/);
    expect((await within(exec)).exitCode).toBe(-1);
    await recovers(crossed, crossed.first);
  });

  it("an exec's result over its cap, or with a stdout length past its payload", async () => {
    const big = harness((r, q) => void r.send(reply(q.id, ["x", 0, 0, 5000], Buffer.alloc(5000))));
    const res = await within(big.first.exec({ argv: ["true"], cwd: "", env: {}, maxOutputBytes: 10 }));
    expect([res.exitCode, res.stdout.length]).toEqual([-1, 0]);
    await recovers(big, big.first);

    const lying = harness((r, q) => void r.send(reply(q.id, ["x", 0, 0, 50], Buffer.alloc(10))));
    expect((await within(lying.first.exec({ argv: ["true"], cwd: "", env: {}, maxOutputBytes: 100 }))).exitCode).toBe(-1);
    await recovers(lying, lying.first);
  });

  it("endless output of a spawned process that is never acknowledged", async () => {
    const h = harness((r, q) => {
      if (q.op !== "p") return;
      for (let i = 0; i < 64; i++) r.send(reply(q.id, ["1"], Buffer.allocUnsafe(64 << 10)));
    });
    const before = heldBytes();
    const p = spawnThroughRunner(Promise.resolve({ client: h.first }), { argv: ["yes"], cwd: "", env: {} });
    // Nobody reads stdout: an honest runner stops at the window (1 MiB) plus its last drain.
    expect(await within(p.exited)).toBe(null);
    expect(heldBytes() - before).toBeLessThan(8 * MiB);
    await recovers(h, h.first);
  });

  it("a slow drip never finishing a frame: the call's deadline ends the runner", async () => {
    let drip: NodeJS.Timeout | undefined;
    const h = harness((r, q) => {
      const bytes = reply(q.id, ["o", "f", 2, 1000, "a"]);
      let at = 0;
      // One byte every 50 ms: the frame would take longer than the deadline.
      drip = setInterval(() => at < bytes.length - 1 && r.send(bytes.subarray(at, ++at)), 50);
    });
    try {
      expectUnavailable(await rejection(h.files.stat("a")), /no answer within/);
    } finally {
      clearInterval(drip);
    }
    await recovers(h, h.first);
  });

  it("a wedged runner: a file call that is never answered fails at its deadline", async () => {
    const h = harness(() => undefined);
    expectUnavailable(await rejection(h.files.list("a")), /no answer within/);
    await recovers(h, h.first);
  });

  it("an exec whose kill is never answered resolves as timed out after the grace, on a fresh runner next", async () => {
    const h = harness(() => undefined);
    const res = await within(h.first.exec({ argv: ["sleep", "9"], cwd: "", env: {}, maxOutputBytes: 10, timeoutMs: 100 }));
    expect(res.timedOut).toBe(true);
    expect(h.runners[0]!.requests.map((q) => q.op)).toEqual(["x", "k"]);
    await recovers(h, h.first);
  });

  it("a runner that never says hello: `ready` fails at the deadline instead of waiting for ever", async () => {
    const runners: FakeRunner[] = [];
    const sup = new RunnerSupervisor(
      () => {
        const r = fakeRunner(honest, { hello: runners.length > 0 });
        runners.push(r);
        return r;
      },
      { callTimeoutMs: 500 },
    );
    sups.push(sup);
    const first = sup.get();
    expectUnavailable(await rejection(first.ready), /did not start.*hello/);
    await within(sup.get().ready);
    expect(runners.length).toBe(2);
  });

  it("an abrupt close mid-frame fails the call in flight", async () => {
    const h = harness((r, q) => {
      r.send(reply(q.id, ["o", "f", 2, 1000, "a"]).subarray(0, 9));
      r.close();
    });
    expectUnavailable(await rejection(h.files.stat("a")), /stopped/);
    await recovers(h, h.first);
  });

  it("garbage bytes, a frame before hello, an acknowledgement of stdin never sent", async () => {
    const junk = harness((r) => void r.send(Buffer.from("\x00\x00\x00\x07junk that is no frame at all")));
    expectUnavailable(await rejection(junk.files.stat("a")), /ended by the host/);
    await recovers(junk, junk.first);

    const acks = harness((r, q) => void (q.op === "p" && r.send(reply(q.id, ["a", 1 << 30]))));
    const p = spawnThroughRunner(Promise.resolve({ client: acks.first }), { argv: ["cat"], cwd: "", env: {} });
    expect(await within(p.exited)).toBe(null);
    await recovers(acks, acks.first);
  });

  it("a listing is bounded, and nothing thrown while handling a frame escapes", async () => {
    const h = harness((r, q) => void r.send(Buffer.concat([prefix(q.id, 1, 65 * MiB), Buffer.from("o")])));
    expectUnavailable(await rejection(h.files.list("a")), /over its/);
    await recovers(h, h.first);
    // Other calls' frames: a hello twice.
    const again = harness((r) => void r.send(reply(0, ["hello", "1", 42])));
    expectUnavailable(await rejection(again.files.stat("a")), /'hello' frame/);
    await recovers(again, again.first);
  });

  it("an honest exchange still passes every check", async () => {
    const h = harness(honest);
    expect(await within(h.files.readFile("a", { maxBytes: 2 }))).toEqual(Buffer.from("hi"));
    expect((await within(h.first.exec({ argv: ["true"], cwd: "", env: {}, maxOutputBytes: 2 }))).stdout.toString()).toBe("ok");
    expect(h.first.alive).toBe(true);
    await pause(10);
    expect(h.runners.length).toBe(1);
  });
});

describe("the transports' own framing is bounded", () => {
  it("Docker's demux passes a frame claiming 4 GiB through as it arrives, holding none of it, and stops at a header that is not Docker's", async () => {
    const src = new PassThrough();
    const out = new PassThrough();
    const err = new PassThrough();
    let got = 0;
    let errBytes = 0;
    out.on("data", (c: Buffer) => (got += c.length));
    err.on("data", (c: Buffer) => (errBytes += c.length));
    let broken = "";
    demuxBounded(src, out, err, (why) => (broken = why));
    const head = (kind: number, n: number) => Buffer.from([kind, 0, 0, 0, n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255]);
    src.write(Buffer.concat([head(2, 3), Buffer.from("abc")]));
    const before = heldBytes();
    src.write(head(1, 0xffffffff));
    for (let i = 0; i < 128; i++) src.write(Buffer.allocUnsafe(MiB));
    await pause(50);
    expect(got).toBe(128 * MiB);
    expect(errBytes).toBe(3);
    expect(heldBytes() - before).toBeLessThan(16 * MiB);
    expect(broken).toBe("");
    // A header with a stream number Docker never sends (after a whole frame) stops the demux.
    const src2 = new PassThrough();
    const out2 = new PassThrough();
    let got2 = "";
    out2.on("data", (c: Buffer) => (got2 += c.toString()));
    demuxBounded(src2, out2, new PassThrough(), (why) => (broken = why));
    src2.write(Buffer.concat([head(1, 2), Buffer.from("ok"), head(7, 1), Buffer.from("x"), head(1, 2), Buffer.from("no")]));
    await pause(10);
    expect(broken).toMatch(/header 07/);
    expect(got2).toBe("ok");
  });

  it("the text channel refuses a line that never ends instead of growing with it", async () => {
    const reader = textChannelReader(1 << 20);
    const errors: Error[] = [];
    reader.on("error", (e) => errors.push(e));
    let decoded = 0;
    reader.on("data", (c: Buffer) => (decoded += c.length));
    reader.write(`${Buffer.from("hello").toString("base64")}\n`);
    for (let i = 0; i < 8 && errors.length === 0; i++) reader.write("A".repeat(256 << 10));
    await pause(10);
    expect(errors.map((e) => e.message)).toEqual([expect.stringMatching(/over 1048576 characters/)]);
    expect(decoded).toBeLessThanOrEqual(5 + (3 << 18));
  });
});
