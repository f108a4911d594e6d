import { describe, expect, it } from "vitest";
import { parseIndex } from "../../sdk/workspace/skill-index.js";

const entry = (hash: string, name = `n-${hash}`) => `{"hash": "${hash}", "skill_name": "${name}"}`;
const index = (pairs: Array<[string, string]>, mtime = "1.5") =>
  `{"skills_dir_mtime": ${mtime}, "skills": {${pairs.map(([k, v]) => `${JSON.stringify(k)}: ${v}`).join(", ")}}}`;
const order = (text: string) => [...parseIndex(text).entries].map(([dir, e]) => `${dir}=${e.hash}`);

// Expected values are what Python's json.loads gives (the reference reads .index with it):
// insertion order, a repeated key keeps its first position and its last value.
describe("parseIndex keeps the order and values Python's json.loads gives", () => {
  it("plain names, repeated names and __proto__", () => {
    expect(
      order(
        index([
          ["b", entry("1")],
          ["a", entry("2")],
          ["b", entry("3")],
          ["__proto__", entry("4")],
        ]),
      ),
    ).toEqual(["b=3", "a=2", "__proto__=4"]);
  });

  it("integer-like names stay where they were written (JavaScript objects would move them first)", () => {
    expect(
      order(
        index([
          ["z", entry("1")],
          ["10", entry("2")],
          ["2", entry("3")],
          ["a", entry("4")],
        ]),
      ),
    ).toEqual(["z=1", "10=2", "2=3", "a=4"]);
    expect(
      order(
        index([
          ["z", entry("1")],
          ["4294967294", entry("2")],
          ["0", entry("3")],
        ]),
      ),
    ).toEqual(["z=1", "4294967294=2", "0=3"]);
    expect(
      order(
        index([
          ["z", entry("1")],
          ["7", entry("2")],
          ["z", entry("3")],
          ["7", entry("4")],
        ]),
      ),
    ).toEqual(["z=3", "7=4"]);
  });

  it("names that only look numeric are ordinary keys", () => {
    expect(
      order(
        index([
          ["z", entry("1")],
          ["01", entry("2")],
          ["4294967295", entry("3")],
          ["-1", entry("4")],
          ["1.5", entry("5")],
        ]),
      ),
    ).toEqual(["z=1", "01=2", "4294967295=3", "-1=4", "1.5=5"]);
  });

  it("drops bad entries, keeps the mtime only when it is a finite number", () => {
    const text = index([
      ["ok", entry("1")],
      ["arr", "[1, 2]"],
      ["nul", "null"],
      ["num", "3"],
      ["nohash", '{"skill_name": "x"}'],
      ["badname", '{"hash": "h", "skill_name": 5}'],
    ]);
    expect(order(text)).toEqual(["ok=1"]);
    expect(parseIndex(text).mtime).toBe(1.5);
    expect(parseIndex(index([["ok", entry("1")]], '"soon"')).mtime).toBe(0);
    expect(parseIndex(index([["ok", entry("1")]], "1e400")).mtime).toBe(0);
    expect(parseIndex(index([["5", entry("1")]], "null")).mtime).toBe(0);
  });

  it("anything but a JSON object with a skills object gives no entries", () => {
    for (const text of ["[]", "null", "3", '"x"', "", "{", "NaN", '{"skills": []}', '{"skills": null}', '{"skills": {"1": [] }}', "skills: {a: 1}"])
      expect(parseIndex(text).entries.size, text).toBe(0);
    expect(parseIndex('{"skills_dir_mtime": 2, "skills": [1]}').mtime).toBe(2);
  });
});
