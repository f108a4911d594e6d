import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { BackendDescription, Driver } from "../contract/driver.js";
import { collectGarbage } from "../kit/gc.js";
import { BACKEND_KINDS, BACKEND_SCHEMAS } from "../contract/registry.js";
import { loadBackend } from "../backends/load.js";
import type { BackendKind } from "../contract/registry.js";
import { readStackOutputs } from "../manager/fleet-source.js";
import { openSessionStore } from "../service/index.js";
import { fromZodError } from "../errors.js";

/**
 * Where host-folder backends keep workspaces when no --basedir is given: their default,
 * ~/.agent-workspaces/<kind> (the fleet files' convention), the service's runtime basedirs
 * (`agentws serve`: <kind>-runtime; the quick start: runtime) and the basedirs the stack in the
 * current folder declares. So `agentws status` shows what the fleet and
 * the service know about without flags.
 */
async function knownBasedirs(kind: string, fleetBasedirs: Map<string, Set<string>>): Promise<(string | undefined)[]> {
  const home = path.join(os.homedir(), ".agent-workspaces");
  const extra = [path.join(home, kind), path.join(home, `${kind}-runtime`), path.join(home, "runtime"), ...(fleetBasedirs.get(kind) ?? [])];
  const found: string[] = [];
  for (const dir of extra)
    if (
      !found.includes(dir) &&
      (await fs.stat(dir).then(
        (st) => st.isDirectory(),
        () => false,
      ))
    )
      found.push(dir);
  return [undefined, ...found];
}

/** Basedirs per kind that the current folder's stack declares (quietly none when there is no readable stack). */
async function stackBasedirs(err: (l: string) => void): Promise<Map<string, Set<string>>> {
  const out = new Map<string, Set<string>>();
  const cwd = process.cwd();
  if (
    !(await fs.stat(path.join(cwd, "Pulumi.yaml")).then(
      () => true,
      () => false,
    ))
  )
    return out;
  const stackName = process.env.AGENTWS_STACK ?? "local";
  try {
    const fleet = await readStackOutputs({ stackName, workDir: cwd });
    for (const entry of Object.values(fleet)) {
      const dir = (entry.backend as { basedir?: unknown }).basedir;
      if (typeof dir === "string") (out.get(entry.backend.kind) ?? out.set(entry.backend.kind, new Set()).get(entry.backend.kind)!).add(dir);
    }
  } catch (e) {
    err(`stack '${stackName}': not read (${e instanceof Error ? e.message.split("\n")[0] : String(e)})`);
  }
  return out;
}

