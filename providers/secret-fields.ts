import * as pulumi from "@pulumi/pulumi";
import { InvalidArgumentError, fromZodError, joinField } from "../sdk/errors.js";
import { SECRET_MASK, SecretRefSchema, getAtPath, replaceAtPaths, secretFieldPaths, type SecretPath, type SecretRef } from "../sdk/contract/fleet.js";
import type { BackendSpec, BackendSpecInput } from "../sdk/contract/registry.js";
import type { McpServerSpec } from "../sdk/workspace/mcp-spec.js";
import { isObject } from "../sdk/util/records.js";
import { rememberSecret } from "../sdk/util/secret-values.js";

/**
 * Secret-bearing fields (see secretFieldPaths in sdk/contract/fleet.ts) in the Pulumi layer: a value is a
 * string, a `{ secret: "<config key>" }` reference to a stack config secret, or (in code) an
 * Output such as `config.requireSecret(...)`. Whatever the form, it is a Pulumi secret in state,
 * in the resource's outputs and in the fleet's `workspaces` output.
 */
export type SecretValue = string | SecretRef | pulumi.Output<string>;

type SecretMap = Record<string, SecretValue>;
type WithSecretKey<B> = B extends { apiKey?: unknown } ? Omit<B, "apiKey"> & { apiKey?: SecretValue } : B;
type WithSecretEnv<B> = WithSecretKey<B extends { env?: unknown } ? Omit<B, "env"> & { env?: SecretMap } : B>;
type WithSecretTransport<T> = T extends { type: "http" }
  ? Omit<T, "headers"> & { headers?: SecretMap }
  : T extends { type: "stdio" }
    ? Omit<T, "env"> & { env?: SecretMap }
    : T;
type WithSecretMcp<M> = M extends { transport: infer T } ? Omit<M, "transport"> & { transport: WithSecretTransport<T> } : M;
/** A spec shape whose secret-bearing values may be SecretValues. */
export type WithSecretValues<S extends { backend: unknown; defaultMcps?: unknown }> = Omit<S, "backend" | "defaultMcps"> & {
  backend: WithSecretEnv<S["backend"]>;
  defaultMcps?: WithSecretMcp<NonNullable<S["defaultMcps"]> extends (infer M)[] ? M : never>[];
};
export type SecretBackendInput = WithSecretEnv<BackendSpecInput>;
export type SecretBackend = WithSecretEnv<BackendSpec>;
export type SecretMcpServer = WithSecretMcp<McpServerSpec>;

export function isSecretRef(v: unknown): v is SecretRef {
  return isObject(v) && "secret" in v && !pulumi.Output.isInstance(v);
}

/**
 * Validates a spec whose secret-bearing values may be SecretValues: references are checked
 * (errors name `<field>.<path>.secret`), references and Outputs stand aside while `parse` checks
 * the rest, and come back at their paths in the parsed result.
 */
export function parseWithSecretValues<T>(raw: unknown, field: string, parse: (probe: unknown) => T): T {
  const held = new Map<string, SecretRef | pulumi.Output<string>>();
  const probe = replaceAtPaths(raw, secretFieldPaths(raw), (path, v) => {
    if (pulumi.Output.isInstance(v)) return hold(held, path, v as pulumi.Output<string>);
    if (isSecretRef(v)) {
      const ref = SecretRefSchema.safeParse(v);
      if (!ref.success) throw fromZodError(joinField(field, path), ref.error);
      return hold(held, path, ref.data);
    }
    // A string, or a wrong type the schema names.
    return v;
  });
  const parsed = parse(probe);
  const paths = [...held.keys()].map((k) => JSON.parse(k) as SecretPath);
  return replaceAtPaths(parsed, paths, (path) => held.get(JSON.stringify(path)));
}

function hold(held: Map<string, unknown>, path: SecretPath, v: unknown): string {
  held.set(JSON.stringify(path), v);
  return SECRET_MASK;
}

/**
 * Replaces each `{ secret: key }` reference with the stack config secret it names (an Output).
 * A key that is not set is an error naming the field and the key, never a value.
 */
export function resolveSecretRefs<T>(spec: T, field: string): T {
  return replaceAtPaths(spec, secretFieldPaths(spec), (path, v) => (isSecretRef(v) ? configSecret(v.secret, joinField(field, path)) : v));
}

function configSecret(key: string, field: string): pulumi.Output<string> {
  const colon = key.indexOf(":");
  const namespace = colon >= 0 ? key.slice(0, colon) : pulumi.getProject();
  const name = colon >= 0 ? key.slice(colon + 1) : key;
  const value = new pulumi.Config(namespace).getSecret(name);
  if (value === undefined)
    throw new InvalidArgumentError(
      `refers to stack config secret '${namespace}:${name}', which is not set; set it with \`pulumi config set --secret ${key} <value>\``,
      { field },
    );
  return value.apply((v) => (rememberSecret(v), v));
}

/**
 * `value` (a `backend` or `defaultMcps` input) with every secret-bearing leaf wrapped in
 * `pulumi.secret`, so only those leaves are encrypted and previews still name the other fields.
 * A value holding Outputs elsewhere is inspected when it resolves and made secret as a whole if
 * it holds any secret-bearing field.
 */
export function markSecretLeaves<T>(field: "backend" | "defaultMcps", value: T): T {
  if (value === undefined || value === null) return value;
  const root = { [field]: value };
  const paths = secretFieldPaths(root);
  // An Output anywhere but at a secret leaf may hide more secret leaves: judge it once resolved.
  if (hasDeferred(replaceAtPaths(root, paths, () => SECRET_MASK))) {
    const whole = pulumi.output(value as pulumi.Input<unknown>) as pulumi.Output<unknown>;
    return whole.apply((v) => {
      const resolved = secretFieldPaths({ [field]: v });
      for (const p of resolved) remember(p, { [field]: v });
      return resolved.length ? pulumi.secret(v) : v;
    }) as T;
  }
  const wrapped = replaceAtPaths(root, paths, (_path, v) => {
    if (typeof v === "string") rememberSecret(v);
    return v === undefined ? v : pulumi.secret(v as pulumi.Input<string>);
  });
  return wrapped[field] as T;
}

/** True when an Output or a promise sits anywhere in `value`. */
function hasDeferred(value: unknown, depth = 0): boolean {
  if (pulumi.Output.isInstance(value) || value instanceof Promise) return true;
  if (depth > 32) return false;
  if (Array.isArray(value)) return value.some((v) => hasDeferred(v, depth + 1));
  if (isObject(value)) return Object.values(value).some((v) => hasDeferred(v, depth + 1));
  return false;
}

function remember(path: SecretPath, root: unknown): void {
  const v = getAtPath(root, path);
  if (typeof v === "string") rememberSecret(v);
}

/** True when `value` (a spec-shaped object) has any secret-bearing field. */
export function hasSecretFields(value: unknown): boolean {
  return secretFieldPaths(value).length > 0;
}
