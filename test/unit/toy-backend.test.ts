import { mkdtempSync, rmSync } from "node:fs";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { backend, ToyDriver, ToyWorkspace, ToyWorkspaceManager } from "../fixtures/toy-backend/index.js";

/**
 * What README's "adding a backend" promises: a backend is schema.ts, driver.ts, sandbox.ts and an
 * index.ts calling defineBackend (plus one registry line, which this toy leaves out: the registry
 * is the product's closed list of kinds, so the test uses defineBackend's classes directly).
 */
const FILES = ["driver.ts", "index.ts", "sandbox.ts", "schema.ts"];
const base = mkdtempSync(path.join(os.tmpdir(), "agentws-toy-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));

type Tooled = { listTools(): { name: string; execute(input: unknown): Promise<unknown> }[] };
const tool = (ws: Tooled, name: string) => ws.listTools().find((t) => t.name === name)!;

describe("a toy backend built from exactly the files README lists", () => {
  it("is those four files", async () => {
    const dir = path.join(import.meta.dirname, "../fixtures/toy-backend");
    expect((await fs.readdir(dir)).sort()).toEqual(FILES);
  });

  it("runs a real workspace: initialize, write and read a file, a command, close", async () => {
    const ws = new ToyWorkspace({ basedir: base, workspaceId: "toy-one", userId: "u1" });
    expect(ws.workdir).toBe(path.join(base, "toy-one"));
    await ws.initialize();
    expect(ws.ensureOutcome).toBe("created");
    const sandbox = ws.getBackend();
    await sandbox.writeFile("notes/hello.txt", "hi from the toy\n");
    expect((await sandbox.readFile("notes/hello.txt")).toString()).toBe("hi from the toy\n");
    const r = await sandbox.exec(["sh", "-c", "cat notes/hello.txt && pwd"]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout.toString()).toBe(`hi from the toy\n${path.join(base, "toy-one")}\n`);
    expect(await tool(ws, "Bash").execute({ command: "echo made > notes/bash.txt" })).toMatchObject({ ok: true });
    expect(await fs.readFile(path.join(base, "toy-one", "notes/bash.txt"), "utf8")).toBe("made\n");
    // The reference's sandboxed layout: data/ and sessions/ from the start.
    expect(await fs.readdir(ws.workdir)).toEqual(expect.arrayContaining(["data", "sessions", "notes"]));
    await ws.close();
    expect(ws.isAlive).toBe(false);
    // The driver's owner check is the workspace's: another user is refused the same id.
    const other = new ToyWorkspace({ basedir: base, workspaceId: "toy-one", userId: "u2" });
    await expect(other.initialize()).rejects.toMatchObject({ code: "conflict", field: "userId" });
    const again = new ToyWorkspace({ basedir: base, workspaceId: "toy-one", userId: "u1" });
    await again.initialize();
    expect(again.ensureOutcome).toBe("reattached");
    expect((await again.getBackend().readFile("notes/bash.txt")).toString()).toBe("made\n");
    await again.close();
  });

  it("serves workspaces through its manager", async () => {
    await using m = new ToyWorkspaceManager({ basedir: path.join(base, "managed") });
    const ws = await m.getWorkspace("u1", "a1");
    expect(ws).toBeInstanceOf(ToyWorkspace);
    expect(ws.isAlive).toBe(true);
    await ws.getBackend().writeFile("f.txt", "x");
    expect(await fs.readFile(path.join(base, "managed", ws.workspaceId, "f.txt"), "utf8")).toBe("x");
    expect(await m.getWorkspace("u1", "a1")).toBe(ws);
    expect(await new ToyDriver({ kind: "toy", basedir: path.join(base, "managed") }).find(ws.workspaceId)).toMatchObject({
      userId: "u1",
      agentId: "a1",
      managedBy: "runtime",
    });
  });

  it("keeps the descriptor's fields on what defineBackend returns", () => {
    expect(backend).toMatchObject({ kind: "toy", label: "toy", defaults: { eviction: "close", sweep: "background" } });
    expect(() => new ToyWorkspaceManager({} as never)).toThrow(/basedir/);
    expect(backend.ManagerOptionsSchema.safeParse({ basedir: "/x", bogus: 1 }).success).toBe(false);
  });
});
