import { promises as fs } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import type { BackendDescription, Driver } from "../backends/driver.js";
import { BACKEND_KINDS, loadBackend } from "../backends/registry.js";
import type { BackendKind } from "../backends/spec.js";

/** The drivers of every backend that can run here (or the --kind ones), each with its basedir. */
async function drivers(kinds: string[] | undefined, basedir: string | undefined, err: (l: string) => void): Promise<Driver[]> {
  const out: Driver[] = [];
  for (const kind of kinds ?? BACKEND_KINDS) {
    try {
      const backend = await loadBackend(kind as BackendKind);
      const spec = backend.schema.parse({ kind, ...(basedir ? { basedir: path.resolve(basedir) } : {}) });
      const why = await backend.canRunHere(spec as never);
      if (why) err(`${kind}: skipped (${why})`);
      else out.push(backend.createDriver(spec as never));
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
export async function statusCommand(argv: string[]): Promise<number> {
  const err = (line: string) => process.stderr.write(`${line}\n`);
  const { values } = parseArgs({ args: argv, options: { kind: { type: "string", multiple: true }, basedir: { type: "string" }, json: { type: "boolean" } } });
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
    for (const d of listed)
      rows.push({ workspace: d.workspaceId, backend: d.kind, state: d.state, owner: d.userId ?? "-", agent: d.agentId ?? "-", managed: d.managedBy ?? "-", idle: await idleOf(d) });
  }
  if (values.json) {
    process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
    return 0;
  }
  const cols = ["workspace", "backend", "state", "owner", "agent", "managed", "idle"];
  const width = cols.map((c) => Math.max(c.length, ...rows.map((r) => r[c]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(width[i]!)).join("  ").trimEnd();
  process.stdout.write(`${[line(cols.map((c) => c.toUpperCase())), ...rows.map((r) => line(cols.map((c) => r[c]!)))].join("\n")}\n`);
  return 0;
}

/** `agentws exec <workspace> -- <command...>`: runs a command in a workspace on whichever backend holds it; a paused one is resumed and paused again. */
export async function execCommand(argv: string[]): Promise<number> {
  const err = (line: string) => process.stderr.write(`${line}\n`);
  const dash = argv.indexOf("--");
  const { values, positionals } = parseArgs({ args: dash >= 0 ? argv.slice(0, dash) : argv, allowPositionals: true, options: { kind: { type: "string", multiple: true }, basedir: { type: "string" }, timeout: { type: "string" } } });
  const command = dash >= 0 ? argv.slice(dash + 1) : [];
  const id = positionals[0];
  if (!id || command.length === 0) {
    err("usage: agentws exec <workspaceId> [--kind K] [--basedir DIR] [--timeout SECONDS] -- <command> [args...]");
    return 2;
  }
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
      const r = await sandbox.exec(command, { timeoutMs: Number(values.timeout ?? 600) * 1000 });
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
