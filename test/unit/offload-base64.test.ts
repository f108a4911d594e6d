import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { checkBase64 } from "../../sdk/workspace/offload.js";

/** The rule as first written, with regexes: the one-pass check must agree with it on every input. */
function regexRule(text: string): string | "invalid" {
  const compact = text.replace(/\s+/g, "");
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.replace(/=+$/, "").length % 4 === 1) return "invalid";
  return compact;
}
const fast = (text: string): string | "invalid" => {
  try {
    return checkBase64(text);
  } catch {
    return "invalid";
  }
};

describe("checkBase64", () => {
  it("agrees with the regex rule on hand-picked edge cases", () => {
    const cases = [
      "",
      "=",
      "==",
      "===",
      "A",
      "AB",
      "ABC",
      "ABCD",
      "AB==",
      "ABC=",
      "A===",
      "AB=C",
      "AB= =",
      " AB\n==\t",
      "AB==\n",
      "A\u00a0B\u2028C\uFEFFD",
      "AB-_",
      "AB\u0000",
      "ABCD€",
      "ABCDE",
      "ABCDEF=",
      "+/+/",
      "\n\r\t\v\f ",
    ];
    for (const c of cases) expect(fast(c), JSON.stringify(c)).toBe(regexRule(c));
  });

  it("agrees with the regex rule on random text over a small alphabet of valid, padding, space and bad characters", () => {
    const alphabet = ["A", "z", "0", "+", "/", "=", "=", " ", "\n", "\u3000", "-", "é", "\ud83d"];
    for (let n = 0; n < 5000; n++) {
      const r = randomBytes(1 + (n % 24));
      const text = [...r].map((b) => alphabet[b % alphabet.length]).join("");
      expect(fast(text), JSON.stringify(text)).toBe(regexRule(text));
    }
  });

  it("accepts real base64 of every length, with and without line breaks", () => {
    for (let n = 0; n < 200; n++) {
      const b64 = randomBytes(n).toString("base64");
      expect(fast(b64)).toBe(b64);
      expect(fast(b64.replace(/=+$/, ""))).toBe(b64.replace(/=+$/, ""));
      const wrapped = b64.replace(/(.{8})/g, "$1\n");
      expect(fast(wrapped)).toBe(b64);
      expect(Buffer.from(fast(wrapped), "base64")).toEqual(Buffer.from(b64, "base64"));
    }
  });
});
