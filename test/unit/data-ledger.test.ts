import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { dataHomeOf, nextLeftovers, type DataHome } from "../../providers/ledger-state.js";
import { ledgerProviderImpl } from "../../providers/impl.js";
import { LocalDriver } from "../../sdk/backends/local/driver.js";
import { BubblewrapDriver } from "../../sdk/backends/bubblewrap/driver.js";

const dirs: string[] = [];
const tmp = () => {
  const d = realpathSync(mkdtempSync(join(tmpdir(), "agentws-ledger-")));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const ident = (workspaceId: string, userId?: string) => ({ workspaceId, userId, managedBy: "pulumi" as const });
const home = (id: string, basedir: string): DataHome => dataHomeOf({ workspaceId: id, backend: { kind: "local", basedir } })!;

describe("the data ledger's records", () => {
  it("keep only the plain fields saying where the files are, host paths normalised", () => {
    expect(dataHomeOf({ workspaceId: "w", userId: "u", backend: { kind: "local", basedir: "/srv/ws/" } })).toEqual({
      key: "local:/srv/ws/w",
      workspaceId: "w",
      userId: "u",
      backend: { kind: "local", basedir: "/srv/ws" },
    });
    const docker = dataHomeOf({ workspaceId: "w", backend: { kind: "docker", basedir: "/srv/d", env: { TOKEN: "s3cret" }, baseImage: "x:1" } });
    expect(docker).toEqual({ key: "docker:/srv/d/w", workspaceId: "w", backend: { kind: "docker", basedir: "/srv/d" } });
    expect(JSON.stringify(docker)).not.toContain("s3cret");
    expect(dataHomeOf({ workspaceId: "w", userId: "u", backend: { kind: "bubblewrap", basedir: "/srv/b" } })!.key).toBe("bubblewrap:/srv/b|u|w");
    // Files inside the backend object go with it: nothing to track.
    expect(dataHomeOf({ workspaceId: "w", backend: { kind: "docker" } })).toBeUndefined();
    expect(dataHomeOf({ workspaceId: "w", backend: { kind: "bubblewrap" } })).toBeUndefined();
    expect(dataHomeOf({ workspaceId: "w", backend: { kind: "e2b" } })).toBeUndefined();
    // A folder not known as a plain string is not guessed at (it would read as the default folder).
    expect(dataHomeOf({ workspaceId: "w", backend: { kind: "local", basedir: { promise: 1 } } })).toBeUndefined();
  });

  it("accumulate the homes that vanish with deleteData off, and drop one a workspace has again", () => {
    const [a, b, b2] = [home("a", "/srv/1"), home("b", "/srv/1"), home("b", "/srv/2")];
    // b moves to /srv/2, a is removed: both old folders are left behind.
    expect(nextLeftovers({ deleteData: false, homes: [a, b], leftovers: [] }, [b2]).map((h) => h.key)).toEqual(["local:/srv/1/a", "local:/srv/1/b"]);
    // With deleteData on their own deletes remove the files: nothing is left behind.
    expect(nextLeftovers({ deleteData: true, homes: [a, b], leftovers: [] }, [b2])).toEqual([]);
    // Earlier leftovers stay through later updates; b moving back to /srv/1 owns that folder again.
    expect(nextLeftovers({ deleteData: true, homes: [b2], leftovers: [a, b] }, [b]).map((h) => h.key)).toEqual(["local:/srv/1/a"]);
    // State written by something else is read leniently.
    expect(nextLeftovers({ homes: "garbage", leftovers: [{ key: 1 }] }, [])).toEqual([]);
  });

  it("the provider diffs on homes and deleteData only, and update returns full outputs", async () => {
    const a = home("a", "/srv/1");
    expect(
      (
        await ledgerProviderImpl.diff(
          "x",
          { deleteData: false, homes: [a], leftovers: [], __provider: "old" },
          { deleteData: false, homes: [a], __provider: "new" },
        )
      ).changes,
    ).toBe(false);
    expect((await ledgerProviderImpl.diff("x", { deleteData: false, homes: [a] }, { deleteData: true, homes: [a] })).changes).toBe(true);
    expect((await ledgerProviderImpl.update("x", { deleteData: false, homes: [a], leftovers: [] }, { deleteData: true, homes: [] })).outs).toEqual({
      deleteData: true,
      homes: [],
      leftovers: [a],
    });
  });
});

describe("destroy of a leftover (deleteData, leftover)", () => {
  it("local: removes a kept folder, refuses one a live record names, never follows a symlink", async () => {
    const basedir = tmp();
    const d = new LocalDriver({ kind: "local", basedir });
    await d.create(ident("gone"));
    writeFileSync(join(basedir, "gone", "f.txt"), "x");
    await d.destroy("gone");
    expect(existsSync(join(basedir, "gone", "f.txt"))).toBe(true);
    // Without deleteData, or for a folder already gone: nothing happens.
    await d.destroy("gone", { leftover: true });
    expect(existsSync(join(basedir, "gone"))).toBe(true);
    await d.destroy("never-there", { deleteData: true, leftover: true });
    // Taken over by a live workspace (here another driver over the same basedir, as another stack's): refused, kept.
    await new LocalDriver({ kind: "local", basedir }).create(ident("gone"));
    await expect(d.destroy("gone", { deleteData: true, leftover: true })).rejects.toMatchObject({ code: "conflict" });
    expect(existsSync(join(basedir, "gone", "f.txt"))).toBe(true);
    await d.destroy("gone");
    await d.destroy("gone", { deleteData: true, leftover: true });
    expect(readdirSync(basedir)).toEqual([]);
    // A symlink where the folder was is never followed.
    const elsewhere = tmp();
    writeFileSync(join(elsewhere, "keep.txt"), "keep");
    symlinkSync(elsewhere, join(basedir, "link"));
    await expect(d.destroy("link", { deleteData: true, leftover: true })).rejects.toMatchObject({ code: "path_escape" });
    expect(existsSync(join(elsewhere, "keep.txt"))).toBe(true);
  });

  it.skipIf(spawnSync("sh", ["-c", "command -v bwrap"]).status !== 0)(
    "bubblewrap: removes a kept folder and its empty user folder, refuses a live one",
    async () => {
      const basedir = tmp();
      const d = new BubblewrapDriver({ basedir });
      const made = await d.create(ident("kept", "u1"));
      writeFileSync(join(made.location.hostPath!, "f.txt"), "x");
      await d.destroy("kept");
      expect(existsSync(join(made.location.hostPath!, "f.txt"))).toBe(true);
      await d.create(ident("kept", "u1"));
      await expect(d.destroy("kept", { deleteData: true, leftover: true })).rejects.toMatchObject({ code: "conflict" });
      expect(existsSync(join(made.location.hostPath!, "f.txt"))).toBe(true);
      await d.destroy("kept");
      await d.destroy("kept", { deleteData: true, leftover: true });
      expect(readdirSync(basedir)).toEqual([]);
    },
  );

  it("the ledger's delete removes leftovers with deleteData on, keeps one in use and reports what it could not remove", async () => {
    const basedir = tmp();
    const d = new LocalDriver({ kind: "local", basedir });
    for (const id of ["a", "b", "c"]) {
      await d.create(ident(id));
      await d.destroy(id);
    }
    await d.create(ident("b"));
    const leftovers = ["a", "b", "c"].map((id) => home(id, basedir));
    // deleteData off: kept.
    await ledgerProviderImpl.delete("x", { deleteData: false, leftovers });
    expect(readdirSync(basedir).sort()).toEqual([".agentws", "a", "b", "c"]);
    // c cannot be removed safely: the delete fails naming it; a is removed, b (live) kept.
    rmSync(join(basedir, "c"), { recursive: true });
    mkdirSync(join(basedir, "elsewhere"));
    symlinkSync(join(basedir, "elsewhere"), join(basedir, "c"));
    await expect(ledgerProviderImpl.delete("x", { deleteData: true, leftovers })).rejects.toThrow(
      new RegExp(`workspace 'c' \\(local, basedir ${basedir}\\).*${join(basedir, "c")}`),
    );
    expect(readdirSync(basedir).sort()).toEqual([".agentws", "b", "c", "elsewhere"]);
  });
});
