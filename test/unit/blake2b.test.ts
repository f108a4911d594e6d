import { randomBytes } from "node:crypto";
import { blake2b } from "@noble/hashes/blake2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";
import { describe, expect, it } from "vitest";
import { blake2bHex } from "../../sdk/util/blake2b.js";
import { IsolationPolicy, assignWorkspaceId, newWorkspaceId } from "../../sdk/manager/ids.js";

const noble = (text: string, bytes: number) => bytesToHex(blake2b(utf8ToBytes(text), { dkLen: bytes }));

/** A string of `n` UTF-16 units mixing ASCII, 2- and 3-byte characters, astral pairs and lone surrogates. */
function randomText(n: number): string {
  const raw = randomBytes(n * 2);
  let s = "";
  for (let i = 0; i < n; i++) {
    const r = raw[2 * i]!;
    if (r < 150) s += String.fromCharCode(32 + (raw[2 * i + 1]! % 95));
    else if (r < 200) s += String.fromCharCode(0x80 + raw[2 * i + 1]! * 7);
    else if (r < 240) s += String.fromCharCode(0x800 + raw[2 * i + 1]! * 200);
    else if (r < 250) s += "\u{1F600}";
    else s += String.fromCharCode(0xd800 + raw[2 * i + 1]!); // lone surrogate
  }
  return s;
}

describe("blake2bHex (specialised BLAKE2b)", () => {
  it("matches RFC 7693 and the reference's vectors", () => {
    // RFC 7693 appendix A: BLAKE2b-512("abc").
    expect(blake2bHex("abc", 64)).toBe(
      "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d17d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923",
    );
    expect(blake2bHex("", 64)).toBe(
      "786a02f742015903c6c6fd852552d272912f4740e15847618a86e217f71f5419d25e1031afee585313896444934eb04b903a685b1448b755d56f701afe9be2ce",
    );
    expect(blake2bHex("u1::a1", 8)).toBe("4bf1218b645ff727");
    expect(blake2bHex("user::u1", 8)).toBe("48ea3da4179df93b");
    expect(blake2bHex("u", 16)).toBe("13d650693b19482ad7061da30b45bfbc");
  });

  it("agrees with @noble/hashes on random inputs of every length across several blocks and every digest length", () => {
    // Lengths around the block boundaries (128, 256, 384 bytes) matter most: the last block is special.
    for (let n = 0; n <= 400; n++) {
      const text = randomText(n);
      for (const bytes of [1, 8, 16, 32, 33, 63, 64]) expect(blake2bHex(text, bytes), `length ${n}, digest ${bytes}`).toBe(noble(text, bytes));
    }
    for (const n of [1000, 4096, 10_000]) {
      const text = randomText(n);
      expect(blake2bHex(text, 8)).toBe(noble(text, 8));
    }
    // Exact multiples of the block size in bytes (ASCII, so units = bytes).
    for (const n of [127, 128, 129, 255, 256, 257, 1024]) expect(blake2bHex("x".repeat(n), 64)).toBe(noble("x".repeat(n), 64));
  });

  it("gives the same answer after a long input (its shared buffers carry nothing over)", () => {
    const before = blake2bHex("u1::a1", 8);
    blake2bHex(randomText(50_000), 64);
    expect(blake2bHex("u1::a1", 8)).toBe(before);
    expect(blake2bHex("", 8)).toBe(noble("", 8));
  });

  it("refuses digest lengths BLAKE2b does not have", () => {
    for (const bad of [0, 65, 1.5, -1, Number.NaN]) expect(() => blake2bHex("x", bad)).toThrow(/digest length must be 1-64/);
  });
});

describe("memoised and pooled ids", () => {
  it("assignWorkspaceId gives the hash on first and later calls, for many owners (past the memo's bound)", () => {
    for (let round = 0; round < 2; round++)
      for (let i = 0; i < 60_000; i += 997) {
        const owner = { userId: `user-${i}`, agentId: `agent-${i % 13}` };
        expect(assignWorkspaceId(owner, IsolationPolicy.PER_AGENT)).toBe(noble(`user-${i}::agent-${i % 13}`, 8));
        expect(assignWorkspaceId(owner, IsolationPolicy.PER_USER)).toBe(noble(`user::user-${i}`, 8));
      }
    // Enough distinct owners to empty the memo at least once; answers stay right after.
    for (let i = 0; i < 60_000; i++) assignWorkspaceId({ userId: `u${i}`, agentId: "a" });
    expect(assignWorkspaceId({ userId: "u1", agentId: "a1" })).toBe("4bf1218b645ff727");
    expect(assignWorkspaceId({ userId: "u59999", agentId: "a" })).toBe(noble("u59999::a", 8));
  });

  it("a memoised owner is still checked: an invalid user id never gets an id", () => {
    expect(() => assignWorkspaceId({ userId: "a::b", agentId: "c" })).toThrow(/userId/);
    expect(() => assignWorkspaceId({ userId: 7 as unknown as string, agentId: "c" })).toThrow(/userId: must be a string/);
    // Memoised under the strings "7" and "5": other types must still be refused.
    assignWorkspaceId({ userId: "7", agentId: "5" });
    assignWorkspaceId({ userId: "7", agentId: "5" }, IsolationPolicy.PER_USER);
    expect(() => assignWorkspaceId({ userId: "7", agentId: 5 as unknown as string })).toThrow(/agentId: must be a string/);
    expect(() => assignWorkspaceId({ userId: 7 as unknown as string, agentId: "5" })).toThrow(/userId: must be a string/);
    expect(() => assignWorkspaceId({ userId: 7 as unknown as string, agentId: "5" }, IsolationPolicy.PER_USER)).toThrow(/userId: must be a string/);
  });

  it("newWorkspaceId is uuid4 hex: version 4, RFC 4122 variant, no repeats across pool refills", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const id = newWorkspaceId();
      expect(id).toMatch(/^[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}$/);
      seen.add(id);
    }
    expect(seen.size).toBe(2000);
  });
});
