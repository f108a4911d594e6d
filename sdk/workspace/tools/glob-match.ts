import { InvalidArgumentError } from "../../errors.js";

/**
 * Glob matching without regular expressions, so no pattern can make it backtrack exponentially.
 * A segment (`*`, `?`, `[...]`, `[!...]`, `[^...]`, literals) is matched with the two-pointer
 * wildcard algorithm: at most one resume point, O(name × pattern) steps in the worst case. Paths
 * with `**` segments are matched segment by segment with a table over (pattern, path) positions.
 * Semantics are those of the regular expressions the tools compiled before: `*` and `?` never
 * cross '/', hidden names are matched too, matching is case-sensitive, an unclosed '[' is literal.
 */

/** Longest glob pattern accepted, in characters. */
export const MAX_GLOB_PATTERN_CHARS = 4096;
/** Alternatives one brace-expanded glob may produce. */
export const MAX_BRACE_ALTERNATIVES = 256;

type Token = { kind: "lit"; ch: string } | { kind: "any" } | { kind: "star" } | { kind: "class"; negate: boolean; ranges: Array<[number, number]> };

export type SegmentMatcher = (name: string) => boolean;

/** A clear error for a pattern that cannot be compiled (the field names the tool input). */
export class GlobPatternError extends InvalidArgumentError {}

export function compileSegment(segment: string, field = "pattern"): SegmentMatcher {
  const tokens = tokenize(segment, field);
  if (!tokens.some((t) => t.kind !== "lit")) {
    const literal = segment;
    return (name) => name === literal;
  }
  return (name) => matchTokens(tokens, name);
}

function tokenize(segment: string, field: string): Token[] {
  if (segment.length > MAX_GLOB_PATTERN_CHARS) throw new GlobPatternError(`is longer than ${MAX_GLOB_PATTERN_CHARS} characters`, { field });
  const tokens: Token[] = [];
  for (let i = 0; i < segment.length; i++) {
    const c = segment[i]!;
    if (c === "*") {
      // Consecutive stars match what one does.
      if (tokens[tokens.length - 1]?.kind !== "star") tokens.push({ kind: "star" });
    } else if (c === "?") tokens.push({ kind: "any" });
    else if (c === "[") {
      // The class ends at the first ']' after its first character (a leading ']' is a member).
      const end = segment.indexOf("]", i + 2);
      if (end === -1) tokens.push({ kind: "lit", ch: c });
      else {
        tokens.push(parseClass(segment.slice(i + 1, end), segment, field));
        i = end;
      }
    } else tokens.push({ kind: "lit", ch: c });
  }
  return tokens;
}

function parseClass(body: string, segment: string, field: string): Token {
  let negate = false;
  let i = 0;
  if (body[0] === "!" || body[0] === "^") {
    negate = true;
    i = 1;
  }
  const ranges: Array<[number, number]> = [];
  for (; i < body.length; i++) {
    const lo = body.charCodeAt(i);
    if (body[i + 1] === "-" && i + 2 < body.length) {
      const hi = body.charCodeAt(i + 2);
      if (hi < lo)
        throw new GlobPatternError(`has an invalid character range '${body[i]}-${body[i + 2]}' in '[${body}]' (${JSON.stringify(segment)})`, { field });
      ranges.push([lo, hi]);
      i += 2;
    } else ranges.push([lo, lo]);
  }
  return { kind: "class", negate, ranges };
}

function matchOne(t: Token, code: number, ch: string): boolean {
  if (t.kind === "lit") return t.ch === ch;
  if (t.kind === "any") return ch !== "/";
  if (t.kind === "class") {
    let inside = false;
    for (const [lo, hi] of t.ranges)
      if (code >= lo && code <= hi) {
        inside = true;
        break;
      }
    return t.negate ? !inside && ch !== "/" : inside;
  }
  return false;
}

/** Two-pointer wildcard matching: on a mismatch, resume after the last star, one character further. */
function matchTokens(tokens: Token[], name: string): boolean {
  let t = 0;
  let n = 0;
  let starT = -1;
  let starN = 0;
  while (n < name.length) {
    const tok = tokens[t];
    if (tok?.kind === "star") {
      starT = t++;
      starN = n;
      continue;
    }
    if (tok && matchOne(tok, name.charCodeAt(n), name[n]!)) {
      t++;
      n++;
      continue;
    }
    // A star never crosses '/'.
    if (starT < 0 || name[starN] === "/") return false;
    t = starT + 1;
    n = ++starN;
  }
  while (tokens[t]?.kind === "star") t++;
  return t === tokens.length;
}

/** A compiled path glob: segments, `**` spanning zero or more folders (one or more when last). */
export type PathMatcher = (path: string) => boolean;

export function compilePathGlob(glob: string, field = "glob"): PathMatcher {
  const segments = glob.split("/").map((s) => (s === "**" ? ("**" as const) : compileSegment(s, field)));
  return (path) => matchSegments(segments, path.split("/"));
}

function matchSegments(pattern: Array<SegmentMatcher | "**">, parts: string[]): boolean {
  const P = pattern.length;
  const N = parts.length;
  // can[j] after processing pattern[i..]: whether parts[j..] matches pattern[i..]; filled from the end.
  let next = new Uint8Array(N + 1);
  next[N] = 1;
  for (let i = P - 1; i >= 0; i--) {
    const cur = new Uint8Array(N + 1);
    const seg = pattern[i]!;
    const last = i === P - 1;
    for (let j = N; j >= 0; j--) {
      if (seg === "**") {
        // Zero folders (not when last: a trailing `**` needs something below), or one more.
        cur[j] = (!last && next[j]) || (j < N && (next[j + 1] || cur[j + 1])) ? 1 : 0;
      } else cur[j] = j < N && next[j + 1] && seg(parts[j]!) ? 1 : 0;
    }
    next = cur;
  }
  return next[0] === 1;
}

/** `{a,b}` alternatives, innermost first; at most MAX_BRACE_ALTERNATIVES of them. */
export function expandBraces(glob: string, field = "glob"): string[] {
  if (glob.length > MAX_GLOB_PATTERN_CHARS) throw new GlobPatternError(`is longer than ${MAX_GLOB_PATTERN_CHARS} characters`, { field });
  let out = [glob];
  for (;;) {
    const grown: string[] = [];
    let expanded = false;
    for (const g of out) {
      const m = /\{([^{}]*)\}/.exec(g);
      if (!m) {
        grown.push(g);
        continue;
      }
      expanded = true;
      for (const alt of m[1]!.split(",")) {
        grown.push(g.slice(0, m.index) + alt + g.slice(m.index + m[0].length));
        if (grown.length > MAX_BRACE_ALTERNATIVES) throw new GlobPatternError(`expands to more than ${MAX_BRACE_ALTERNATIVES} alternatives`, { field });
      }
    }
    out = grown;
    if (!expanded) return out;
  }
}
