import type { Stack } from "@pulumi/pulumi/automation/index.js";
import { FLEET_OUTPUT_NAME, FleetOutputsSchema, SECRET_MASK, maskSecretFields, replaceAtPaths, type SecretPath } from "../contract/fleet.js";
import { maskSecrets } from "../util/mask.js";
import { isObject } from "../util/records.js";
import { WORKSPACE_TYPE_TOKEN } from "./preview-model.js";

/** The engine's marker on a secret value in exported state. */
const SECRET_SIG = "4dabf18193072939515e22adb298388d";

/**
 * Stack outputs as `agentws outputs` prints them: never a secret in plain text. A secret output
 * is "[secret]", except the fleet map (secret as soon as one workspace has a secret-bearing
 * value), which keeps its shape with every secret-bearing field masked, plus every field the
 * stack's state holds as a secret (a user's own `pulumi.secret` tag, say). Known secret strings
 * are masked in the whole text as a last guard.
 */
export async function printableOutputs(stack: Stack, secrets: string[]): Promise<string> {
  const outs = await stack.outputs();
  const shown: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(outs)) {
    if (!v.secret) shown[k] = v.value;
    else shown[k] = k === FLEET_OUTPUT_NAME ? maskFleet(v.value, await secretPathsById(stack)) : SECRET_MASK;
  }
  return maskSecrets(JSON.stringify(shown, null, 2), secrets);
}

function maskFleet(value: unknown, secretPaths: Map<string, SecretPath[]> | undefined): unknown {
  const fleet = FleetOutputsSchema.safeParse(value);
  if (!fleet.success || !secretPaths) return SECRET_MASK;
  const out: Record<string, unknown> = {};
  for (const [id, entry] of Object.entries(fleet.data)) {
    const paths = secretPaths.get(id);
    // A workspace the state does not describe by this id: nothing tells which fields are safe.
    if (!paths) out[id] = SECRET_MASK;
    else out[id] = replaceAtPaths(maskSecretFields(entry), paths, (_p, old) => (old === undefined ? old : SECRET_MASK));
  }
  return out;
}

/** Per workspace id, the paths its state holds as secrets (inputs leaf by leaf; `location` from outputs). */
async function secretPathsById(stack: Stack): Promise<Map<string, SecretPath[]> | undefined> {
  let resources: unknown[];
  try {
    const exported = await stack.exportStack();
    resources = ((exported.deployment as { resources?: unknown[] } | undefined)?.resources ?? []) as unknown[];
  } catch {
    return undefined;
  }
  const byId = new Map<string, SecretPath[]>();
  for (const r of resources) {
    if (!isObject(r) || r.type !== WORKSPACE_TYPE_TOKEN) continue;
    const inputs = isObject(r.inputs) ? r.inputs : {};
    const outputs = isObject(r.outputs) ? r.outputs : {};
    const id = typeof outputs.workspaceId === "string" ? outputs.workspaceId : typeof inputs.workspaceId === "string" ? inputs.workspaceId : undefined;
    if (!id) continue;
    const paths = secretPaths(inputs, []).filter((p) => p[0] !== "location");
    paths.push(...secretPaths(outputs.location, ["location"]));
    byId.set(id, paths);
  }
  return byId;
}

function secretPaths(value: unknown, at: SecretPath): SecretPath[] {
  if (isObject(value) && SECRET_SIG in value) return [at];
  if (Array.isArray(value)) return value.flatMap((v, i) => secretPaths(v, [...at, i]));
  if (isObject(value)) return Object.entries(value).flatMap(([k, v]) => secretPaths(v, [...at, k]));
  return [];
}
