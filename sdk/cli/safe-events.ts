import type { EngineEvent, Stack } from "@pulumi/pulumi/automation/index.js";
import { SECRET_MASK } from "../contract/fleet.js";
import { maskSecrets } from "../util/mask.js";
import { isObject } from "../util/records.js";
import { knownSecrets } from "../util/secret-values.js";

/**
 * Engine events, output lines, results and errors of a stack operation, masked before they
 * reach the caller's hooks: debug diagnostics in particular quote program values (a config
 * secret a component logged, RPC payloads). Masked are the stack's secret config values (and
 * the strings inside JSON ones) and every secret this process handed to Pulumi (fleet values,
 * resolved config references: sdk/util/secret-values.ts); values the engine still marks as
 * secrets are replaced whole.
 */
const SECRET_SIG = "4dabf18193072939515e22adb298388d";
const GUARDED = Symbol.for("agent-workspaces.guardedStack");
const OPERATIONS = ["up", "preview", "refresh", "previewRefresh", "destroy", "previewDestroy", "import"] as const;
const MAX_DEPTH = 64;

interface Hooks {
  onEvent?: (e: EngineEvent) => void;
  onOutput?: (s: string) => void;
  onError?: (s: string) => void;
}

/** The same stack, its operations' hooks, results and errors masked. Idempotent. */
export function guardStack(stack: Stack): Stack {
  const s = stack as unknown as Record<PropertyKey, unknown>;
  if (s[GUARDED]) return stack;
  for (const op of OPERATIONS) {
    const original = (s[op] as (opts?: Hooks) => Promise<unknown>).bind(stack);
    s[op] = async (opts: Hooks = {}) => {
      const secrets = await secretSource(stack);
      const hooks: Hooks = { ...opts };
      if (opts.onEvent) hooks.onEvent = (e) => opts.onEvent!(maskEvent(e, secrets()));
      if (opts.onOutput) hooks.onOutput = (line) => opts.onOutput!(maskSecrets(line, secrets()));
      if (opts.onError) hooks.onError = (line) => opts.onError!(maskSecrets(line, secrets()));
      try {
        return maskResult(await original(hooks), secrets());
      } catch (e) {
        throw maskError(e, secrets());
      }
    };
  }
  s[GUARDED] = true;
  return stack;
}

/** Secrets to mask, re-read as the program remembers more while it runs. */
async function secretSource(stack: Stack): Promise<() => string[]> {
  const fromConfig = await configSecrets(stack);
  let cachedFor = -1;
  let cached: string[] = [];
  return () => {
    const known = knownSecrets();
    if (known.length !== cachedFor) {
      cachedFor = known.length;
      cached = withEscapes([...fromConfig, ...known]);
    }
    return cached;
  };
}

/** The stack's secret config values, and every string inside those holding JSON. */
export async function configSecrets(stack: Stack): Promise<string[]> {
  const config = await stack.getAllConfig();
  return Object.values(config)
    .filter((v) => v.secret)
    .flatMap((v) => [v.value, ...jsonStrings(v.value)]);
}

/** A secret also appears JSON-escaped inside messages that quote JSON. */
function withEscapes(secrets: string[]): string[] {
  const out = new Set(secrets);
  for (const s of secrets) out.add(JSON.stringify(s).slice(1, -1));
  return [...out];
}

export function maskEvent(event: EngineEvent, secrets: string[]): EngineEvent {
  return maskDeep(event, secrets, 0) as EngineEvent;
}

function maskDeep(v: unknown, secrets: string[], depth: number): unknown {
  if (typeof v === "string") return maskSecrets(v, secrets);
  if (depth > MAX_DEPTH) return SECRET_MASK;
  if (Array.isArray(v)) return v.map((x) => maskDeep(x, secrets, depth + 1));
  if (isObject(v)) {
    if (SECRET_SIG in v && "value" in v) return { ...v, value: SECRET_MASK };
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, maskDeep(x, secrets, depth + 1)]));
  }
  return v;
}

/** Printed output in a result is masked; `outputs` stays as the Automation API defines it (decrypted, flagged). */
function maskResult(result: unknown, secrets: string[]): unknown {
  if (!isObject(result)) return result;
  const out: Record<string, unknown> = { ...result };
  for (const k of ["stdout", "stderr"]) if (typeof out[k] === "string") out[k] = maskSecrets(out[k], secrets);
  return out;
}

function maskError(e: unknown, secrets: string[]): unknown {
  if (!(e instanceof Error)) return typeof e === "string" ? maskSecrets(e, secrets) : e;
  e.message = maskSecrets(e.message, secrets);
  if (typeof e.stack === "string") e.stack = maskSecrets(e.stack, secrets);
  // CommandError keeps the whole command output beside its message.
  const result = (e as { commandResult?: unknown }).commandResult;
  if (isObject(result)) for (const k of ["stdout", "stderr"]) if (typeof result[k] === "string") result[k] = maskSecrets(result[k], secrets);
  return e;
}

export function jsonStrings(value: string): string[] {
  try {
    const parsed: unknown = JSON.parse(value);
    const out: string[] = [];
    const walk = (v: unknown, depth: number) => {
      if (typeof v === "string") out.push(v);
      else if (v && typeof v === "object" && depth < MAX_DEPTH) Object.values(v).forEach((x) => walk(x, depth + 1));
    };
    walk(parsed, 0);
    return out;
  } catch {
    return [];
  }
}
