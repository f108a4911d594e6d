import { InvalidArgumentError, fromZodError } from "../errors.js";
import type { Driver } from "../contract/driver.js";
import type { BackendCommand, BackendModule } from "../contract/module.js";
import type { WorkspaceManager } from "../manager/manager.js";
import type { Workspace } from "../workspace/workspace.js";
import { BACKEND_KINDS, type BackendKind, type BackendSpecInput, type SpecOf } from "../contract/registry.js";

/**
 * Each kind's module, loaded on first use: a Local user never loads Docker's code and Pulumi
 * provider methods capture nothing. Only the entry points (CLI, service, providers, stacks) import
 * this file, so nothing a backend module loads can lead back here.
 */
/** What a kind's index.ts exports as `backend`: its descriptor, with the Manager class defineBackend built. */
type LoadedBackend<K extends BackendKind> = BackendModule<SpecOf<K>> & { readonly Manager: abstract new (...args: never[]) => object };

const MODULES: { [K in BackendKind]: () => Promise<{ backend: LoadedBackend<K> }> } = {
  local: () => import("./local/index.js"),
  bubblewrap: () => import("./bubblewrap/index.js"),
  docker: () => import("./docker/index.js"),
  kubernetes: () => import("./kubernetes/index.js"),
  opensandbox: () => import("./opensandbox/index.js"),
  daytona: () => import("./daytona/index.js"),
  e2b: () => import("./e2b/index.js"),
};

/** The module of a kind; an InvalidArgumentError naming `backend.kind` for an unknown one. */
export async function loadBackend<K extends BackendKind>(kind: K): Promise<BackendModule<SpecOf<K>>> {
  return loadDefined(kind);
}

/** A Manager of a kind, over its plain Workspace class (a service over any backend), taking the kind's manager options. */
export async function loadManager(kind: BackendKind): Promise<new (options: Record<string, unknown>) => WorkspaceManager<Workspace>> {
  return (await loadDefined(kind)).Manager as unknown as new (options: Record<string, unknown>) => WorkspaceManager<Workspace>;
}

async function loadDefined<K extends BackendKind>(kind: K): Promise<LoadedBackend<K>> {
  const load = (Object.hasOwn(MODULES, kind) ? MODULES[kind] : undefined) as (() => Promise<{ backend: LoadedBackend<K> }>) | undefined;
  if (!load) throw new InvalidArgumentError(`unknown backend kind '${String(kind)}' (known: ${BACKEND_KINDS.join(", ")})`, { field: "backend.kind" });
  return (await load()).backend;
}

/** The driver for a spec, parsed by its kind's schema. */
export async function loadDriver(spec: BackendSpecInput): Promise<Driver> {
  const backend = await loadBackend(spec.kind);
  const parsed = backend.schema.safeParse(spec);
  if (!parsed.success) throw fromZodError("backend", parsed.error);
  return backend.createDriver(parsed.data as never);
}

/** The sub-commands every backend adds to the CLI, with the kind that adds each. */
export async function backendCommands(): Promise<{ kind: BackendKind; command: BackendCommand }[]> {
  const out: { kind: BackendKind; command: BackendCommand }[] = [];
  for (const kind of BACKEND_KINDS) for (const command of (await loadBackend(kind)).commands ?? []) out.push({ kind, command });
  return out;
}
