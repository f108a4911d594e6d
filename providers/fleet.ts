import { readFileSync } from "node:fs";
import * as pulumi from "@pulumi/pulumi";
import { LineCounter, isMap, isScalar, parseDocument, type Document } from "yaml";
import { z } from "zod";
import { ConflictError, InvalidArgumentError, WorkspaceError, joinField, TooLargeError } from "../sdk/errors.js";
import { WorkspaceSpecSchema, type FleetEntry, type FleetOutputs, type WorkspaceSpec, type WorkspaceSpecInput } from "../sdk/contract/fleet.js";
import { defaultWorkspaceId, issueToFailure } from "./inputs.js";
import { DataLedger } from "./ledger.js";
import { dataHomeOf, type DataHome } from "./ledger-state.js";
import { WorkspaceResource, type WorkspaceResourceArgs } from "./resource.js";
import { hasSecretFields, parseWithSecretValues, resolveSecretRefs, type WithSecretValues } from "./secret-fields.js";

/**
 * A workspace as a fleet declares it: a WorkspaceSpec whose secret-bearing values (`backend.env`,
 * MCP `transport.headers` and `transport.env` values) may also be `{ secret: "<config key>" }`
 * references to stack config secrets or, in code, Outputs such as `config.requireSecret(...)`.
 */
export type FleetWorkspaceInput = WithSecretValues<WorkspaceSpecInput>;
/** A validated FleetWorkspaceInput, as loadFleetFile returns it (references not yet resolved). */
export type FleetWorkspaceSpec = WithSecretValues<WorkspaceSpec>;

/** A fleet file (YAML or JSON): shared defaults merged under each workspace's own fields. */
export const FleetFileSchema = z.strictObject({
  defaults: z.record(z.string(), z.unknown()).optional(),
  workspaces: z.array(z.record(z.string(), z.unknown())).min(1, "a fleet needs at least one workspace"),
});

export interface WorkspaceFleetArgs {
  /** Workspaces declared in code. Secret-bearing values are stored as Pulumi secrets. */
  workspaces?: FleetWorkspaceInput[];
  /** A YAML/JSON fleet file (`defaults` + `workspaces`); its entries come after `workspaces`. */
  file?: string;
  /** Also delete persistent data when a workspace leaves the fleet or the stack is destroyed. */
  deleteData?: boolean;
  /** Backend credentials for every workspace; stored as a secret. */
  credentials?: pulumi.Input<Record<string, pulumi.Input<string>>>;
}

/**
 * A set of workspaces, one WorkspaceResource each, named by workspace id. `workspaces` is the
 * stack output the runtime manager reads (FleetOutputsSchema, keyed by workspace id). When any
 * workspace has a secret-bearing value the whole output is a Pulumi secret: `fromStack` (the
 * Automation API) decrypts it, `pulumi stack output` shows it only with `--show-secrets`, and
 * `agentws outputs` prints it with those values masked.
 */
export class WorkspaceFleet extends pulumi.ComponentResource {
  readonly workspaces: pulumi.Output<FleetOutputs>;
  readonly resources: Record<string, WorkspaceResource>;
  /** Where the fleet's workspaces keep their files, and the files earlier ones left behind (see DataLedger). */
  readonly ledger: DataLedger;

