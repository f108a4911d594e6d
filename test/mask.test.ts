// One masker for the CLI output, preview comments and MCP error messages.
import { describe, expect, it } from "vitest";
import { maskSecrets } from "../sdk/util/mask.js";

describe("maskSecrets", () => {
  it("masks a secret that contains another whole, longest first, in any order given", () => {
    const text = "token=abcdefgh, short=abcd";
    expect(maskSecrets(text, ["abcd", "abcdefgh"])).toBe("token=[secret], short=[secret]");
    expect(maskSecrets(text, ["abcdefgh", "abcd"], "***")).toBe("token=***, short=***");
  });

  it("leaves values under 4 characters alone, and text without secrets unchanged", () => {
    expect(maskSecrets("a b abc", ["a", "abc"])).toBe("a b abc");
    expect(maskSecrets("nothing here", [])).toBe("nothing here");
  });
});
