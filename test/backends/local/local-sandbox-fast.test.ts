// LocalSandbox's fast paths (synchronous bounded calls, createFile, copyTree, readDirTyped,
// pooled encode buffers): same results and the same confinement as the plain Sandbox methods.
import { execFileSync } from "node:child_process";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { LocalSandbox } from "../../../sdk/kit/host-sandbox.js";

let base: string;
let root: string;
let outside: string;
let sb: LocalSandbox;

beforeEach(async () => {
  base ??= await fs.mkdtemp(path.join(os.tmpdir(), "agentws-lsf-"));
  const dir = await fs.mkdtemp(path.join(base, "case-"));
  root = path.join(dir, "ws");
  outside = path.join(dir, "outside");
  await fs.mkdir(outside, { recursive: true });
  await fs.writeFile(path.join(outside, "secret.txt"), "secret");
  sb = new LocalSandbox(root);
  await sb.mkdir("");
});
afterAll(async () => {
  if (base) await fs.rm(base, { recursive: true, force: true });
});

const host = (rel: string) => path.join(root, rel);
const code = async (p: Promise<unknown>) =>
  p.then(
    () => "ok",
    (e: { code?: string }) => e.code,
  );

describe("createFile", () => {
  it("creates the file with parents, mode 0644 (umask applied) and refuses an existing name", async () => {
    await sb.createFile("sessions/s1/a.txt", "héllo");
    expect(await fs.readFile(host("sessions/s1/a.txt"), "utf8")).toBe("héllo");
    expect((await fs.stat(host("sessions/s1/a.txt"))).mode & 0o777).toBe(0o644 & ~process.umask());
    expect(await code(sb.createFile("sessions/s1/a.txt", "other"))).toBe("conflict");
    expect(await fs.readFile(host("sessions/s1/a.txt"), "utf8")).toBe("héllo");
  });

  it("never writes through a symlink: a final link is an existing name, a parent link out of the root is refused", async () => {
    await fs.symlink(path.join(outside, "new.txt"), host("link.txt"));
    expect(await code(sb.createFile("link.txt", "x"))).toBe("conflict");
    await fs.symlink(outside, host("out"));
    expect(await code(sb.createFile("out/new.txt", "x"))).toBe("path_escape");
    await expect(fs.stat(path.join(outside, "new.txt"))).rejects.toThrow();
  });

  it("large content goes through the atomic path and arrives whole, leaving no temp file", async () => {
    const big = "0123456789abcdef".repeat(140_000) + "é"; // over CREATE_SYNC_LIMIT (2 MiB)
    await sb.createFile("big.txt", big);
    expect(await fs.readFile(host("big.txt"), "utf8")).toBe(big);
    expect(await fs.readdir(root)).toEqual(["big.txt"]);
    expect(await code(sb.createFile("big.txt", big))).toBe("conflict");
  });
});

describe("large string writes (pooled encode buffers)", () => {
  it("concurrent writes and appends of distinct large strings each land intact", async () => {
    const texts = Array.from({ length: 8 }, (_, i) => `${String.fromCharCode(65 + i)}${"x€".repeat(60_000 + i * 10_000)}\n`);
    await Promise.all([
      ...texts.map((t, i) => sb.writeFile(`w/${i}.txt`, t)),
      ...texts.map((t, i) => sb.writeFile(`x/${i}.txt`, t, { exclusive: true })),
      ...texts.map((t, i) => sb.appendFile(`a/${i}.txt`, t)),
    ]);
    for (const [i, t] of texts.entries()) {
      expect(await fs.readFile(host(`w/${i}.txt`), "utf8")).toBe(t);
      expect(await fs.readFile(host(`x/${i}.txt`), "utf8")).toBe(t);
      expect(await fs.readFile(host(`a/${i}.txt`), "utf8")).toBe(t);
    }
    // Lone surrogates become U+FFFD, as Buffer.from would make them.
    const odd = `${"a".repeat(70_000)}\ud800b`;
    await sb.writeFile("odd.txt", odd);
    expect(await fs.readFile(host("odd.txt"))).toEqual(Buffer.from(odd, "utf8"));
  });
});

