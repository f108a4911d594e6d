import { describe, expect, it } from "vitest";
import { checkInputs, defaultWorkspaceId, diffWorkspace, parseBackend, UNKNOWN } from "../../providers/index.js";
import { DEFAULT_CPUS, DEFAULT_MAX_PROCESSES, DEFAULT_MEMORY_BYTES } from "../../sdk/backends/spec.js";
import { buildModel, stepsFromPreviewJson } from "../../sdk/cli/preview-model.js";
import { GITHUB_COMMENT_LIMIT, renderPreviewMarkdown } from "../../sdk/cli/preview-markdown.js";

const base = { workspaceId: "w1", backend: { kind: "local", basedir: "/srv/ws" }, tags: { team: "a" }, ttlSeconds: 60 };
const outs = { ...base, __provider: "exports.handler = old", kind: "local", state: "running", managedBy: "pulumi", location: { hostPath: "/srv/ws/w1" }, schemaVersion: 1 };

describe("diffWorkspace", () => {
  it("sees no change when only provider code or computed outputs differ", () => {
    const d = diffWorkspace(outs, { ...base, __provider: "exports.handler = new" });
    expect(d).toEqual({ changes: false, replaces: [], fields: [], deleteBeforeReplace: false });
  });

  it("updates tags, seeds and TTL in place", () => {
    const d = diffWorkspace(outs, { ...base, tags: { team: "b", env: "x" }, ttlSeconds: 120, skillPaths: ["/skills"] });
    expect(d.changes).toBe(true);
    expect(d.replaces).toEqual([]);
    expect(d.fields).toEqual([
      { path: "skillPaths", kind: "add", replace: false },
      { path: "tags.env", kind: "add", replace: false },
      { path: "tags.team", kind: "update", replace: false },
      { path: "ttlSeconds", kind: "update", replace: false },
    ]);
  });

  it("replaces on a backend option change, naming the exact path, deleting first", () => {
    const d = diffWorkspace(outs, { ...base, backend: { kind: "local", basedir: "/elsewhere" } });
    expect(d.replaces).toEqual(["backend.basedir"]);
    expect(d.deleteBeforeReplace).toBe(true);
  });

  it("reports a backend kind change once, as backend.kind", () => {
    const d = diffWorkspace(outs, { ...base, backend: { kind: "docker", baseImage: "img:2", network: "bridge" } });
    expect(d.replaces).toEqual(["backend.kind"]);
    expect(d.fields.every((f) => f.replace)).toBe(true);
  });

  it("replaces on an image change (docker) and on identity changes; a new id creates before deleting", () => {
    const docker = { ...base, backend: { kind: "docker", baseImage: "img:1", network: "bridge" } };
    expect(diffWorkspace(docker, { ...docker, backend: { ...docker.backend, baseImage: "img:2" } }).replaces).toEqual(["backend.baseImage"]);
    const d = diffWorkspace(outs, { ...base, workspaceId: "w2" });
    expect(d.replaces).toEqual(["workspaceId"]);
    expect(d.deleteBeforeReplace).toBe(false);
  });

  it("replaces on a resource cap or network mode change; the defaults spelled out are no change", () => {
    const changes: [string, unknown][] = [
      ["maxProcesses", 64],
      ["memoryBytes", 256 * 1024 ** 2],
      ["cpus", 0.5],
    ];
    for (const kind of ["docker", "bubblewrap"]) {
      const ws = { ...base, backend: { kind } };
      for (const [field, value] of changes) expect(diffWorkspace(ws, { ...ws, backend: { kind, [field]: value } }).replaces).toEqual([`backend.${field}`]);
      const spelled = { kind, maxProcesses: DEFAULT_MAX_PROCESSES, memoryBytes: DEFAULT_MEMORY_BYTES, cpus: DEFAULT_CPUS };
      expect(diffWorkspace(ws, { ...ws, backend: spelled }).changes).toBe(false);
    }
    const docker = { ...base, backend: { kind: "docker" } };
    expect(diffWorkspace(docker, { ...docker, backend: { kind: "docker", network: "internet" } }).replaces).toEqual(["backend.network"]);
    // State written with the old default ("bridge") reads as a change to today's isolated default.
    expect(diffWorkspace({ ...base, backend: { kind: "docker", network: "bridge" } }, docker).replaces).toEqual(["backend.network"]);
  });

  it("never descends into credentials and never carries values", () => {
    const d = diffWorkspace({ ...outs, credentials: { apiKey: "old-secret" } }, { ...base, credentials: { apiKey: "new-secret" } });
    expect(d.fields).toEqual([{ path: "credentials", kind: "update", replace: false }]);
    expect(JSON.stringify(d)).not.toMatch(/secret/);
  });

  it("ignores key order and treats an unknown preview value as a change", () => {
    expect(diffWorkspace(outs, { ttlSeconds: 60, tags: { team: "a" }, backend: { basedir: "/srv/ws", kind: "local" }, workspaceId: "w1" }).changes).toBe(false);
    expect(diffWorkspace(outs, { ...base, tags: UNKNOWN }).fields).toEqual([{ path: "tags", kind: "update", replace: false }]);
  });

  it("tolerates outputs written by an older provider: dropped fields, new defaults, extra outputs", () => {
    const older = { workspaceId: "w1", backend: { kind: "local", basedir: "/srv/ws", legacyFlag: true }, hostPath: "/x" };
    expect(diffWorkspace(older, { workspaceId: "w1", backend: { kind: "local", basedir: "/srv/ws" } })).toMatchObject({ changes: false, replaces: [] });
    expect(parseBackend(older.backend)).toEqual({ kind: "local", basedir: "/srv/ws" });
    // A field added later with a default (bubblewrap `network`) is no change either.
    const beforeNetwork = { workspaceId: "w1", backend: { kind: "bubblewrap", basedir: "/b" } };
    expect(diffWorkspace(beforeNetwork, { workspaceId: "w1", backend: { kind: "bubblewrap", basedir: "/b", network: "none" } }).changes).toBe(false);
    expect(diffWorkspace(beforeNetwork, { workspaceId: "w1", backend: { kind: "bubblewrap", basedir: "/b", network: "host" } }).replaces).toEqual(["backend.network"]);
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
    expect(failuresOf({ workspaceId: "w", backend: { kind: "nimbus" } })[0]).toMatchObject({ property: "backend.kind", reason: expect.stringContaining("unknown backend kind") });
    expect(failuresOf({ workspaceId: "w", backend: { kind: "local" }, ttlSeconds: -1 })[0]!.property).toBe("ttlSeconds");
    expect(failuresOf({ workspaceId: "w", backend: { kind: "local" }, defaultMcps: [{ name: "a b", transport: { type: "stdio", command: "x" } }] })[0]!.property).toBe("defaultMcps[0].name");
    expect(failuresOf({ workspaceId: "w", backend: { kind: "local" }, defaultMcps: [{ name: "web", transport: { type: "http" } }] })[0]!.property).toBe("defaultMcps[0].transport.url");
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

  it("passes unknown preview values through without failing", () => {
    expect(checkInputs({ workspaceId: UNKNOWN, backend: { kind: "local" } })).toEqual({ inputs: { workspaceId: UNKNOWN, backend: { kind: "local" } }, failures: [] });
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
    expect(model.changes.map((c) => [c.op, c.workspaceId])).toEqual([["create", "new"], ["update", "w1"], ["replace", "w2"], ["delete", "old"]]);
    const md = renderPreviewMarkdown(model, { stack: "dev" });
    expect(md).toContain("**1 to create, 1 to update, 1 to replace, 1 to delete** · 1 unchanged");
    expect(md).toContain("| `w1` | local | `tags.team` |");
    expect(md).toContain("| `w2` | local | `backend.basedir` (forces replacement) |");
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
    const model = buildModel(stepsFromPreviewJson({ steps: [step("update", "w1", { ...base, credentials: secret }, { ...base, credentials: "[secret]", tags: { team: "hunter2-token" } })] }).steps);
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
