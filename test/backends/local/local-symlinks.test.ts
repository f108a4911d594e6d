// LocalSandbox follows symlinks that stay inside the root (relative, absolute, chains, "..")
// by walking their targets with descriptors, and refuses the rest: the same outcomes as the
// name-based resolution (realpath) it replaced.
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalSandbox } from "../../../sdk/kit/host-sandbox.js";

let base: string;
let root: string;
let sb: LocalSandbox;
const host = (rel: string) => path.join(root, rel);
const outcome = async (p: Promise<unknown>) =>
  p.then(
    (v) => (Buffer.isBuffer(v) ? v.toString() : v),
    (e: { code?: string }) => `error:${e.code}`,
  );

beforeAll(async () => {
  base = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-links-"));
  root = path.join(base, "ws");
  await fs.mkdir(path.join(base, "outside"), { recursive: true });
  await fs.writeFile(path.join(base, "outside", "f.txt"), "outside");
  await fs.mkdir(host("a/b"), { recursive: true });
  await fs.writeFile(host("a/b/f.txt"), "inside");
  await fs.symlink("a/b", host("rel"));
  await fs.symlink(host("a"), host("abs"));
  await fs.symlink("rel", host("chain"));
  await fs.symlink("../a/b/f.txt", host("a/up-file"));
  await fs.symlink("b/../b/f.txt", host("a/dots"));
  await fs.symlink("../outside", host("escape"));
  await fs.symlink(path.join(base, "outside"), host("escape-abs"));
  await fs.symlink("a/../../outside/f.txt", host("escape-dots"));
  await fs.symlink("missing/x", host("dangling"));
  await fs.symlink("loop2", host("loop1"));
  await fs.symlink("loop1", host("loop2"));
  await fs.symlink("f.txt", host("a/b/final"));
  sb = new LocalSandbox(root);
});
afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

describe("symlinks inside and outside the root", () => {
  it("reads through links that stay inside", async () => {
    for (const p of ["rel/f.txt", "abs/b/f.txt", "chain/f.txt", "a/up-file", "a/dots", "a/b/final", "chain/final"])
      expect(await outcome(sb.readFile(p)), p).toBe("inside");
    expect((await sb.list("chain")).map((e) => e.name).sort()).toEqual(["f.txt", "final"]);
    expect((await sb.readDirTyped("abs/b")).map((e) => e.name).sort()).toEqual(["f.txt", "final"]);
  });

  it("refuses links that leave the root, dangle or loop", async () => {
    for (const p of ["escape/f.txt", "escape-abs/f.txt", "escape-dots", "dangling", "loop1", "loop1/x"])
      expect(await outcome(sb.readFile(p)), p).toBe("error:path_escape");
    expect(await outcome(sb.list("escape"))).toBe("error:path_escape");
    expect(await outcome(sb.writeFile("escape/new.txt", "x"))).toBe("error:path_escape");
    await expect(fs.stat(path.join(base, "outside", "new.txt"))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("writes through a folder link inside, never through a final link", async () => {
    await sb.writeFile("rel/new.txt", "via link");
    expect(await fs.readFile(host("a/b/new.txt"), "utf8")).toBe("via link");
    expect(await outcome(sb.writeFile("a/b/final", "x"))).toBe("error:path_escape");
    expect(await fs.readFile(host("a/b/f.txt"), "utf8")).toBe("inside");
    expect(await sb.stat("rel")).toMatchObject({ type: "symlink" });
    expect(await sb.stat("rel/f.txt")).toMatchObject({ type: "file", size: 6 });
  });

  it("removes a link, not what it points to", async () => {
    await fs.symlink("a/b", host("to-remove"));
    await sb.remove("to-remove");
    expect(await outcome(sb.readFile("a/b/f.txt"))).toBe("inside");
    await expect(fs.lstat(host("to-remove"))).rejects.toMatchObject({ code: "ENOENT" });
  });
});
