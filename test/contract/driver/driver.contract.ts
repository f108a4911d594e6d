import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { collectGarbage } from "../../../sdk/kit/gc.js";
import type { Driver, WorkspaceIdentity } from "../../../sdk/contract/driver.js";

/**
 * (In a folder of its own: test/contract/*.contract.ts are workspace suites that runContractSuites
 * globs; this one takes a DriverFixture.)
 *
 * A backend's Driver under test. `driver()` builds a new driver over the same storage each call
 * (a "restarted process"); `elsewhere()` one over storage of its own (another basedir / stack).
 */
export interface DriverFixture {
  name: string;
  driver(): Driver;
  elsewhere(): Driver;
  /** False where files live in the backend object itself (a cloud sandbox): destroying it removes them. */
  destroyKeepsData?: boolean;
}

const ident = (workspaceId: string, extra: Partial<WorkspaceIdentity> = {}): WorkspaceIdentity => ({ workspaceId, managedBy: "runtime", ...extra });

/** Behaviour every Driver owes, the same on every backend: adoption, races, lifecycle, restart, listing. */
export function driverContract(fixture: DriverFixture): void {
  describe(`driver contract (${fixture.name})`, () => {
    const run = randomBytes(3).toString("hex");
    const made = new Set<string>();
    const id = (name: string) => {
      const w = `dc-${run}-${name}`;
      made.add(w);
      return w;
    };
    afterAll(async () => {
      const d = fixture.driver();
      for (const w of made) await d.destroy(w, { deleteData: true }).catch(() => undefined);
    });

    it("create adopts what exists, and N racing creates end with one object", async () => {
      const w = id("race");
      const descriptions = await Promise.all([0, 1, 2, 3].map(() => fixture.driver().create(ident(w, { userId: "u1" }))));
      expect(new Set(descriptions.map((d) => d.workspaceId))).toEqual(new Set([w]));
      const again = await fixture.driver().create(ident(w, { userId: "u1" }));
      expect(again.workspaceId).toBe(w);
      const listed = (await fixture.driver().list()).filter((d) => d.workspaceId === w);
      expect(listed).toHaveLength(1);
    });

    it("pauses and resumes (idempotently), and a restarted driver finds the object with its owner", async () => {
      const w = id("life");
      await fixture.driver().create(ident(w, { userId: "u-life", agentId: "a1" }));
      const d = fixture.driver();
      await d.pause(w);
      await d.pause(w);
      expect(["paused", "running"]).toContain((await d.find(w))!.state);
      await d.resume(w);
      await d.resume(w);
      const found = await fixture.driver().find(w);
      expect(found).toMatchObject({ workspaceId: w, state: "running", userId: "u-life", agentId: "a1", managedBy: "runtime" });
    });

    it("destroy keeps the files unless deleteData, and destroying a missing object is a no-op", async () => {
      const w = id("data");
      const d = fixture.driver();
      await d.create(ident(w));
      const sb = await d.connect(w);
      await sb.writeFile("keep.txt", "kept");
      await sb.close?.();
      await d.destroy(w);
      expect(await d.find(w)).toBeNull();
      await d.create(ident(w));
      const again = await d.connect(w);
      if (fixture.destroyKeepsData === false) await expect(again.readFile("keep.txt")).rejects.toMatchObject({ code: "not_found" });
      else expect(new TextDecoder().decode(await again.readFile("keep.txt"))).toBe("kept");
      await again.close?.();
      await d.destroy(w, { deleteData: true });
      await d.create(ident(w));
      const fresh = await d.connect(w);
      await expect(fresh.readFile("keep.txt")).rejects.toMatchObject({ code: "not_found" });
      await fresh.close?.();
      await d.destroy(w, { deleteData: true });
      await d.destroy(w, { deleteData: true });
      expect(await d.find(w)).toBeNull();
    });

    it("lists by label, only in its own storage, and gc collects only unowned runtime objects", async () => {
      const [owned, declared, orphan] = [id("owned"), id("declared"), id("orphan")];
      const d = fixture.driver();
      await d.create(ident(owned, { userId: "u-list" }));
      await d.create(ident(declared, { userId: "u-other", managedBy: "pulumi" }));
      await d.create(ident(orphan));
      const ours = (xs: { workspaceId: string }[]) =>
        xs
          .map((x) => x.workspaceId)
          .filter((x) => made.has(x))
          .sort();
      expect(ours(await d.list({ userId: "u-list" }))).toEqual([owned]);
      expect(ours(await d.list({ managedBy: "pulumi" }))).toEqual([declared]);
      expect(ours(await d.list({ managedBy: "runtime", userId: null }))).toEqual([orphan]);
      expect(ours(await fixture.elsewhere().list())).toEqual([]);

      const dry = await collectGarbage(fixture.driver());
      expect(ours(dry.orphans)).toEqual([orphan]);
      expect(dry.removed).toEqual([]);
      expect(await d.find(orphan)).not.toBeNull();
      // Another stack's collector sees nothing of ours.
      expect(ours((await collectGarbage(fixture.elsewhere(), { remove: true })).removed.map((workspaceId) => ({ workspaceId })))).toEqual([]);
      const wet = await collectGarbage(fixture.driver(), { remove: true });
      expect(ours(wet.removed.map((workspaceId) => ({ workspaceId })))).toEqual([orphan]);
      expect(await d.find(orphan)).toBeNull();
      expect(await d.find(owned)).not.toBeNull();
      expect(await d.find(declared)).not.toBeNull();
    });
  });
}
