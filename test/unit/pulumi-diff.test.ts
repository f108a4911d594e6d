import { mkdirSync, mkdtempSync, realpathSync, symlinkSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkInputs, defaultWorkspaceId, diffWorkspace, parseBackend, UNKNOWN } from "../../providers/index.js";
import { FORCED_REPLACE } from "../../providers/diff.js";
import { DEFAULT_CPUS, DEFAULT_MAX_PROCESSES, DEFAULT_MEMORY_BYTES } from "../../sdk/contract/registry.js";
import { buildModel, stepsFromPreviewJson } from "../../sdk/cli/preview-model.js";
import { GITHUB_COMMENT_LIMIT, renderPreviewMarkdown } from "../../sdk/cli/preview-markdown.js";

const base = { workspaceId: "w1", backend: { kind: "local", basedir: "/srv/ws" }, tags: { team: "a" }, ttlSeconds: 60 };
const outs = {
  ...base,
  __provider: "exports.handler = old",
  kind: "local",
  state: "running",
  managedBy: "pulumi",
  location: { hostPath: "/srv/ws/w1" },
  schemaVersion: 1,
};

const paths = (d: { fields: { path: string; effect: string }[] }) => d.fields.map((f) => `${f.path}:${f.effect}`);

describe("diffWorkspace", () => {
  it("sees no change when only provider code or computed outputs differ", () => {
    const d = diffWorkspace(outs, { ...base, __provider: "exports.handler = new" });
    expect(d).toEqual({ changes: false, replaces: [], fields: [], deleteBeforeReplace: false, effect: "none", data: "kept" });
  });

  it("updates tags, seeds and TTL in place, with old and new values", () => {
    const d = diffWorkspace(outs, { ...base, tags: { team: "b", env: "x" }, ttlSeconds: 120, skillPaths: ["/skills"] });
    expect(d).toMatchObject({ changes: true, replaces: [], effect: "update", data: "kept" });
    expect(d.fields).toEqual([
      { path: "skillPaths", kind: "add", replace: false, effect: "update", to: '["/skills"]' },
      { path: "tags.env", kind: "add", replace: false, effect: "update", to: '"x"' },
      { path: "tags.team", kind: "update", replace: false, effect: "update", from: '"a"', to: '"b"' },
      { path: "ttlSeconds", kind: "update", replace: false, effect: "update", from: "60", to: "120" },
    ]);
  });

  it("replaces on a local folder change, creating the new folder before the old one goes", () => {
    const d = diffWorkspace(outs, { ...base, backend: { kind: "local", basedir: "/elsewhere" } });
    expect(d).toMatchObject({ replaces: ["backend.basedir"], deleteBeforeReplace: false, effect: "replace", data: "left-behind" });
    // With deleteData on the old folder goes: the reviewer is told the files are deleted.
    expect(diffWorkspace({ ...outs, deleteData: true }, { ...base, deleteData: true, backend: { kind: "local", basedir: "/elsewhere" } }).data).toBe("deleted");
  });

  it("the same folder spelled differently is no change", () => {
    for (const spelled of ["/srv/ws/", "/srv/./ws", "/srv/x/../ws", "/srv//ws"])
      expect(diffWorkspace(outs, { ...base, backend: { kind: "local", basedir: spelled } }).changes).toBe(false);
  });

  it("reports a backend kind change once, as backend.kind, old → new", () => {
    const d = diffWorkspace(outs, { ...base, backend: { kind: "docker", baseImage: "img:2", network: "bridge" } });
    expect(d.replaces).toEqual(["backend.kind"]);
    expect(d.fields).toEqual([{ path: "backend.kind", kind: "update", replace: true, effect: "replace", from: '"local"', to: '"docker"' }]);
    expect(d.deleteBeforeReplace).toBe(false);
  });

  it("classifies Docker changes by what the driver can do: caps in place, image/env/network/tags re-create, folder replaces", () => {
    const docker = { ...base, backend: { kind: "docker", basedir: "/srv/d", baseImage: "img:1" } };
    const change = (backend: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      diffWorkspace(docker, { ...docker, ...extra, backend: { ...docker.backend, ...backend } });
    expect(change({ memoryBytes: 256 * 1024 ** 2 })).toMatchObject({ effect: "update", replaces: [], data: "kept" });
    for (const b of [{ baseImage: "img:2" }, { env: { A: "1" } }, { network: "internet" }, { pythonPackages: ["x"] }, { user: "1000" }])
      expect(change(b)).toMatchObject({ effect: "recreate", replaces: [], data: "kept" });
    expect(change({}, { tags: { team: "z" } })).toMatchObject({ effect: "recreate", data: "kept" });
    expect(change({ basedir: "/srv/other" })).toMatchObject({
      effect: "replace",
      replaces: ["backend.basedir"],
      deleteBeforeReplace: true,
      data: "left-behind",
    });
    // An ephemeral container holds its files: re-creating it deletes them.
    const eph = { ...base, backend: { kind: "docker", baseImage: "img:1" } };
    expect(diffWorkspace(eph, { ...eph, tags: { team: "z" } })).toMatchObject({ effect: "recreate", data: "deleted" });
  });

  it("applies every bubblewrap option in place (each command is a fresh sandbox over the same folder)", () => {
    const ws = { ...base, deleteData: true, backend: { kind: "bubblewrap", basedir: "/b" } };
    for (const b of [
      { network: "host" },
      { maxProcesses: 64 },
      { memoryBytes: 256 * 1024 ** 2 },
      { cpus: 0.5 },
      { env: { A: "1" } },
      { readOnlyPaths: ["/usr"] },
    ])
      expect(diffWorkspace(ws, { ...ws, backend: { ...ws.backend, ...b } })).toMatchObject({ effect: "update", data: "kept" });
    const spelled = { kind: "bubblewrap", basedir: "/b", maxProcesses: DEFAULT_MAX_PROCESSES, memoryBytes: DEFAULT_MEMORY_BYTES, cpus: DEFAULT_CPUS };
    expect(diffWorkspace(ws, { ...ws, backend: spelled }).changes).toBe(false);
    expect(diffWorkspace(ws, { ...ws, userId: "someone" })).toMatchObject({ effect: "replace", replaces: ["userId"], data: "deleted" });
  });

  it("identity changes replace; a new id creates before deleting; --replace forces one", () => {
    const d = diffWorkspace(outs, { ...base, workspaceId: "w2" });
    expect(d.replaces).toEqual(["workspaceId"]);
    expect(d.deleteBeforeReplace).toBe(false);
    expect(diffWorkspace(outs, base, { forceReplace: true })).toMatchObject({
      effect: "replace",
      replaces: [FORCED_REPLACE],
      deleteBeforeReplace: true,
      data: "kept",
    });
  });

  it("a container found stopped is started by the next up", () => {
    expect(paths(diffWorkspace({ ...outs, state: "stopped" }, base))).toEqual(["state:update"]);
    expect(diffWorkspace({ ...outs, state: "paused" }, base).changes).toBe(false);
  });

  it("never descends into credentials and masks secret-bearing values", () => {
    const d = diffWorkspace({ ...outs, credentials: { apiKey: "old-secret" } }, { ...base, credentials: { apiKey: "new-secret" } });
    expect(d.fields).toEqual([{ path: "credentials", kind: "update", replace: false, effect: "update", from: '"[secret]"', to: '"[secret]"' }]);
    const env = diffWorkspace(
      { ...outs, backend: { kind: "docker", env: { TOKEN: "old-secret" } } },
      { ...base, backend: { kind: "docker", env: { TOKEN: "new-secret" } } },
    );
    expect(env.fields).toMatchObject([{ path: "backend.env.TOKEN", from: '"[secret]"', to: '"[secret]"' }]);
    expect(JSON.stringify([d, env])).not.toMatch(/old-secret|new-secret/);
  });

  it("ignores key order and treats an unknown preview value as a change", () => {
    expect(diffWorkspace(outs, { ttlSeconds: 60, tags: { team: "a" }, backend: { basedir: "/srv/ws", kind: "local" }, workspaceId: "w1" }).changes).toBe(false);
    expect(paths(diffWorkspace(outs, { ...base, tags: UNKNOWN }))).toEqual(["tags:update"]);
  });

  it("tolerates outputs written by an older provider: dropped fields, new defaults, extra outputs", () => {
    const older = { workspaceId: "w1", backend: { kind: "local", basedir: "/srv/ws", legacyFlag: true }, hostPath: "/x" };
    expect(diffWorkspace(older, { workspaceId: "w1", backend: { kind: "local", basedir: "/srv/ws" } })).toMatchObject({ changes: false, replaces: [] });
    expect(parseBackend(older.backend)).toEqual({ kind: "local", basedir: "/srv/ws" });
    // A field added later with a default (bubblewrap `network`) is no change either.
    const beforeNetwork = { workspaceId: "w1", backend: { kind: "bubblewrap", basedir: "/b" } };
    expect(diffWorkspace(beforeNetwork, { workspaceId: "w1", backend: { kind: "bubblewrap", basedir: "/b", network: "none" } }).changes).toBe(false);
  });
});

describe("checkInputs", () => {
  const failuresOf = (news: Record<string, unknown>) => checkInputs(news).failures;

  it("derives the PER_AGENT / PER_USER id exactly like the reference", () => {
    expect(defaultWorkspaceId("u1", "a1")).toBe("4bf1218b645ff727");
    expect(defaultWorkspaceId("u1", undefined)).toBe("48ea3da4179df93b");
    expect(checkInputs({ userId: "u1", agentId: "a1", backend: { kind: "local" } }).inputs.workspaceId).toBe("4bf1218b645ff727");
  });

  it("applies schema defaults and keeps __provider", () => {
    const r = checkInputs({ __provider: "p", workspaceId: "w", backend: { kind: "bubblewrap" } });
    expect(r.failures).toEqual([]);
    expect(r.inputs).toEqual({
      __provider: "p",
      workspaceId: "w",
      backend: { kind: "bubblewrap", network: "none", maxProcesses: DEFAULT_MAX_PROCESSES, memoryBytes: DEFAULT_MEMORY_BYTES, cpus: DEFAULT_CPUS },
    });
  });

  it("names every bad field", () => {
    expect(failuresOf({ workspaceId: "w", backend: { kind: "nimbus" } })[0]).toMatchObject({
      property: "backend.kind",
      reason: expect.stringContaining("unknown backend kind"),
    });
    expect(failuresOf({ workspaceId: "w", backend: { kind: "local" }, ttlSeconds: -1 })[0]!.property).toBe("ttlSeconds");
    expect(
      failuresOf({ workspaceId: "w", backend: { kind: "local" }, defaultMcps: [{ name: "a b", transport: { type: "stdio", command: "x" } }] })[0]!.property,
    ).toBe("defaultMcps[0].name");
    expect(failuresOf({ workspaceId: "w", backend: { kind: "local" }, defaultMcps: [{ name: "web", transport: { type: "http" } }] })[0]!.property).toBe(
      "defaultMcps[0].transport.url",
    );
    expect(failuresOf({ workspaceId: "../x", backend: { kind: "local" } })[0]!.property).toBe("workspaceId");
    expect(failuresOf({ backend: { kind: "local" } })[0]!.property).toBe("workspaceId");
    expect(failuresOf({ workspaceId: "w", backend: { kind: "local", colour: 1 } })[0]!.property).toBe("backend.colour");
    const two = failuresOf({ workspaceId: "w", backend: { kind: "local" }, ttlSeconds: 0, tags: { "": "x" } });
    expect(two.map((f) => f.property).sort()).toEqual(["tags.", "ttlSeconds"]);
  });

  it("never quotes a value in a failure", () => {
    const f = failuresOf({ workspaceId: "w", backend: { kind: "local" }, credentials: { apiKey: 42 } });
    expect(f[0]!.property).toBe("credentials.apiKey");
    expect(JSON.stringify(f)).not.toContain("42");
  });

  it("normalises host paths before they reach state: ~, trailing slashes, . and .., symlinked parents", () => {
    const root = mkdtempSync(join(tmpdir(), "paths-"));
    mkdirSync(join(root, "real", "ws"), { recursive: true });
    symlinkSync(join(root, "real"), join(root, "link"));
    const basedirOf = (basedir: string, kind = "local") =>
      (checkInputs({ workspaceId: "w", backend: { kind, basedir } }).inputs.backend as { basedir: string }).basedir;
    const real = realpathSync(join(root, "real", "ws"));
    for (const spelled of [`${root}/real/ws/`, `${root}/real/./ws`, `${root}/real/x/../ws`, `${root}/link/ws`, `${root}//link/ws/`])
      expect(basedirOf(spelled)).toBe(real);
    // A folder that does not exist yet: its existing parent is still resolved.
    expect(basedirOf(`${root}/link/new/`)).toBe(join(realpathSync(join(root, "real")), "new"));
    expect(basedirOf("~/agent-ws/", "docker")).toBe(join(realpathSync(homedir()), "agent-ws"));
    const docker = checkInputs({ workspaceId: "w", backend: { kind: "docker", readOnlyPaths: [`${root}/link/ws/`] } }).inputs.backend as {
      readOnlyPaths: string[];
    };
    expect(docker.readOnlyPaths).toEqual([real]);
  });

  it("passes unknown preview values through without failing", () => {
    expect(checkInputs({ workspaceId: UNKNOWN, backend: { kind: "local" } })).toEqual({
      inputs: { workspaceId: UNKNOWN, backend: { kind: "local" } },
      failures: [],
    });
  });
});

describe("preview markdown", () => {
  const ws = "pulumi-nodejs:dynamic/agentws:Workspace";
  const step = (op: string, id: string, olds?: Record<string, unknown>, news?: Record<string, unknown>) => ({
    op,
    urn: `urn:pulumi:dev::p::agentws:index:WorkspaceFleet$${ws}::fleet-${id}`,
    ...(olds ? { oldState: { type: ws, inputs: olds } } : {}),
    ...(news ? { newState: { type: ws, inputs: news } } : {}),
  });

  it("turns `pulumi preview --json` into one row per workspace", () => {
    const doc = {
      steps: [
        step("create", "new", undefined, { ...base, workspaceId: "new" }),
        step("update", "w1", base, { ...base, tags: { team: "b" } }),
        step("delete-replaced", "w2", { ...base, workspaceId: "w2" }, undefined),
        step("replace", "w2", { ...base, workspaceId: "w2" }, { ...base, workspaceId: "w2", backend: { kind: "local", basedir: "/b" } }),
        step("create-replacement", "w2", { ...base, workspaceId: "w2" }, { ...base, workspaceId: "w2", backend: { kind: "local", basedir: "/b" } }),
        step("delete", "old", { ...base, workspaceId: "old" }, undefined),
        step("same", "same", base, base),
        { op: "same", urn: "urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev", newState: { type: "pulumi:pulumi:Stack" } },
      ],
      diagnostics: [{ severity: "warning", message: "meh" }],
    };
    const { steps, diagnostics } = stepsFromPreviewJson(doc);
    const model = buildModel(steps, diagnostics);
    expect(model.changes.map((c) => [c.op, c.workspaceId])).toEqual([
      ["create", "new"],
      ["update", "w1"],
      ["replace", "w2"],
      ["delete", "old"],
    ]);
    const md = renderPreviewMarkdown(model, { stack: "dev" });
    expect(md).toContain("**1 to create, 1 to update, 1 to replace, 1 to delete** · 1 unchanged");
    expect(md).toContain('| `w1` | — | local | `tags.team`: `"a"` → `"b"` | same folder; files kept |');
    expect(md).toContain('| `w2` | — | local | `backend.basedir`: `"/srv/ws"` → `"/b"` (forces replacement) | new folder; files stay in the old folder');
  });

  it("folds long sections and stays under GitHub's limit with a note", () => {
    const many = Array.from({ length: 3000 }, (_, i) => step("create", `w${i}`, undefined, { ...base, workspaceId: `workspace-with-a-long-name-${i}` }));
    const md = renderPreviewMarkdown(buildModel(stepsFromPreviewJson({ steps: many }).steps), { stack: "big" });
    expect(md.length).toBeLessThan(GITHUB_COMMENT_LIMIT);
    expect(md).toContain("**3000 to create**");
    expect(md).toContain("Comment shortened");
    const some = Array.from({ length: 40 }, (_, i) => step("create", `w${i}`, undefined, { ...base, workspaceId: `w${i}` }));
    const folded = renderPreviewMarkdown(buildModel(stepsFromPreviewJson({ steps: some }).steps));
    expect(folded).toContain("<details><summary><b>+ 40 to create</b></summary>");
    expect(folded).not.toContain("Comment shortened");
  });

  it("masks secret values and given secret strings", () => {
    const secret = { "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", value: "hunter2-token" };
    const model = buildModel(
      stepsFromPreviewJson({
        steps: [step("update", "w1", { ...base, credentials: secret }, { ...base, credentials: "[secret]", tags: { team: "hunter2-token" } })],
      }).steps,
    );
    const md = renderPreviewMarkdown(model, { redact: ["hunter2-token"] });
    expect(md).not.toContain("hunter2-token");
    expect(md).toContain("`tags.team`");
  });

  it("reports errors and a no-change preview", () => {
    const md = renderPreviewMarkdown(buildModel([], [{ severity: "error", message: "backend.kind: unknown backend kind" }]));
    expect(md).toContain("**No workspace changes**");
    expect(md).toContain("backend.kind: unknown backend kind");
  });
});
