import { z } from "zod";
import { BubblewrapBackendSchema } from "../backends/bubblewrap/schema.js";
import { DaytonaBackendSchema } from "../backends/daytona/schema.js";
import { DockerBackendSchema } from "../backends/docker/schema.js";
import { E2BBackendSchema } from "../backends/e2b/schema.js";
import { KubernetesBackendSchema } from "../backends/kubernetes/schema.js";
import { LocalBackendSchema } from "../backends/local/schema.js";
import { OpenSandboxBackendSchema } from "../backends/opensandbox/schema.js";
import { attachedChangePolicy, type ChangePolicy } from "./schema.js";

/**
 * The one place that names every backend kind: their option schemas, eagerly (option parsing, the
 * fleet file, Pulumi inputs and HTTP bodies need them without loading any backend code). Each
 * schema.ts imports only the contract, so this reach into the kind folders is data, not code; the
 * modules themselves load lazily through backends/load.ts. Adding a backend is one line here and
 * one in load.ts.
 */
export const BACKEND_SCHEMAS = [
  LocalBackendSchema,
  BubblewrapBackendSchema,
  DockerBackendSchema,
  KubernetesBackendSchema,
  OpenSandboxBackendSchema,
  DaytonaBackendSchema,
  E2BBackendSchema,
] as const;

/** Backend options: the union of every kind's schema, the single source of truth for constructors, manager options, Pulumi inputs and HTTP bodies. */
export const BackendSpecSchema = z.discriminatedUnion("kind", [...BACKEND_SCHEMAS]);

export type BackendSpec = z.infer<typeof BackendSpecSchema>;
export type BackendKind = BackendSpec["kind"];
export type BackendSpecInput = z.input<typeof BackendSpecSchema>;
export type SpecOf<K extends BackendKind> = Extract<BackendSpec, { kind: K }>;

/** Every registered kind, in registry order. */
export const BACKEND_KINDS = BACKEND_SCHEMAS.map((s) => s.shape.kind.value) as readonly BackendKind[];

export { WORKSPACE_ID_PATTERN, WorkspaceIdSchema, parseWorkspaceId, DEFAULT_MAX_PROCESSES, DEFAULT_MEMORY_BYTES, DEFAULT_CPUS } from "./schema.js";

/**
 * How spec changes apply to a kind's backend objects (the ChangePolicy its schema.ts attached), or
 * the safe default for a kind that declared none: every backend field replaces, tags update in
 * place, files go with the object (so a replace is flagged as deleting them).
 */
export function changePolicyOf(kind: unknown): ChangePolicy {
  const schema = BACKEND_SCHEMAS.find((s) => s.shape.kind.value === kind);
  return (schema && attachedChangePolicy(schema)) ?? { fields: {} };
}
