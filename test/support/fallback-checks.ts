import { expect } from "vitest";
import type { Sandbox } from "../../sdk/sandbox.js";

/**
 * The file operations of a sandbox on its no-python3 fallback (kit/shell-files.ts): exact bytes, and
 * every refusal the runner would give (links leading out, a FIFO, caps, exclusive create, the root).
 */
export async function expectFallbackFileOps(h: Sandbox, dir = "fallback"): Promise<void> {
  const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  await h.writeFile(`${dir}/all.bin`, all);
  expect((await h.readFile(`${dir}/all.bin`)).equals(all)).toBe(true);
  expect((await h.exec(["cat", `${dir}/all.bin`])).stdout.equals(all)).toBe(true);
  await h.appendFile(`${dir}/all.bin`, "+");
  expect((await h.stat(`${dir}/all.bin`))?.size).toBe(257);
  await h.rename(`${dir}/all.bin`, `${dir}/moved.bin`);
  expect((await h.list(dir)).map((e) => e.name)).toEqual(["moved.bin"]);
  expect((await h.exec(["sh", "-c", `ln -s /etc/passwd ${dir}/leak; ln -s /etc ${dir}/out; mkfifo ${dir}/pipe`])).exitCode).toBe(0);
  await expect(h.readFile(`${dir}/leak`)).rejects.toMatchObject({ code: "path_escape" });
  await expect(h.writeFile(`${dir}/out/evil`, "x")).rejects.toMatchObject({ code: "path_escape" });
  await expect(h.readFile(`${dir}/pipe`)).rejects.toMatchObject({ code: "invalid_argument" });
  await expect(h.readFile(`${dir}/moved.bin`, { maxBytes: 10 })).rejects.toMatchObject({ code: "too_large" });
  await expect(h.writeFile(`${dir}/moved.bin`, "x", { exclusive: true })).rejects.toMatchObject({ code: "conflict" });
  await h.mkdir(`${dir}/a/b`);
  expect((await h.stat(`${dir}/a/b`))?.type).toBe("dir");
  await h.remove(`${dir}/a`);
  expect(await h.stat(`${dir}/a`)).toBeNull();
  await expect(h.remove("")).rejects.toMatchObject({ code: "path_escape" });
}
