import { describe, expect, it } from "vitest";
import { buildModel, stepsFromPreviewJson } from "../../sdk/cli/preview-model.js";
import { renderPreviewMarkdown, renderPreviewText } from "../../sdk/cli/preview-markdown.js";

/**
 * The pull-request comment for a fixture of changes, as a reviewed snapshot
 * (__snapshots__/preview-comment.md: read it as a reviewer would). It must show each workspace's
 * owner, old → new values with secrets masked, what each replace costs, renames as renames, a kind
 * change as one line, and what the other resources are.
 */
const WS = "pulumi-nodejs:dynamic/agentws:Workspace";
const SECRET = { "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", ciphertext: "v1:abc" };
const urn = (name: string, type = WS) => `urn:pulumi:pr::agents::agentws:index:WorkspaceFleet$${type}::fleet-${name}`;
const step = (op: string, name: string, olds?: Record<string, unknown>, news?: Record<string, unknown>, replaceReasons?: string[]) => ({
  op,
  urn: urn(name),
  ...(olds ? { oldState: { type: WS, inputs: olds, outputs: { ...olds, state: "running" } } } : {}),
  ...(news ? { newState: { type: WS, inputs: news } } : {}),
  ...(replaceReasons ? { replaceReasons } : {}),
});

const docker = {
  kind: "docker",
  basedir: "/srv/agents/docker",
  baseImage: "agentws-base:bookworm",
  network: "none",
  maxProcesses: 512,
  memoryBytes: 2147483648,
  cpus: 2,
};
const coder = { workspaceId: "4bf1218b645ff727", userId: "alice", agentId: "coder", backend: docker, tags: { team: "a" }, deleteData: false };
const tester = {
  workspaceId: "tester-ws",
  userId: "bob",
  agentId: "tester",
  backend: { kind: "bubblewrap", basedir: "/srv/agents/bwrap", network: "none", maxProcesses: 512, memoryBytes: 2147483648, cpus: 2 },
  deleteData: true,
};
const notes = { workspaceId: "notes", userId: "carol", agentId: "writer", backend: { kind: "local", basedir: "/srv/agents/local" }, deleteData: false };
const scratch = {
  workspaceId: "scratch",
  userId: "dave",
  agentId: "runner",
  backend: { kind: "docker", baseImage: "agentws-base:bookworm", network: "none", maxProcesses: 512, memoryBytes: 2147483648, cpus: 2 },
  deleteData: false,
};
const old = { workspaceId: "old-name", userId: "erin", agentId: "reviewer", backend: { kind: "local", basedir: "/srv/agents/local" }, deleteData: false };

const fixture = {
  steps: [
    // A tag change on a container: labels are fixed, so it is re-created (files kept).
    step(
      "update",
      "4bf1218b645ff727",
      { ...coder, backend: { ...docker, env: { API_TOKEN: SECRET } } },
      { ...coder, tags: { team: "b" }, backend: { ...docker, env: { API_TOKEN: "[secret]" } } },
    ),
    // Caps only: the same container.
    step(
      "update",
      "caps",
      { ...coder, workspaceId: "caps", agentId: "capped" },
      { ...coder, workspaceId: "caps", agentId: "capped", backend: { ...docker, memoryBytes: 4294967296 } },
    ),
    // A folder move with deleteData on: the old folder is deleted.
    step("replace", "tester-ws", tester, { ...tester, backend: { ...tester.backend, basedir: "/srv/agents/bwrap2" } }, ["backend.basedir"]),
    // A kind change, reported once.
    step("replace", "notes", notes, { ...notes, backend: docker }, ["backend.kind"]),
    // An ephemeral container re-created: its files go with it.
    step("update", "scratch", scratch, { ...scratch, backend: { ...scratch.backend, network: "bridge", env: { API_TOKEN: SECRET } } }),
    // A rename: a delete and a create for the same owner.
    step("delete", "old-name", old),
    step("create", "new-name", undefined, { ...old, workspaceId: "new-name" }),
    step("create", "fresh", undefined, { workspaceId: "fresh", userId: "frank", agentId: "helper", backend: { kind: "local", basedir: "/srv/agents/local" } }),
    step("same", "unchanged", notes, notes),
    { op: "update", urn: "urn:pulumi:pr::agents::agentws:index:WorkspaceFleet::fleet", newState: { type: "agentws:index:WorkspaceFleet" } },
    // The fleet's data ledger follows the folders the workspaces keep their files in.
    {
      op: "update",
      urn: "urn:pulumi:pr::agents::agentws:index:WorkspaceFleet$pulumi-nodejs:dynamic/agentws:DataLedger::fleet-data-ledger",
      newState: { type: "pulumi-nodejs:dynamic/agentws:DataLedger" },
    },
  ],
};

describe("the preview comment", () => {
  const model = buildModel(stepsFromPreviewJson(fixture).steps);
  const md = renderPreviewMarkdown(model, { stack: "pr", redact: ["not-in-the-comment"] });

  it("matches the reviewed snapshot", async () => {
    await expect(md).toMatchFileSnapshot("./__snapshots__/preview-comment.md");
  });

  it("shows owners, old → new values, consequences, renames, one line per kind change, and explains other resources", () => {
    expect(md).toContain('| `4bf1218b645ff727` | alice / coder | docker | `tags.team`: `"a"` → `"b"` (re-creates) | container re-created');
    expect(md).toContain("| `caps` | alice / capped | docker | `backend.memoryBytes`: `2147483648` → `4294967296` | same container; files kept |");
    expect(md).toMatch(
      /`tester-ws` \| bob \/ tester \| bubblewrap \| `backend.basedir`: `"\/srv\/agents\/bwrap"` → `"\/srv\/agents\/bwrap2"` \(forces replacement\) \| new sandbox folder; \*\*files deleted\*\*/,
    );
    expect(md).toContain('| `notes` | carol / writer | local → docker | `backend.kind`: `"local"` → `"docker"` (forces replacement) |');
    expect(md).toContain("| `old-name` → `new-name` | erin / reviewer | local |");
    expect(md).toContain("> **Deletes workspace files:** `scratch` (re-create), `tester-ws` (replace).");
    expect(md).toContain("`agentws up --allow-data-loss`");
    expect(md).toContain("Other resources: `fleet` to update (the fleet component: its `workspaces` output");
    expect(md).toContain(
      "`fleet-data-ledger` to update (the fleet's data ledger: it notes where each workspace keeps its files and which folders earlier replaces and removals left behind",
    );
    expect(md).toContain('`backend.env`: added `{"API_TOKEN":"[secret]"}` (re-creates)');
    expect(md).toContain("**1 to create, 1 to update, 2 to re-create, 2 to replace, 1 to rename** · 1 unchanged");
    expect(md).not.toContain("v1:abc");
    expect(md).not.toContain("1b47061264138c4ac30d75fd1eb44270");
  });

  it("prints the same plan as text after `preview --diff`", () => {
    const text = renderPreviewText(model);
    expect(text).toContain("re-create in place  4bf1218b645ff727 (alice / coder), docker: container re-created");
    expect(text).toContain('tags.team: "a" → "b" (re-creates)');
    expect(text).not.toContain("v1:abc");
  });
});
