import { randomBytes } from "node:crypto";
import { joinField } from "../errors.js";
import { fromMcpJson, toMcpJson, type McpServerSpec } from "./mcp-spec.js";
import { isObject } from "../util/records.js";

/**
 * The `.mcp` file: reference-compatible (version 2 nested by agent then session; a top-level
 * array is version 1, the legacy scope). Parsing is forgiving entry by entry; serialising is
 * byte-compatible with the reference's `json.dumps(indent=2, ensure_ascii=False)`.
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
}

export function parseMcpFile(text: string): ParsedMcpFile {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    return { scopes: [], warnings: [`${MCP_FILE} is not valid JSON (${(e as Error).message}); using default MCPs for every scope`] };
  }
  const warnings: string[] = [];
  if (Array.isArray(doc)) {
    // Version 1: a flat list for the legacy scope ("", "").
    return { scopes: [{ agentId: "", sessionId: "", specs: parseList(doc, "[]", warnings) }], warnings };
  }
  if (!isObject(doc)) return { scopes: [], warnings: [`${MCP_FILE} must be a JSON object or array; using default MCPs for every scope`] };
  const mcps = doc.mcps;
  if (!isObject(mcps)) return { scopes: [], warnings: [`${MCP_FILE}: 'mcps' must be an object; using default MCPs for every scope`] };
  const scopes: McpScopeEntry[] = [];
  for (const [agentId, sessions] of Object.entries(mcps)) {
    if (!isObject(sessions)) {
      warnings.push(`${MCP_FILE}: mcps['${agentId}'] is not an object; skipped`);
      continue;
    }
    for (const [sessionId, list] of Object.entries(sessions)) {
      if (!Array.isArray(list)) {
        warnings.push(`${MCP_FILE}: mcps['${agentId}']['${sessionId}'] is not a list; skipped`);
        continue;
      }
      scopes.push({ agentId, sessionId, specs: parseList(list, `mcps['${agentId}']['${sessionId}']`, warnings) });
    }
  }
  return { scopes, warnings };
}

function parseList(list: unknown[], where: string, warnings: string[]): McpServerSpec[] {
  const specs: McpServerSpec[] = [];
  list.forEach((entry, i) => {
    const label = isObject(entry) && typeof entry.name === "string" ? `'${entry.name}'` : `#${i}`;
    let spec: McpServerSpec;
    try {
      spec = fromMcpJson(entry);
    } catch (e) {
      warnings.push(`${MCP_FILE}: skipped invalid MCP ${label} in ${where}: ${describeError(e)}`);
      return;
    }
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

