// One masker for the CLI output, preview comments and MCP error messages.
import { describe, expect, it } from "vitest";
import { maskSecrets, urlSecrets } from "../../sdk/util/mask.js";

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

  it("finds user info and token-like query values in a URL, raw and decoded", () => {
    const secrets = urlSecrets("https://bobby:p%40ss-word@h.example/mcp?api_key=K1234&page=2&X-Amz-Signature=abc%2Bdef&q=plain");
    expect(secrets).toEqual(expect.arrayContaining(["bobby", "p%40ss-word", "p@ss-word", "K1234", "abc%2Bdef", "abc+def"]));
    expect(secrets).not.toContain("2");
    expect(secrets).not.toContain("plain");
    expect(maskSecrets("GET https://bobby:p@ss-word@h.example/mcp?api_key=K1234", secrets, "***")).toBe("GET https://***:***@h.example/mcp?api_key=***");
    expect(urlSecrets("not a url")).toEqual([]);
  });
});
