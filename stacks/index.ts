import { homedir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { loadBackend } from "../sdk/backends/load.js";
import { InvalidArgumentError, UnsupportedError } from "../sdk/errors.js";
import { maskSecretFields, type WorkspaceSpec } from "../sdk/contract/fleet.js";
import { FLEET_OUTPUT_NAME, WorkspaceFleet, loadFleetFile, type FleetWorkspaceSpec } from "../providers/index.js";

/**
 * The stack program behind Pulumi.yaml, run by `pulumi up` and by `agentws up`. It reads one
 * fleet file (stack config `agentws:fleetFile`, default stacks/local.fleet.yaml) and
 * provisions it. Workspaces whose backend cannot run on this machine are left out with a
 * warning instead of failing the stack, so the default stack works on a fresh machine.
 */
export default async function program(): Promise<Record<string, unknown>> {
  const config = new pulumi.Config("agentws");
  const projectDir = process.cwd();
  const fleetFile = resolve(projectDir, config.get("fleetFile") ?? "stacks/local.fleet.yaml");
  const skipUnavailable = config.getBoolean("skipUnavailable") ?? true;
  let specs: FleetWorkspaceSpec[];
  try {
    specs = loadFleetFile(fleetFile).map((s) => withHostPaths(s, dirname(fleetFile)));
  } catch (e) {
    // Every mistake with its line, and no program stack trace: RunError is Pulumi's clean failure.
    throw e instanceof InvalidArgumentError ? new pulumi.RunError(e.message) : e;
  }

  const usable: FleetWorkspaceSpec[] = [];
  for (const spec of specs) {
    const reason = await unavailableReason(spec);
    if (!reason) usable.push(spec);
    else if (skipUnavailable) void pulumi.log.warn(`skipping workspace ${spec.workspaceId ?? `${spec.userId ?? ""}/${spec.agentId ?? ""}`}: ${reason}`);
    else throw new UnsupportedError(`${spec.backend.kind} workspace cannot run here: ${reason}`);
  }
  if (!usable.length) throw new UnsupportedError(`no workspace in ${fleetFile} can run on this machine; see the warnings above`);

  const fleet = new WorkspaceFleet("fleet", { workspaces: usable, deleteData: config.getBoolean("deleteData") ?? false });
  return { [FLEET_OUTPUT_NAME]: fleet.workspaces };
}

/** Host paths in fleet files may start with `~/` or be relative to the fleet file. */
function withHostPaths(spec: FleetWorkspaceSpec, base: string): FleetWorkspaceSpec {
  const fix = (p: string) => (p === "~" ? homedir() : p.startsWith("~/") ? join(homedir(), p.slice(2)) : isAbsolute(p) ? p : resolve(base, p));
  const backend = { ...spec.backend } as Record<string, unknown>;
  for (const key of ["basedir", "path"]) if (typeof backend[key] === "string") backend[key] = fix(backend[key]);
  const skillPaths = spec.skillPaths?.map(fix);
  return { ...spec, backend: backend as FleetWorkspaceSpec["backend"], ...(skillPaths ? { skillPaths } : {}) };
}

/** Why a workspace cannot be provisioned here, or undefined when it can. */
async function unavailableReason(fleetSpec: FleetWorkspaceSpec): Promise<string | undefined> {
  // Only the backend's kind and plain options matter here; secret references are not resolved yet.
  const spec = maskSecretFields(fleetSpec) as unknown as WorkspaceSpec;
  let backend;
  try {
    backend = await loadBackend(spec.backend.kind);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === "ERR_MODULE_NOT_FOUND") return `the ${spec.backend.kind} driver is not part of this build yet`;
    return `its driver failed to load: ${e instanceof Error ? e.message : String(e)}`;
  }
  // Host requirements (a binary, an engine) are the backend's own check.
  const parsed = backend.schema.safeParse(spec.backend);
  return parsed.success ? backend.canRunHere(parsed.data as never) : undefined;
}
