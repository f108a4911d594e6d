import { randomBytes } from "node:crypto";
import { joinField } from "../errors.js";
import { fromMcpJson, toMcpJson, type McpServerSpec } from "./mcp-spec.js";
import { isObject } from "../util/records.js";

/**
 * The `.mcp` file: reference-compatible (version 2 nested by agent then session; a top-level
 * array is version 1, the legacy scope). Reading is forgiving entry by entry, but whatever could
 * not be read marks the file `unreadable`, and the registry never rewrites such a file (that would
 * drop what it did not understand). Serialising is byte-compatible with the reference's
 * `json.dumps(indent=2, ensure_ascii=False)`.
 */
export const MCP_FILE = ".mcp";

export interface McpScopeEntry {
  agentId: string;
  sessionId: string;
  specs: McpServerSpec[];
}

export interface ParsedMcpFile {
  scopes: McpScopeEntry[];
  /** Human-readable reasons for everything skipped; empty when the file was clean. */
  warnings: string[];
  /**
   * Set when the file holds something this parser could not read (the whole file, or a scope or
   * an entry): rewriting it would lose that, so the registry refuses writes while this is set.
   */
  unreadable?: string;
}

/** The `.mcp` versions this release reads (1: a top-level array; 2: `{version: 2, mcps}`). */
export const MCP_FILE_VERSION = 2;
/** A `.mcp` larger than this is not read (and, being unread, never rewritten). */
export const MAX_MCP_FILE_BYTES = 16 * 1024 * 1024;

/** Why a write is refused, naming the file and what to do. */
export function unreadableMcpFileMessage(problem: string): string {
  return `${MCP_FILE} in the workspace could not be read completely (${problem}); it was left untouched, and MCP declarations cannot be changed until the file is repaired or deleted (deleting it loses the registrations it holds)`;
}

export function parseMcpFile(text: string): ParsedMcpFile {
  const whole = (problem: string): ParsedMcpFile => ({
    scopes: [],
    warnings: [`${MCP_FILE} ${problem}; using default MCPs for every scope, and refusing to rewrite it until it is repaired or deleted`],
    unreadable: problem,
  });
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    return whole(`is not valid JSON (${(e as Error).message})`);
  }
  const warnings: string[] = [];
  const skipped: string[] = [];
  const done = (scopes: McpScopeEntry[]): ParsedMcpFile =>
    skipped.length ? { scopes, warnings, unreadable: `${skipped.length} part(s) not understood, first: ${skipped[0]}` } : { scopes, warnings };
  if (Array.isArray(doc)) {
    // Version 1: a flat list for the legacy scope ("", "").
    return done([{ agentId: "", sessionId: "", specs: parseList(doc, "[]", warnings, skipped) }]);
  }
  if (!isObject(doc)) return whole("must be a JSON object or array");
  if ("version" in doc && doc.version !== MCP_FILE_VERSION)
    return whole(`has version ${JSON.stringify(doc.version)}, which this release does not read (it reads versions 1 and ${MCP_FILE_VERSION})`);
  const mcps = doc.mcps;
  if (!isObject(mcps)) return whole("has no 'mcps' object");
  const scopes: McpScopeEntry[] = [];
  for (const [agentId, sessions] of Object.entries(mcps)) {
    if (!isObject(sessions)) {
      warnings.push(`${MCP_FILE}: mcps['${agentId}'] is not an object; skipped`);
      skipped.push(`mcps['${agentId}']`);
      continue;
    }
    for (const [sessionId, list] of Object.entries(sessions)) {
      if (!Array.isArray(list)) {
        warnings.push(`${MCP_FILE}: mcps['${agentId}']['${sessionId}'] is not a list; skipped`);
        skipped.push(`mcps['${agentId}']['${sessionId}']`);
        continue;
      }
      scopes.push({ agentId, sessionId, specs: parseList(list, `mcps['${agentId}']['${sessionId}']`, warnings, skipped) });
    }
  }
  return done(scopes);
}

function parseList(list: unknown[], where: string, warnings: string[], skipped: string[]): McpServerSpec[] {
  const specs: McpServerSpec[] = [];
  list.forEach((entry, i) => {
    const label = isObject(entry) && typeof entry.name === "string" ? `'${entry.name}'` : `#${i}`;
    let spec: McpServerSpec;
    try {
      spec = fromMcpJson(entry);
    } catch (e) {
      warnings.push(`${MCP_FILE}: skipped invalid MCP ${label} in ${where}: ${describeError(e)}`);
      skipped.push(`MCP ${label} in ${where}`);
      return;
    }
    // A repeated name was read (the first is kept): dropping the copy on rewrite loses nothing in use.
    if (specs.some((s) => s.name === spec.name)) {
      warnings.push(`${MCP_FILE}: skipped duplicate MCP '${spec.name}' in ${where}`);
      return;
    }
    specs.push(spec);
  });
  return specs;
}

function describeError(e: unknown): string {
  const issues = (e as { issues?: Array<{ path: PropertyKey[]; message: string }> }).issues;
  if (Array.isArray(issues) && issues.length) return issues.map((i) => `${joinField("", i.path)}: ${i.message}`).join("; ");
  return String((e as Error)?.message ?? e);
}

/** Serialises scopes in the order given (agents in first-seen order, as the reference's dict). */
export function serializeMcpFile(scopes: McpScopeEntry[]): string {
  const nonce = randomBytes(6).toString("hex");
  const marker = `__pyfloat_${nonce}__`;
  const mcps: Record<string, Record<string, unknown[]>> = {};
  for (const { agentId, sessionId, specs } of scopes) {
    const agent = (mcps[agentId] ??= {});
    agent[sessionId] = specs.map((spec) => {
      const json = toMcpJson(spec);
      // The reference's float fields print as Python floats ("30.0"); JSON.stringify would print "30".
      const mcp_config =
        json.mcp_config.type === "http_mcp" && json.mcp_config.timeout !== null
          ? { ...json.mcp_config, timeout: `${marker}${pyFloat(json.mcp_config.timeout)}` }
          : json.mcp_config;
      const execution_timeout = json.execution_timeout === null ? null : `${marker}${pyFloat(json.execution_timeout)}`;
      return { ...json, mcp_config, execution_timeout };
    });
  }
  const text = JSON.stringify({ version: 2, mcps }, null, 2);
  return text.replace(new RegExp(`"${marker}([^"]+)"`, "g"), "$1");
}

/** Python's repr() of a float: shortest round-trip digits, exponent form below 1e-4 and from 1e16. */
export function pyFloat(x: number): string {
  if (Number.isNaN(x)) return "NaN";
  if (!Number.isFinite(x)) return x > 0 ? "Infinity" : "-Infinity";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mant, expStr] = x.toExponential().split("e") as [string, string];
  const exp = Number(expStr);
  const negative = mant.startsWith("-");
  const digits = mant.replace("-", "").replace(".", "");
  const sign = negative ? "-" : "";
  if (exp < -4 || exp >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${m}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
  }
  if (exp < 0) return `${sign}0.${"0".repeat(-exp - 1)}${digits}`;
  const intLen = exp + 1;
  if (digits.length <= intLen) return `${sign}${digits.padEnd(intLen, "0")}.0`;
  return `${sign}${digits.slice(0, intLen)}.${digits.slice(intLen)}`;
}
