import { InvalidArgumentError, fromZodError } from "../errors.js";
import type { Driver } from "./driver.js";
import type { BackendCommand, BackendModule } from "./module.js";
import type { BackendKind, BackendSpec, BackendSpecInput } from "./spec.js";
import { BubblewrapBackendSchema } from "./bubblewrap/schema.js";
import { DaytonaBackendSchema } from "./daytona/schema.js";
import { DockerBackendSchema } from "./docker/schema.js";
import { E2BBackendSchema } from "./e2b/schema.js";
import { KubernetesBackendSchema } from "./kubernetes/schema.js";
import { LocalBackendSchema } from "./local/schema.js";
import { OpenSandboxBackendSchema } from "./opensandbox/schema.js";
import { attachedChangePolicy, type ChangePolicy } from "./shared/schema.js";

/**
 * The one place that maps a backend kind to its folder: schemas eager (option parsing, the fleet
 * file, Pulumi inputs need them without loading any backend code), modules lazy, so a Local user
 * never loads Docker's code and Pulumi provider methods capture nothing. Adding a backend is a
 * folder plus one line in each list below.
 */
export const BACKEND_SCHEMAS = [LocalBackendSchema, BubblewrapBackendSchema, DockerBackendSchema, KubernetesBackendSchema, OpenSandboxBackendSchema, DaytonaBackendSchema, E2BBackendSchema] as const;

type SpecOf<K extends BackendKind> = Extract<BackendSpec, { kind: K }>;

const MODULES: { [K in BackendKind]: () => Promise<{ backend: BackendModule<SpecOf<K>> }> } = {
  local: () => import("./local/index.js"),
  bubblewrap: () => import("./bubblewrap/index.js"),
  docker: () => import("./docker/index.js"),
  kubernetes: () => import("./kubernetes/index.js"),
  opensandbox: () => import("./opensandbox/index.js"),
  daytona: () => import("./daytona/index.js"),
  e2b: () => import("./e2b/index.js"),
};

/** Every registered kind, in registry order. */
export const BACKEND_KINDS = BACKEND_SCHEMAS.map((s) => s.shape.kind.value) as readonly BackendKind[];

/** The module of a kind; an InvalidArgumentError naming `backend.kind` for an unknown one. */
export async function loadBackend<K extends BackendKind>(kind: K): Promise<BackendModule<SpecOf<K>>> {
  const load = (Object.hasOwn(MODULES, kind) ? MODULES[kind] : undefined) as (() => Promise<{ backend: BackendModule<SpecOf<K>> }>) | undefined;
  if (!load) throw new InvalidArgumentError("backend.kind", `unknown backend kind '${String(kind)}' (known: ${BACKEND_KINDS.join(", ")})`);
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

/**
 * How spec changes apply to a kind's backend objects (the ChangePolicy its schema.ts attached), or
 * the safe default for a kind that declared none: every backend field replaces, tags update in
 * place, files go with the object (so a replace is flagged as deleting them).
 */
export function changePolicyOf(kind: unknown): ChangePolicy {
  const schema = BACKEND_SCHEMAS.find((s) => s.shape.kind.value === kind);
  return (schema && attachedChangePolicy(schema)) ?? { fields: {} };
}
