// offloadContext copies the whole message list in one go; unusual inputs still fail per message,
// naming it, exactly as the message-by-message copy did, and the caller's objects are never changed.
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalSandbox } from "../../sdk/kit/host-sandbox.js";
import { silentLogger } from "../../sdk/logger.js";
import { Offloader, type Message } from "../../sdk/workspace/offload.js";

let base: string;
beforeAll(async () => {
  base = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-ctx-"));
});
afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});
const offloader = async () => {
  const root = await fs.mkdtemp(path.join(base, "ws-"));
  return { root, off: new Offloader(new LocalSandbox(root), silentLogger) };
};
const png = Buffer.from("png bytes").toString("base64");

describe("offloadContext copies", () => {
  it("moves nested payloads, leaves the input untouched, writes one line per message", async () => {
    const { root, off } = await offloader();
    const shared = { type: "data", id: "d1", source: { type: "base64", data: png, media_type: "image/png" } };
    const messages = [
      { role: "user", content: [{ type: "text", text: "a" }, shared] },
      { role: "assistant", content: [{ type: "tool_result", id: "t", output: [shared], metadata: { keep: shared } }] },
      { role: "user", content: "plain" },
    ] as unknown as Message[];
    const before = JSON.stringify(messages);
    await off.offloadContext("s", messages);
    expect(JSON.stringify(messages)).toBe(before);
    const lines = (await fs.readFile(path.join(root, "sessions/s/context.jsonl"), "utf8"))
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(3);
    expect(lines[0].content[1].source.type).toBe("url");
    expect(lines[1].content[0].output[0].source.type).toBe("url");
    // metadata is not searched: its block stays inline.
    expect(lines[1].content[0].metadata.keep.source.type).toBe("base64");
    expect(lines[2].content).toBe("plain");
    expect(await fs.readdir(path.join(root, "data"))).toHaveLength(1);
  });

  it("names the first message that is not an object, holes in a sparse list included", async () => {
    const { off } = await offloader();
    const ok = { role: "user", content: "x" };
    await expect(off.offloadContext("s", [ok, null] as unknown as Message[])).rejects.toThrow(/messages\[1\]: must be a message object/);
    const sparse = [ok, ok] as unknown as Message[];
    delete (sparse as unknown as Record<number, unknown>)[1];
    await expect(off.offloadContext("s", sparse)).rejects.toThrow(/messages\[1\]: must be a message object/);
    await expect(off.offloadContext("s", [ok, [ok]] as unknown as Message[])).rejects.toThrow(/messages\[1\]/);
  });

  it("names the message holding something that cannot be copied, before a later non-object", async () => {
    const { root, off } = await offloader();
    const withData = { role: "user", content: [{ type: "data", source: { type: "base64", data: png, media_type: "image/png" } }] };
    const bad = { role: "user", content: [{ type: "text", text: "x", fn: () => 1 }] };
    await expect(off.offloadContext("s", [withData, bad, 7] as unknown as Message[])).rejects.toThrow(/messages\[1\]: must be plain JSON data/);
    // Nothing is appended when a message fails.
    await expect(fs.stat(path.join(root, "sessions/s/context.jsonl"))).rejects.toThrow();
  });

  it("refuses cycles and bigints naming the message, stores nothing, and writes toJSON values as JSON would", async () => {
    const { root, off } = await offloader();
    const withData = { role: "user", content: [{ type: "data", source: { type: "base64", data: png, media_type: "image/png" } }] };
    const cyclic: Record<string, unknown> = { role: "user", content: "x" };
    cyclic.metadata = { self: cyclic };
    await expect(off.offloadContext("s", [withData, cyclic] as unknown as Message[])).rejects.toThrow(/messages\[1\]: must be plain JSON data.*cycle/);
    await expect(off.offloadContext("s", [{ role: "user", content: "x", metadata: { n: 1n } }] as unknown as Message[])).rejects.toThrow(
      /messages\[0\].*bigint/,
    );
    // The payload of messages[0] is not stored either: every message is checked before any work.
    await expect(fs.stat(path.join(root, "data"))).rejects.toThrow();
    await expect(fs.stat(path.join(root, "sessions/s/context.jsonl"))).rejects.toThrow();
    const when = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));
    const shared = { k: "v" };
    await off.offloadContext("s", [{ role: "user", content: "x", metadata: { when, a: shared, b: shared } }] as unknown as Message[]);
    const [line] = (await fs.readFile(path.join(root, "sessions/s/context.jsonl"), "utf8"))
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    // A shared (not cyclic) object is fine; a Date is written through its toJSON.
    expect(line.metadata).toEqual({ when: "2026-01-02T03:04:05.000Z", a: { k: "v" }, b: { k: "v" } });
  });
});