  constructor(name: string, args: WorkspaceFleetArgs, opts: pulumi.ComponentResourceOptions = {}) {
    super("agentws:index:WorkspaceFleet", name, {}, opts);
    // Each spec with the name errors give it: code entries by index, file entries by file and index.
    const specs = [
      ...(args.workspaces ?? []).map((s, i) => ({ spec: parseSpec(s, `workspaces[${i}]`), field: `workspaces[${i}]` })),
      ...(args.file ? loadFleetFile(args.file).map((spec, i) => ({ spec, field: `fleet file ${args.file}: workspaces[${i}]` })) : []),
    ];
    const planned: { id: string; args: WorkspaceResourceArgs }[] = [];
    const homes: DataHome[] = [];
    for (const { spec, field } of specs) {
      const id = spec.workspaceId ?? defaultWorkspaceId(spec.userId, spec.agentId);
      if (planned.some((p) => p.id === id)) throw new ConflictError(`fleet '${name}': ${field} repeats workspace id '${id}'; ids must be unique`, { field });
      const resolved = resolveSecretRefs(spec, field) as unknown as WorkspaceSpec;
      planned.push({ id, args: { ...resolved, workspaceId: id, deleteData: args.deleteData, credentials: args.credentials } });
      // Only the plain fields saying where the files live (never env or other secret-bearing values).
      const home = dataHomeOf({ workspaceId: id, userId: spec.userId, backend: spec.backend });
      if (home) homes.push(home);
    }
    // Created before every workspace and deleted after them all (they depend on it).
    this.ledger = new DataLedger(
      `${name}-data-ledger`,
      { deleteData: args.deleteData === true, homes: homes.sort((a, b) => a.key.localeCompare(b.key)) },
      { parent: this },
    );
    this.resources = {};
    for (const { id, args: resourceArgs } of planned)
      this.resources[id] = new WorkspaceResource(`${name}-${id}`, resourceArgs, { parent: this, dependsOn: [this.ledger] });
    const entries = Object.values(this.resources).map((r) => fleetEntryOf(r));
    const all = pulumi.all(entries).apply((list) => Object.fromEntries(list.map((e) => [e.workspaceId, e])));
    // The engine already marks it secret when a resource output is; say so in code too.
    this.workspaces = specs.some((s) => hasSecretFields(s.spec)) ? pulumi.secret(all) : all;
    this.registerOutputs({ workspaces: this.workspaces });
  }
}

/** One fleet entry from a resource's outputs: the spec fields, never credentials. */
function fleetEntryOf(r: WorkspaceResource): pulumi.Output<FleetEntry> {
  return pulumi
    .output({
      workspaceId: r.workspaceId,
      userId: r.userId,
      agentId: r.agentId,
      backend: r.backend,
      skillPaths: r.skillPaths,
      defaultMcps: r.defaultMcps,
      tags: r.tags,
      ttlSeconds: r.ttlSeconds,
      location: r.location,
    })
    .apply((o) => {
      const entry: Record<string, unknown> = { ...o, managedBy: "pulumi", location: o.location ?? {} };
      for (const k of Object.keys(entry)) if (entry[k] === undefined || entry[k] === null) delete entry[k];
      return entry as FleetEntry;
    });
}

function parseSpec(value: unknown, field: string): FleetWorkspaceSpec {
  return parseWithSecretValues(value, field, (probe) => parsePlainSpec(probe, field)) as unknown as FleetWorkspaceSpec;
}

function parsePlainSpec(value: unknown, field: string): WorkspaceSpec {
  const r = WorkspaceSpecSchema.safeParse(value);
  if (r.success) return r.data;
  const failures = r.error.issues.map((i) => issueToFailure(i));
  const first = failures[0]!;
  const more =
    failures.length > 1
      ? ` (and ${failures.length - 1} more: ${failures
          .slice(1)
          .map((f) => `${field}.${f.property}`)
          .join(", ")})`
      : "";
  throw new InvalidArgumentError(`${first.reason.slice(first.property.length + 2)}${more}`, { field: `${field}.${first.property}` });
}

/** One mistake in a fleet file: where (line, field path) and what. */
export interface FleetFileProblem {
  line: number;
  field: string;
  message: string;
}

/** A fleet file holds at most this much (it is read whole). */
const MAX_FLEET_FILE_BYTES = 16 * 1024 * 1024;

/**
 * Reads and validates a fleet file, reporting every mistake at once, each as
 * `file:line: field: message` with the line where the mistake is: a bad value under `defaults:` is
 * blamed on `defaults`, once, not on every workspace that inherits it. Secret-bearing values may be
 * `{ secret: "<config key>" }`; WorkspaceFleet resolves them from stack config.
 */
