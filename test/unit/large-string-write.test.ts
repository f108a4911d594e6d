import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LocalSandbox } from "../../sdk/kit/host-sandbox.js";

// Strings over 8 Mi characters are encoded piece by piece as they are written (no second full
// copy in memory); the bytes on disk must be exactly Buffer.from(text), pairs at piece edges included.
describe("writing a large string", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "agentws-bigstr-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const unit = "a".repeat(1024 * 1024 - 1) + "😀";
  const text = unit.repeat(10) + "é∑" + "z".repeat(17);

  it("writeFile and createFile give the exact UTF-8 bytes, a surrogate pair on every piece boundary", async () => {
    const sb = new LocalSandbox(dir);
    await sb.writeFile("w.txt", text);
    await sb.createFile("c.txt", text);
    const want = Buffer.from(text, "utf8");
    expect(Buffer.compare(readFileSync(path.join(dir, "w.txt")), want)).toBe(0);
    expect(Buffer.compare(readFileSync(path.join(dir, "c.txt")), want)).toBe(0);
    await expect(sb.createFile("c.txt", text)).rejects.toMatchObject({ code: "conflict" });
  });
});
