import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Sandbox } from "../../../sdk/sandbox.js";
import type { DriverFixture } from "./driver.contract.js";

/**
 * Behaviour every Sandbox handle owes, on a workspace created through the backend's driver: exec
 * (streams apart, stdin, exit codes), confinement (paths, cwd and links that leave the workspace are
 * refused), and each optional fast path giving what its fallback through the core methods gives.
 */
export function sandboxContract(fixture: DriverFixture): void {
  describe(`sandbox contract (${fixture.name})`, () => {
    const id = `sc-${randomBytes(3).toString("hex")}`;
    let sb: Sandbox;
    beforeAll(async () => {
      const d = fixture.driver();
      await d.create({ workspaceId: id, managedBy: "runtime" });
      sb = await d.connect(id);
    });
    afterAll(async () => {
      await sb?.close?.();
      await fixture.driver().destroy(id, { deleteData: true });
    });

    it("execs with stdout and stderr apart, stdin, and the exit code", async () => {
      const r = await sb.exec(["sh", "-c", "cat; echo err >&2; exit 3"], { stdin: "in\n" });
      expect(r.stdout.toString()).toBe("in\n");
      expect(r.stderr.toString()).toBe("err\n");
      expect(r.exitCode).toBe(3);
    });

    it("refuses paths, a cwd and a link that leave the workspace", async () => {
      await expect(sb.readFile("../../etc/passwd")).rejects.toMatchObject({ code: "path_escape" });
      await expect(sb.writeFile("/etc/agentws-escape", "x")).rejects.toMatchObject({ code: "path_escape" });
      await expect(sb.exec(["pwd"], { cwd: "../.." })).rejects.toMatchObject({ code: "path_escape" });
      await sb.exec(["ln", "-s", "/etc", "out"]);
      await expect(sb.readFile("out/hostname")).rejects.toMatchObject({ code: "path_escape" });
      await expect(sb.writeFile("out/agentws-escape", "x")).rejects.toMatchObject({ code: "path_escape" });
    });

    it("gives from each fast path what its fallback gives", async () => {
      await sb.mkdir("tree/sub");
      await sb.writeFile("tree/a.txt", "a");
      await sb.writeFile("tree/sub/b.txt", "b");
      if (sb.readDirTyped) {
        const fast = (await sb.readDirTyped("tree")).map((e) => `${e.name}:${e.type}`).sort();
        const slow = (await sb.list("tree")).map((e) => `${e.name}:${e.type}`).sort();
        expect(fast).toEqual(slow);
      }
      if (sb.copyTree) {
        await sb.copyTree("tree", "copy");
        expect((await sb.readFile("copy/sub/b.txt")).toString()).toBe("b");
        expect((await sb.list("copy")).map((e) => e.name).sort()).toEqual((await sb.list("tree")).map((e) => e.name).sort());
      }
      if (sb.createFile) {
        await sb.createFile("made.txt", "one");
        await sb.writeFile("written.txt", "one", { exclusive: true });
        expect((await sb.readFile("made.txt")).equals(await sb.readFile("written.txt"))).toBe(true);
        const [fast, slow] = await Promise.allSettled([sb.createFile("made.txt", "two"), sb.writeFile("written.txt", "two", { exclusive: true })]);
        expect(fast.status).toBe(slow.status);
      }
    });
  });
}