export function loadFleetFile(path: string): FleetWorkspaceSpec[] {
  let text: string;
  try {
    const buf = readFileSync(path);
    if (buf.length > MAX_FLEET_FILE_BYTES) throw new TooLargeError(`it is over ${MAX_FLEET_FILE_BYTES} bytes`);
    text = buf.toString("utf8");
  } catch (e) {
    throw new InvalidArgumentError(`cannot be read: ${e instanceof Error ? e.message : String(e)}`, { field: `fleet file ${path}`, cause: e });
  }
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const problems: FleetFileProblem[] = doc.errors.map((e) => ({
    line: lineCounter.linePos(e.pos[0]).line,
    field: "(yaml)",
    message: e.message.split("\n")[0]!,
  }));
  if (problems.length) throw fleetFileError(path, problems);
  const lineOf = (at: ReadonlyArray<PropertyKey>): number => {
    // The deepest node that exists along the path (a missing field is blamed on its parent).
    for (let n = at.length; n >= 0; n--) {
      const node = doc.getIn(at.slice(0, n) as unknown[], true) as { range?: [number, number, number] } | undefined;
      const pair = n > 0 ? findKeyNode(doc, at.slice(0, n)) : undefined;
      const start = pair ?? node?.range?.[0];
      if (start !== undefined) return lineCounter.linePos(start).line;
    }
    return 1;
  };
  const file = FleetFileSchema.safeParse(doc.toJS());
  if (!file.success)
    throw fleetFileError(
      path,
      file.error.issues.map((i) => ({ line: lineOf(i.path), field: joinField("", i.path) || "(root)", message: i.message })),
    );
  const defaults = file.data.defaults ?? {};
  const seen = new Set<string>();
  const specs: FleetWorkspaceSpec[] = [];
  file.data.workspaces.forEach((w, i) => {
    const merged = { ...defaults, ...w };
    let issues: z.core.$ZodIssue[] = [];
    try {
      const spec = parseWithSecretValues(merged, `workspaces[${i}]`, (probe) => {
        const r = WorkspaceSpecSchema.safeParse(probe);
        if (r.success) return r.data;
        issues = r.error.issues;
        return undefined;
      }) as unknown as FleetWorkspaceSpec | undefined;
      if (spec) specs.push(spec);
    } catch (e) {
      // A malformed `{ secret: ... }` reference: its field is already named.
      const field = e instanceof WorkspaceError && e.field ? e.field : `workspaces[${i}]`;
      problems.push({ line: lineOf(["workspaces", i]), field, message: e instanceof Error ? e.message.replace(`${field}: `, "") : String(e) });
    }
    for (const issue of issues) {
      // Blame the section the offending top-level key came from: the workspace's own, else defaults.
      const top = issue.code === "unrecognized_keys" ? issue.keys[0] : issue.path[0];
      const own = top === undefined || Object.hasOwn(w, top as string);
      const keys = issue.code === "unrecognized_keys" ? issue.keys.map((k) => [...issue.path, k]) : [issue.path];
      for (const key of keys) {
        const at = own ? ["workspaces", i, ...key] : ["defaults", ...key];
        const field = joinField("", at);
        const message =
          issue.code === "unrecognized_keys"
            ? "unknown field; check the spelling against the WorkspaceSpec schema"
            : issueToFailure(issue).reason.replace(/^[^:]*: /, "");
        const id = `${field}\0${message}`;
        if (seen.has(id)) continue;
        seen.add(id);
        problems.push({ line: lineOf(at), field, message });
      }
    }
  });
  if (problems.length) throw fleetFileError(path, problems);
  return specs;
}

/** The key node's offset of a mapping entry at `at` (so a bad value is blamed on its key's line). */
function findKeyNode(doc: Document, at: ReadonlyArray<PropertyKey>): number | undefined {
  const parent = doc.getIn(at.slice(0, -1) as unknown[], true);
  if (!isMap(parent)) return undefined;
  const pair = parent.items.find((p) => (isScalar(p.key) ? p.key.value : p.key) === at.at(-1));
  return isScalar(pair?.key) ? pair.key.range?.[0] : undefined;
}

function fleetFileError(path: string, problems: FleetFileProblem[]): InvalidArgumentError {
  problems.sort((a, b) => a.line - b.line);
  const lines = problems.map((p) => `${path}:${p.line}: ${p.field}: ${p.message}`);
  const summary = problems.length === 1 ? "1 mistake" : `${problems.length} mistakes`;
  return new InvalidArgumentError(`${summary}\n${lines.join("\n")}`, { field: `fleet file ${path}`, details: { problems } });
}