/** The drivers of every backend that can run here (or the --kind ones): one per basedir worth looking in. */
async function drivers(kinds: string[] | undefined, basedir: string | undefined, err: (l: string) => void): Promise<Driver[]> {
  const out: Driver[] = [];
  const fleet = basedir ? new Map<string, Set<string>>() : await stackBasedirs(err);
  for (const kind of kinds ?? BACKEND_KINDS) {
    try {
      const backend = await loadBackend(kind as BackendKind);
      const hostFolders = BACKEND_SCHEMAS.some((schema) => schema.shape.kind.value === kind && "basedir" in schema.shape);
      const dirs = basedir ? [path.resolve(basedir)] : hostFolders ? await knownBasedirs(kind, fleet) : [undefined];
      for (const dir of dirs) {
        const parsed = backend.schema.safeParse({ kind, ...(dir && hostFolders ? { basedir: dir } : {}) });
        if (!parsed.success) {
          // A kind that needs settings (Kubernetes' image, ...) is listed with `--kind` and its options elsewhere.
          if (kinds) throw fromZodError("backend", parsed.error);
          err(`${kind}: skipped (${fromZodError("backend", parsed.error).message})`);
          break;
        }
        const spec = parsed.data;
        const why = await backend.canRunHere(spec as never);
        if (why) {
          err(`${kind}: skipped (${why})`);
          break;
        }
        out.push(backend.createDriver(spec as never));
      }
    } catch (e) {
      if (kinds) throw e;
      err(`${kind}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  return out;
}

/** Seconds since the newest change at the top of a host folder: an idle estimate where the backend is a host folder. */
async function idleOf(d: BackendDescription): Promise<string> {
  const dir = d.location.hostPath;
  if (!dir) return "-";
  try {
    const names = (await fs.readdir(dir)).slice(0, 1000);
    let newest = (await fs.lstat(dir)).mtimeMs;
    for (const n of names) newest = Math.max(newest, (await fs.lstat(path.join(dir, n))).mtimeMs);
    const s = Math.max(0, (Date.now() - newest) / 1000);
    return s < 120 ? `${s.toFixed(0)}s` : s < 7200 ? `${(s / 60).toFixed(0)}m` : `${(s / 3600).toFixed(1)}h`;
  } catch {
    return "-";
  }
}

/** `agentws status`: a table of the workspaces every backend manages (ours by label), with state, owner and idle time. */
export async function statusCommand(values: { kind?: string[] | undefined; basedir?: string | undefined; json?: boolean | undefined }): Promise<number> {
  const err = (line: string) => process.stderr.write(`${line}\n`);
  const rows: Array<Record<string, string>> = [];
  for (const driver of await drivers(values.kind, values.basedir, err)) {
    let listed: BackendDescription[];
    try {
      listed = await driver.list();
    } catch (e) {
      // An engine that is not up: reported, the other backends still listed (a named --kind fails the command).
      if (values.kind) throw e;
      err(`${driver.kind}: skipped (${e instanceof Error ? e.message : String(e)})`);
      continue;
    }
    for (const d of listed) {
      // Several basedirs of one engine (Docker) list the same workspace: once each.
      if (rows.some((r) => r.workspace === d.workspaceId && r.backend === d.kind)) continue;
      rows.push({
        workspace: d.workspaceId,
        backend: d.kind,
        state: d.state,
        owner: d.userId ?? "-",
        agent: d.agentId ?? "-",
        managed: d.managedBy ?? "-",
        idle: await idleOf(d),
        awake: d.state === "running" ? await whyAwake(driver, d) : "-",
      });
    }
  }
  if (values.json) {
    process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
    return 0;
  }
  const cols = ["workspace", "backend", "state", "owner", "agent", "managed", "idle", "awake"];
  const width = cols.map((c) => Math.max(c.length, ...rows.map((r) => r[c]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(width[i]!))
      .join("  ")
      .trimEnd();
  process.stdout.write(`${[line(cols.map((c) => c.toUpperCase())), ...rows.map((r) => line(cols.map((c) => r[c]!)))].join("\n")}\n`);
  return 0;
}

/**
 * Why a running workspace is up: the service replicas holding a fresh lease on it (each renews
 * while it uses the workspace, and pauses it only when no other lease is fresh), else nothing: it
 * was left running, and a manager pauses it after its idle TTL.
 */
async function whyAwake(driver: Driver, d: BackendDescription): Promise<string> {
  const holders = await driver.leases?.holders?.(d.workspaceId).catch(() => undefined);
  if (holders === undefined) return "unknown (the backend keeps no leases)";
  if (holders.length === 0) return "no lease (left running; paused after an idle TTL by a manager)";
  const until = new Date(Math.max(...holders.map((h) => h.expiresAt))).toISOString().slice(11, 19);
  return `leased by ${holders.length} replica(s) (${holders.map((h) => h.replicaId.slice(0, 8)).join(", ")}) until ${until} UTC`;
}

/** `agentws exec <workspace> -- <command...>`: runs a command in a workspace on whichever backend holds it; a paused one is resumed and paused again. */
export async function execCommand(
  id: string,
  command: string[],
  values: { kind?: string[] | undefined; basedir?: string | undefined; timeout?: number | undefined },
): Promise<number> {
  const err = (line: string) => process.stderr.write(`${line}\n`);
  for (const driver of await drivers(values.kind, values.basedir, err)) {
    let found: BackendDescription | null;
    try {
      found = await driver.find(id);
    } catch (e) {
      if (values.kind) throw e;
      err(`${driver.kind}: skipped (${e instanceof Error ? e.message : String(e)})`);
      continue;
    }
    if (!found) continue;
    const wasRunning = found.state === "running";
    if (!wasRunning) await driver.resume(id);
    const sandbox = await driver.connect(id);
    try {
      const r = await sandbox.exec(command, { timeoutMs: (values.timeout ?? 600) * 1000 });
      process.stdout.write(r.stdout);
      process.stderr.write(r.stderr);
      if (r.timedOut) err(`agentws exec: timed out after ${values.timeout ?? 600} s`);
      return r.exitCode < 0 ? 124 : r.exitCode;
    } finally {
      await sandbox.close?.();
      if (!wasRunning) await driver.pause(id);
    }
  }
  err(`agentws exec: no workspace '${id}' on ${values.kind?.join(", ") ?? "any backend that runs here"}`);
  return 1;
}

/**
 * `agentws gc`: orphans of every backend (or the --kind ones): runtime-managed objects with no
 * owner, in this basedir only (with --store, also owned ones no session names). A dry run unless
 * --yes, as `destroy` is: removal deletes files.
 */
export async function gcCommand(values: {
  kind?: string[] | undefined;
  basedir?: string | undefined;
  store?: string | undefined;
  yes?: boolean | undefined;
  dryRun?: boolean | undefined;
}): Promise<number> {
  const err = (line: string) => process.stderr.write(`${line}\n`);
  // With a session store: owned runtime workspaces whose sessions are all gone are collected too.
  const referenced = values.store ? await referencedWorkspaces(values.store) : undefined;
  const remove = values.yes === true && values.dryRun !== true;
  const kinds = values.kind ?? [...BACKEND_KINDS];
  const results: unknown[] = [];
  let failed = false;
  for (const kind of kinds) {
    try {
      const backend = await loadBackend(kind as BackendKind);
      const spec = backend.schema.parse({ kind, ...(values.basedir ? { basedir: path.resolve(values.basedir) } : {}) });
      const why = await backend.canRunHere(spec as never);
      if (why) {
        err(`${kind}: skipped (${why})`);
        continue;
      }
      const r = await collectGarbage(backend.createDriver(spec as never), { remove, ...(referenced ? { referenced } : {}) });
      for (const o of r.orphans) err(`${kind}: ${r.removed.includes(o.workspaceId) ? "removed" : remove ? "kept" : "would remove"} ${o.workspaceId}`);
      for (const k of r.kept) err(`${kind}: kept ${k.workspaceId}: ${k.reason}`);
      results.push({ ...r, orphans: r.orphans.map((o) => ({ workspaceId: o.workspaceId, state: o.state, location: o.location })) });
    } catch (e) {
      // An explicitly named kind failing fails the command; an implicit one (no engine here) is reported.
      if (values.kind) failed = true;
      err(`${kind}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  if (!remove) err("dry run: nothing removed (pass --yes to remove them with their files)");
  process.stdout.write(`${JSON.stringify({ dryRun: !remove, results }, null, 2)}\n`);
  return failed ? 1 : 0;
}

async function referencedWorkspaces(location: string): Promise<Set<string>> {
  const store = await openSessionStore(location);
  try {
    return await store.workspaceIds();
  } finally {
    await store.close();
  }
}
