import { spawnSync } from "node:child_process";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Stack } from "@pulumi/pulumi/automation/index.js";
import { stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { WorkspaceFleet } from "../../providers/index.js";
import { loadDriver } from "../../sdk/backends/load.js";
import type { BackendSpecInput } from "../../sdk/contract/registry.js";
import { dockerClient } from "../../sdk/backends/docker/client.js";
import { StepCollector, upWithPreview, withPlanEnv } from "../../sdk/cli/engine.js";
import type { PreviewModel, WorkspaceOp } from "../../sdk/cli/preview-model.js";
import { FLEET_OUTPUT_NAME, FleetOutputsSchema, type FleetOutputs } from "../../sdk/contract/fleet.js";
import { BASE_IMAGE, dockerEngine } from "../support/docker-engine.js";
import { bounded, ensureBuilt, makeSandbox, pulumiBinDir, stateResources, testStack, type Sandbox } from "./pulumi-helpers.js";

// The real engine on a shared 2-core machine: each step is three engine runs (preview, up, preview).
vi.setConfig({ testTimeout: 600_000 });

/**
 * The catalogue: spec changes to every field of every backend's spec, fleet edits and
 * whitespace-only edits, written down with the outcome an operator expects, then run through the
 * real engine over local, bubblewrap and Docker workspaces. For each change the test asserts that
 * the preview classified it as expected, that the backend object is the same one or a new one as
 * the preview said, that the files were kept or deleted as it said, that a second preview is
 * clean, and that state and the `workspaces` output describe the backend as it now is. Changes to
 * different workspaces are batched into one `up` per step to keep it fast.
 */
const engine = await dockerEngine();
const bwrap = spawnSync("sh", ["-c", "command -v bwrap"]).status === 0;
if (!bwrap && process.env.CI) throw new Error("bubblewrap is missing in CI (scripts/setup-sandboxes.sh installs it)");
if (!bwrap) console.warn("[catalogue] bubblewrap entries skipped: bwrap is not installed");
const PROJECT = "catalogue";
const SUFFIX = `${process.pid}`;
const ALT_IMAGE = `agentws-base:catalogue-${SUFFIX}`;
const MARKER = "catalogue-marker.txt";

type Spec = Record<string, unknown> & { workspaceId: string; backend: Record<string, unknown> };
type Expect = WorkspaceOp | "none";

interface Entry {
  /** What the change is, as the catalogue lists it. */
  name: string;
  /** The workspace it touches (its id before the change). */
  ws: string;
  expect: Expect;
  /** The backend object afterwards: the same one or a new one (default: new for recreate/replace/rename/create). */
  object?: "same" | "new";
  /** The files afterwards (default: kept unless the change replaces or deletes). */
  files?: "kept" | "gone";
  edit?: (s: Spec) => Spec | null;
}

interface Step {
  name: string;
  entries: Entry[];
  deleteData?: boolean;
  allowDataLoss?: boolean;
  replace?: string[];
  /** The fleet file's text written differently (whitespace, comments, order), same content. */
  restyle?: (specs: Spec[]) => string;
  /** New workspaces this step adds. */
  add?: () => Spec[];
}

let sb: Sandbox;
let stack: Stack;
let dir: string;
let fleetFile: string;
let specs: Spec[] = [];
let deleteData = false;
const id = (name: string) => `${name}-${SUFFIX}`;

function writeFleet(text?: string): void {
  writeFileSync(fleetFile, text ?? stringify({ defaults: { userId: "ops", tags: { stack: "catalogue" } }, workspaces: specs }));
}

const withBackend = (s: Spec, b: Record<string, unknown>): Spec => ({ ...s, backend: { ...s.backend, ...b } });

async function previewModel(): Promise<PreviewModel> {
  const c = new StepCollector();
  await withPlanEnv(stack, { preview: true }, () => stack.preview({ onEvent: c.onEvent, color: "never" }));
  return c.model();
}

/** The backend's own view of a workspace, and what identifies its object (container id or folder). */
async function backendOf(entry: { workspaceId: string; backend: BackendSpecInput }) {
  const driver = await loadDriver(entry.backend);
  const found = await driver.find(entry.workspaceId);
  return { driver, found, identity: found ? (found.location.containerId ?? found.location.hostPath) : undefined };
}

async function readMarker(entry: { workspaceId: string; backend: BackendSpecInput }): Promise<string | undefined> {
  const { driver, found } = await backendOf(entry);
  if (!found) return undefined;
  const box = await driver.connect(entry.workspaceId);
  try {
    return (await box.readFile(MARKER).catch(() => undefined))?.toString();
  } finally {
    await box.close?.();
  }
}

async function writeMarker(entry: { workspaceId: string; backend: BackendSpecInput }): Promise<void> {
  const { driver } = await backendOf(entry);
  const box = await driver.connect(entry.workspaceId);
  try {
    await box.writeFile(MARKER, entry.workspaceId);
  } finally {
    await box.close?.();
  }
}

function fleetOf(outputs: Record<string, { value: unknown }>): FleetOutputs {
  return FleetOutputsSchema.parse(outputs[FLEET_OUTPUT_NAME]!.value);
}

/** State and outputs describe each workspace as its backend does. */
async function expectStateMatchesBackend(fleet: FleetOutputs): Promise<void> {
  const state = stateResources(sb, PROJECT).filter((r) => r.type === "pulumi-nodejs:dynamic/agentws:Workspace");
  expect(state.map((r) => r.id).sort()).toEqual(Object.keys(fleet).sort());
  for (const [wsId, entry] of Object.entries(fleet)) {
    const { found } = await backendOf(entry);
    expect(found, `${wsId} exists on its backend`).not.toBeNull();
    expect(entry.location, `${wsId}: the workspaces output`).toEqual(found!.location);
    expect(state.find((r) => r.id === wsId)!.outputs!.location, `${wsId}: state`).toEqual(found!.location);
    expect(found!.tags).toMatchObject(entry.tags ?? {});
  }
}

const steps: Step[] = [];

beforeAll(async () => {
  const bin = pulumiBinDir();
  ensureBuilt();
  sb = makeSandbox("catalogue");
  dir = sb.dir;
  fleetFile = join(sb.workDir, "fleet.yaml");
  for (const d of ["local", "bwrap", "docker", "single", "ro", "real/parent"]) mkdirSync(join(dir, d), { recursive: true });
  symlinkSync(join(dir, "real"), join(dir, "link"));
  mkdirSync(join(dir, "real", "parent", "local"), { recursive: true });
  if (engine) {
    const [repo, tag] = ALT_IMAGE.split(":");
    await dockerClient().getImage(BASE_IMAGE).tag({ repo: repo!, tag: tag! });
  }
  specs = [
    { workspaceId: id("loc-a"), agentId: "coder", backend: { kind: "local", basedir: join(dir, "real", "parent", "local") } },
    { workspaceId: id("loc-p"), agentId: "writer", backend: { kind: "local", path: join(dir, "single", "p") } },
    ...(bwrap
      ? [
          { workspaceId: id("bw-a"), agentId: "tester", backend: { kind: "bubblewrap", basedir: join(dir, "bwrap") } },
          { workspaceId: id("bw-e"), agentId: "scratch", backend: { kind: "bubblewrap" } },
        ]
      : []),
    ...(engine
      ? [
          { workspaceId: id("dk-a"), agentId: "builder", backend: { kind: "docker", basedir: join(dir, "docker"), baseImage: BASE_IMAGE } },
          { workspaceId: id("dk-e"), agentId: "runner", backend: { kind: "docker", baseImage: BASE_IMAGE } },
        ]
      : []),
  ];
  writeFleet();
  stack = await testStack(
    sb,
    PROJECT,
    async () => {
      const fleet = new WorkspaceFleet("fleet", { file: fleetFile, deleteData });
      return { [FLEET_OUTPUT_NAME]: fleet.workspaces };
    },
    bin,
  );
});

afterAll(async () => {
  if (stack) await withPlanEnv(stack, { allowDataLoss: true }, () => stack.destroy({ color: "never" })).catch(() => undefined);
  if (engine) {
    const docker = dockerClient();
    // The workspace images built FROM the alternative tag are this test's own.
    for (const img of await docker.listImages({ filters: { label: ["agent-workspaces.image-inputs"] } }))
      if ((img.Labels?.["agent-workspaces.image-inputs"] ?? "").includes(ALT_IMAGE)) await bounded(docker.getImage(img.Id).remove());
    await bounded(docker.getImage(ALT_IMAGE).remove());
  }
  sb?.dispose();
}, 600_000);

// The catalogue. Entries whose backend cannot run here are dropped (printed above; CI requires both).
const has = (ws: string) => (ws.startsWith("bw-") ? bwrap : ws.startsWith("dk-") ? engine !== null : true);
steps.push(
  {
    name: "spellings of the same folder",
    entries: [
      { name: "local basedir with a trailing slash", ws: "loc-a", expect: "none", edit: (s) => withBackend(s, { basedir: `${String(s.backend.basedir)}/` }) },
      { name: "local path with /./", ws: "loc-p", expect: "none", edit: (s) => withBackend(s, { path: join(dir, "single") + "/./p" }) },
      { name: "bubblewrap basedir through ..", ws: "bw-a", expect: "none", edit: (s) => withBackend(s, { basedir: `${dir}/ro/../bwrap` }) },
      { name: "docker basedir with // and a trailing slash", ws: "dk-a", expect: "none", edit: (s) => withBackend(s, { basedir: `${dir}//docker/` }) },
      { name: "bubblewrap defaults spelled out", ws: "bw-e", expect: "none", edit: (s) => withBackend(s, { network: "none", maxProcesses: 512 }) },
      { name: "docker defaults spelled out", ws: "dk-e", expect: "none", edit: (s) => withBackend(s, { network: "none", cpus: 2 }) },
    ],
  },
  {
    name: "whitespace-only and order-only edits of the fleet file",
    entries: [
      { name: "flow style, comments and blank lines", ws: "loc-a", expect: "none" },
      { name: "workspaces listed in another order", ws: "loc-p", expect: "none" },
    ],
    restyle: (list) =>
      `# reformatted by hand\n\ndefaults:   { userId: ops,  tags: { stack: catalogue } }\n\nworkspaces:\n${[...list]
        .reverse()
        .map((w) => `  -   ${JSON.stringify(w)}   # ${w.workspaceId}\n`)
        .join("\n")}`,
  },
  {
    name: "a symlinked parent",
    entries: [
      {
        name: "local basedir reached through a symlinked parent",
        ws: "loc-a",
        expect: "none",
        edit: (s) => withBackend(s, { basedir: join(dir, "link", "parent", "local") }),
      },
      { name: "the same folder through its real path", ws: "loc-p", expect: "none", edit: (s) => withBackend(s, { path: join(dir, "single", "p") }) },
    ],
  },
  {
    name: "in place, first round",
    entries: [
      { name: "local: a tag changes", ws: "loc-a", expect: "update", edit: (s) => ({ ...s, tags: { stack: "catalogue", team: "a" } }) },
      { name: "local: ttlSeconds set", ws: "loc-p", expect: "update", edit: (s) => ({ ...s, ttlSeconds: 600 }) },
      { name: "bubblewrap: network none → host", ws: "bw-a", expect: "update", edit: (s) => withBackend(s, { network: "host" }) },
      { name: "bubblewrap: env added", ws: "bw-e", expect: "update", edit: (s) => withBackend(s, { env: { MODE: "ci" } }) },
      { name: "docker: memoryBytes", ws: "dk-a", expect: "update", object: "same", edit: (s) => withBackend(s, { memoryBytes: 512 * 1024 ** 2 }) },
      { name: "docker: cpus", ws: "dk-e", expect: "update", object: "same", edit: (s) => withBackend(s, { cpus: 1 }) },
    ],
  },
  {
    name: "in place, second round",
    entries: [
      {
        name: "local: skillPaths added",
        ws: "loc-a",
        expect: "update",
        edit: (s) => ({ ...s, skillPaths: [join(import.meta.dirname, "..", "fixtures", "skills", "alpha")] }),
      },
      {
        name: "local: a default MCP server added",
        ws: "loc-p",
        expect: "update",
        edit: (s) => ({
          ...s,
          defaultMcps: [{ name: "web", transport: { type: "http", url: "http://127.0.0.1:9/mcp", headers: { Authorization: "Bearer not-a-real-token" } } }],
        }),
      },
      { name: "bubblewrap: maxProcesses", ws: "bw-a", expect: "update", edit: (s) => withBackend(s, { maxProcesses: 256 }) },
      { name: "bubblewrap: readOnlyPaths", ws: "bw-e", expect: "update", edit: (s) => withBackend(s, { readOnlyPaths: [join(dir, "ro")] }) },
      { name: "docker: maxProcesses", ws: "dk-a", expect: "update", object: "same", edit: (s) => withBackend(s, { maxProcesses: 256 }) },
      {
        name: "docker: memoryBytes on an ephemeral container",
        ws: "dk-e",
        expect: "update",
        object: "same",
        edit: (s) => withBackend(s, { memoryBytes: 512 * 1024 ** 2 }),
      },
    ],
  },
  {
    name: "re-created containers keep their files",
    entries: [
      {
        name: "docker: a tag changes (labels are fixed: new container)",
        ws: "dk-a",
        expect: "recreate",
        edit: (s) => ({ ...s, tags: { stack: "catalogue", team: "b" } }),
      },
      { name: "local: a tag removed", ws: "loc-a", expect: "update", edit: (s) => ({ ...s, tags: { stack: "catalogue" } }) },
      { name: "bubblewrap: cpus", ws: "bw-a", expect: "update", edit: (s) => withBackend(s, { cpus: 1 }) },
      { name: "bubblewrap: memoryBytes", ws: "bw-e", expect: "update", edit: (s) => withBackend(s, { memoryBytes: 512 * 1024 ** 2 }) },
    ],
  },
  {
    name: "re-created, second round",
    entries: [
      { name: "docker: env added", ws: "dk-a", expect: "recreate", edit: (s) => withBackend(s, { env: { MODE: "ci" } }) },
      { name: "local: ttlSeconds removed", ws: "loc-p", expect: "update", edit: (s) => ({ ...s, ttlSeconds: undefined }) },
      { name: "bubblewrap: env added", ws: "bw-a", expect: "update", edit: (s) => withBackend(s, { env: { MODE: "ci" } }) },
      { name: "bubblewrap: network none → host (ephemeral)", ws: "bw-e", expect: "update", edit: (s) => withBackend(s, { network: "host" }) },
    ],
  },
  {
    name: "re-created, third round",
    entries: [
      { name: "docker: another base image tag", ws: "dk-a", expect: "recreate", edit: (s) => withBackend(s, { baseImage: ALT_IMAGE }) },
      {
        name: "local: userId of an explicit id changes (another owner)",
        ws: "loc-p",
        expect: "replace",
        object: "same",
        files: "kept",
        edit: (s) => ({ ...s, userId: "ops2" }),
      },
    ],
  },
  {
    name: "re-created, fourth round",
    entries: [
      { name: "docker: network none → bridge", ws: "dk-a", expect: "recreate", edit: (s) => withBackend(s, { network: "bridge" }) },
      { name: "docker: user set", ws: "dk-e", expect: "recreate", files: "gone", edit: (s) => withBackend(s, { user: "1000:1000" }) },
    ],
    allowDataLoss: true,
  },
  {
    name: "the fleet turns deleteData on",
    deleteData: true,
    entries: [{ name: "fleet deleteData off → on (every workspace updates, nothing moves)", ws: "loc-a", expect: "update", object: "same" }],
  },
  {
    name: "with deleteData on",
    allowDataLoss: true,
    entries: [
      {
        name: "local basedir moves: the old folder is deleted",
        ws: "loc-a",
        expect: "replace",
        files: "gone",
        edit: (s) => withBackend(s, { basedir: join(dir, "local") }),
      },
      { name: "bubblewrap network back to none keeps the files", ws: "bw-a", expect: "update", edit: (s) => withBackend(s, { network: "none" }) },
      {
        name: "docker readOnlyPaths re-creates, keeping the files",
        ws: "dk-a",
        expect: "recreate",
        edit: (s) => withBackend(s, { readOnlyPaths: [join(dir, "ro")] }),
      },
    ],
  },
  {
    name: "the fleet turns deleteData off",
    deleteData: false,
    entries: [{ name: "fleet deleteData on → off", ws: "loc-p", expect: "update", object: "same" }],
  },
  {
    name: "replacements that keep or leave the files",
    allowDataLoss: true,
    entries: [
      {
        name: "local path moves: files stay in the old folder",
        ws: "loc-p",
        expect: "replace",
        files: "gone",
        edit: (s) => withBackend(s, { path: join(dir, "single", "q") }),
      },
      {
        name: "docker basedir moves (delete first: one name per engine)",
        ws: "dk-a",
        expect: "replace",
        files: "gone",
        edit: (s) => withBackend(s, { basedir: join(dir, "docker2") }),
      },
      { name: "bubblewrap basedir moves", ws: "bw-a", expect: "replace", files: "gone", edit: (s) => withBackend(s, { basedir: join(dir, "bwrap2") }) },
      { name: "bubblewrap userId changes on an ephemeral workspace", ws: "bw-e", expect: "replace", files: "gone", edit: (s) => ({ ...s, userId: "ops2" }) },
    ],
  },
  {
    name: "fleet structure",
    add: () => [{ workspaceId: id("loc-n"), agentId: "newcomer", backend: { kind: "local", basedir: join(dir, "local") } }],
    entries: [
      { name: "a workspace renamed (its id changes)", ws: "loc-a", expect: "rename", files: "gone", edit: (s) => ({ ...s, workspaceId: id("loc-b") }) },
      { name: "a workspace removed", ws: "dk-e", expect: "delete", edit: () => null },
      { name: "a workspace added", ws: "loc-n", expect: "create" },
      {
        name: "kind changes local → bubblewrap",
        ws: "loc-p",
        expect: "replace",
        files: "gone",
        edit: (s) => ({ ...s, backend: bwrap ? { kind: "bubblewrap", basedir: join(dir, "bwrap") } : { kind: "local", basedir: join(dir, "local") } }),
      },
    ],
  },
  {
    name: "forced",
    replace: ["bw-a"],
    entries: [
      { name: "--replace a bubblewrap workspace (same folder: files kept)", ws: "bw-a", expect: "replace", object: "same", files: "kept" },
      { name: "docker: caCertificates added", ws: "dk-a", expect: "recreate", edit: (s) => withBackend(s, { caCertificates: caFile() }) },
    ],
  },
);

function caFile(): string {
  const f = join(dir, "ro", "extra-ca.pem");
  writeFileSync(f, "# no certificate: an empty bundle appended to the trust store\n");
  return f;
}

describe.sequential("the spec-change catalogue on the real engine", () => {
  it("has at least 40 entries over every backend", () => {
    const all = steps.flatMap((s) => s.entries);
    expect(all.length).toBeGreaterThanOrEqual(40);
    for (const prefix of ["loc-", "bw-", "dk-"]) expect(all.some((e) => e.ws.startsWith(prefix))).toBe(true);
  });

  it("the first up creates every workspace; a second preview is clean", async () => {
    const up = await upWithPreview(stack, { color: "never" });
    const fleet = fleetOf(up.outputs);
    expect(Object.keys(fleet)).toHaveLength(specs.length);
    for (const e of Object.values(fleet)) await writeMarker(e);
    expect((await previewModel()).changes).toEqual([]);
    await expectStateMatchesBackend(fleet);
  });

  for (const step of steps)
    it(`${step.name}`, async () => {
      const entries = step.entries.filter((e) => has(e.ws));
      const before = fleetOf(await stack.outputs());
      const identities = new Map<string, string | undefined>();
      for (const [wsId, e] of Object.entries(before)) identities.set(wsId, (await backendOf(e)).identity);
      // The edits.
      const renames = new Map<string, string>();
      for (const e of entries) {
        if (!e.edit) continue;
        const i = specs.findIndex((s) => s.workspaceId === id(e.ws));
        const next = e.edit(specs[i]!);
        if (next === null) specs.splice(i, 1);
        else {
          specs[i] = JSON.parse(JSON.stringify(next)) as Spec;
          if (next.workspaceId !== id(e.ws)) renames.set(id(e.ws), next.workspaceId);
        }
      }
      for (const a of step.add?.() ?? []) specs.push(a);
      if (step.deleteData !== undefined) deleteData = step.deleteData;
      writeFleet(step.restyle?.(specs));

      let plan: PreviewModel | undefined;
      const up = await upWithPreview(stack, {
        color: "never",
        onPlan: (m) => (plan = m),
        ...(step.allowDataLoss ? { allowDataLoss: true } : {}),
        ...(step.replace ? { replaceWorkspaces: step.replace.map(id) } : {}),
      });
      const after = fleetOf(up.outputs);
      for (const e of entries) {
        const oldId = id(e.ws);
        const newId = renames.get(oldId) ?? oldId;
        const row = plan!.changes.find((c) => c.workspaceId === newId || c.workspaceId === oldId);
        // The fleet-level deleteData edit shows on every workspace: that entry speaks for its own.
        expect(row?.op ?? "none", `${e.name}: previewed as`).toBe(e.expect);
        if (e.expect === "delete") {
          expect(after[oldId]).toBeUndefined();
          expect((await backendOf(before[oldId]!)).found, `${e.name}: gone from the backend`).toBeNull();
          continue;
        }
        const now = after[newId]!;
        expect(now, `${e.name}: in the workspaces output`).toBeDefined();
        const { identity } = await backendOf(now);
        if (e.expect === "create") {
          expect(identity).toBeDefined();
          await writeMarker(now);
          continue;
        }
        const object = e.object ?? (["recreate", "replace", "rename"].includes(e.expect) ? "new" : "same");
        if (object === "same") expect(identity, `${e.name}: the same backend object`).toBe(identities.get(oldId));
        else expect(identity, `${e.name}: a new backend object`).not.toBe(identities.get(oldId));
        const files = e.files ?? (row?.data === "deleted" ? "gone" : "kept");
        expect(await readMarker(now), `${e.name}: files ${files}`).toBe(files === "kept" ? oldId : undefined);
        if (row?.data) expect(files === "kept" ? ["kept"] : ["deleted", "left-behind"], `${e.name}: the previewed data outcome`).toContain(row.data);
        if (newId !== oldId && renames.has(oldId)) expect((await backendOf(before[oldId]!)).found).toBeNull();
        await writeMarker(now);
      }
      // Nothing else moved: workspaces not in this step are the same objects.
      for (const [wsId, identity] of identities)
        if (after[wsId] && !entries.some((e) => id(e.ws) === wsId)) expect((await backendOf(after[wsId])).identity, `${wsId} untouched`).toBe(identity);
      expect((await previewModel()).changes, `${step.name}: a second preview is clean`).toEqual([]);
      await expectStateMatchesBackend(after);
    });

  it("a data-deleting re-create is refused without the opt-in, and nothing changes", async () => {
    if (!engine) return;
    specs.push({ workspaceId: id("dk-x"), agentId: "temp", backend: { kind: "docker", baseImage: BASE_IMAGE } });
    writeFleet();
    const made = fleetOf((await upWithPreview(stack, { color: "never" })).outputs)[id("dk-x")]!;
    await writeMarker(made);
    const container = (await backendOf(made)).identity;
    specs[specs.length - 1] = { ...specs.at(-1)!, tags: { stack: "catalogue", team: "x" } };
    writeFleet();
    expect((await previewModel()).changes).toMatchObject([{ op: "recreate", workspaceId: id("dk-x"), data: "deleted" }]);
    await expect(upWithPreview(stack, { color: "never" })).rejects.toThrow(/deletes its files.*--allow-data-loss/s);
    // The provider refuses it too when the CLI's own check is skipped.
    await expect(upWithPreview(stack, { color: "never", skipPreview: true })).rejects.toThrow(/deletes its files/);
    expect((await backendOf(made)).identity).toBe(container);
    expect(await readMarker(made)).toBe(id("dk-x"));
  });
});