describe("readFile", () => {
  it("reads small and large files, enforces maxBytes, and refuses a symlink out of the root", async () => {
    await fs.writeFile(host("small.txt"), "s");
    const big = Buffer.alloc(600_000, 7);
    await fs.writeFile(host("big.bin"), big);
    expect((await sb.readFile("small.txt")).toString()).toBe("s");
    expect((await sb.readFile("big.bin")).equals(big)).toBe(true);
    expect(await code(sb.readFile("big.bin", { maxBytes: 1000 }))).toBe("too_large");
    expect(await code(sb.readFile("missing.txt"))).toBe("not_found");
    await fs.mkdir(host("d"));
    expect(await code(sb.readFile("d"))).toBe("invalid_argument");
    await fs.symlink(path.join(outside, "secret.txt"), host("leak.txt"));
    expect(await code(sb.readFile("leak.txt"))).toBe("path_escape");
  });

  it("a FIFO left in the workspace is refused, without blocking, as not a regular file", async () => {
    execFileSync("mkfifo", [host("pipe")]);
    // A blocking open or read would never return: no writer ever comes.
    await expect(sb.readFile("pipe")).rejects.toMatchObject({ code: "invalid_argument", message: expect.stringMatching(/FIFO/) });
  }, 10_000);
});

describe("copyTree", () => {
  it("copies files and folders, skips excluded names at every depth, links and special files; files get mode 0644", async () => {
    await fs.mkdir(host("src/skill/sub"), { recursive: true });
    await fs.writeFile(host("src/.index"), "{}");
    await fs.writeFile(host("src/.adding-x"), "leftover");
    await fs.writeFile(host("src/skill/SKILL.md"), "md");
    await fs.writeFile(host("src/skill/run.sh"), "#!/bin/sh\n", { mode: 0o755 });
    await fs.writeFile(host("src/skill/sub/.hidden"), "h");
    await fs.writeFile(host("src/skill/sub/data.bin"), Buffer.alloc(300_000, 1));
    await fs.symlink(path.join(outside, "secret.txt"), host("src/skill/leak"));
    execFileSync("mkfifo", [host("src/skill/pipe")]);
    await sb.copyTree("src", "dst", { exclude: (n) => n.startsWith(".") && n !== ".index" });
    const list = async (d: string, prefix = ""): Promise<string[]> => {
      const out: string[] = [];
      for (const e of await fs.readdir(host(d), { withFileTypes: true })) {
        out.push(`${prefix}${e.name}${e.isDirectory() ? "/" : ""}`);
        if (e.isDirectory()) out.push(...(await list(`${d}/${e.name}`, `${prefix}${e.name}/`)));
      }
      return out.sort();
    };
    expect(await list("dst")).toEqual([".index", "skill/", "skill/SKILL.md", "skill/run.sh", "skill/sub/", "skill/sub/data.bin"]);
    expect(await fs.readFile(host("dst/skill/sub/data.bin"))).toEqual(Buffer.alloc(300_000, 1));
    expect((await fs.stat(host("dst/skill/run.sh"))).mode & 0o777).toBe(0o644 & ~process.umask());
  });

  it("a missing source gives an empty folder; an existing destination or a source through a link out of the root is refused", async () => {
    await sb.copyTree("nothing", "empty");
    expect(await fs.readdir(host("empty"))).toEqual([]);
    expect(await code(sb.copyTree("nothing", "empty"))).toBe("conflict");
    await fs.symlink(outside, host("out"));
    expect(await code(sb.copyTree("out", "stolen"))).toBe("path_escape");
    expect(await code(sb.copyTree("", "out/x"))).toBe("path_escape");
  });
});

describe("readDirTyped and stat", () => {
  it("report the same names and types as list", async () => {
    await fs.mkdir(host("d/sub"), { recursive: true });
    await fs.writeFile(host("d/f"), "x");
    await fs.symlink("f", host("d/l"));
    execFileSync("mkfifo", [host("d/p")]);
    const typed = (await sb.readDirTyped("d")).sort((a, b) => a.name.localeCompare(b.name));
    expect(typed).toEqual([
      { name: "f", type: "file" },
      { name: "l", type: "symlink" },
      { name: "p", type: "other" },
      { name: "sub", type: "dir" },
    ]);
    const listed = (await sb.list("d")).map((e) => ({ name: e.name, type: e.type })).sort((a, b) => a.name.localeCompare(b.name));
    expect(listed).toEqual(typed);
    expect(await code(sb.readDirTyped("missing"))).toBe("not_found");
    expect((await sb.stat("d/l"))?.type).toBe("symlink");
    expect((await sb.stat("d/f"))?.size).toBe(1);
    expect(await sb.stat("d/f/under-a-file")).toBeNull();
    expect((await sb.stat(""))?.type).toBe("dir");
  });
});
