/**
 * Unified diff exactly as the reference attaches to Write/Edit results: Python's
 * `"".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), from, to, n=3))`.
 * Lines keep their endings, so a last line without a newline runs into the next diff line, as there.
 */
type Tag = "equal" | "delete" | "insert" | "replace";
type Opcode = [Tag, number, number, number, number];

/** Longest-common-subsequence work above this many cells falls back to one replace block. */
const MAX_DP_CELLS = 4_000_000;

export function unifiedDiff(before: string, after: string, fromFile: string, toFile: string, context = 3): string {
  const a = splitLinesKeepEnds(before);
  const b = splitLinesKeepEnds(after);
  const groups = groupOpcodes(opcodes(a, b), context);
  if (groups.length === 0) return "";
  const out = [`--- ${fromFile}\n`, `+++ ${toFile}\n`];
  for (const group of groups) {
    const first = group[0]!;
    const last = group[group.length - 1]!;
    out.push(`@@ -${range(first[1], last[2])} +${range(first[3], last[4])} @@\n`);
    for (const [tag, i1, i2, j1, j2] of group) {
      if (tag === "equal") for (const l of a.slice(i1, i2)) out.push(` ${l}`);
      if (tag === "delete" || tag === "replace") for (const l of a.slice(i1, i2)) out.push(`-${l}`);
      if (tag === "insert" || tag === "replace") for (const l of b.slice(j1, j2)) out.push(`+${l}`);
    }
  }
  return out.join("");
}

/** Python's str.splitlines line boundaries. */
// eslint-disable-next-line no-control-regex -- \x1c-\x1e are line boundaries for Python
const LINE_BREAK = /\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/g;

/** Python's `text.splitlines(keepends=True)`. */
export function splitLinesKeepEnds(text: string): string[] {
  const out: string[] = [];
  let start = 0;
  for (const m of text.matchAll(LINE_BREAK)) {
    out.push(text.slice(start, m.index + m[0].length));
    start = m.index + m[0].length;
  }
  if (start < text.length) out.push(text.slice(start));
  return out;
}

function range(start: number, stop: number): string {
  let begin = start + 1;
  const length = stop - start;
  if (length === 1) return String(begin);
  if (length === 0) begin -= 1;
  return `${begin},${length}`;
}

function opcodes(a: string[], b: string[]): Opcode[] {
  // Common prefix and suffix first: edits are usually small.
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
  const midA = a.slice(pre, a.length - suf);
  const midB = b.slice(pre, b.length - suf);
  const pairs = midA.length * midB.length <= MAX_DP_CELLS ? lcsPairs(midA, midB) : [];
  // Matched pairs → opcodes.
  const codes: Opcode[] = [];
  const push = (tag: Tag, i1: number, i2: number, j1: number, j2: number) => {
    if (i1 === i2 && j1 === j2) return;
    codes.push([tag, i1, i2, j1, j2]);
  };
  push("equal", 0, pre, 0, pre);
  let i = 0;
  let j = 0;
  const flushChange = (ni: number, nj: number) => {
    if (ni > i && nj > j) push("replace", pre + i, pre + ni, pre + j, pre + nj);
    else if (ni > i) push("delete", pre + i, pre + ni, pre + j, pre + j);
    else if (nj > j) push("insert", pre + i, pre + i, pre + j, pre + nj);
  };
  let k = 0;
  while (k < pairs.length) {
    const [pi, pj] = pairs[k]!;
    flushChange(pi, pj);
    let len = 0;
    while (k < pairs.length && pairs[k]![0] === pi + len && pairs[k]![1] === pj + len) {
      k++;
      len++;
    }
    push("equal", pre + pi, pre + pi + len, pre + pj, pre + pj + len);
    i = pi + len;
    j = pj + len;
  }
  flushChange(midA.length, midB.length);
  push("equal", a.length - suf, a.length, b.length - suf, b.length);
  return codes;
}

/** Index pairs of one longest common subsequence (DP over the middle part). */
function lcsPairs(a: string[], b: string[]): Array<[number, number]> {
  const n = a.length;
  const m = b.length;
  if (n === 0 || m === 0) return [];
  const w = m + 1;
  const dp = new Uint32Array((n + 1) * w);
  for (let x = n - 1; x >= 0; x--)
    for (let y = m - 1; y >= 0; y--) dp[x * w + y] = a[x] === b[y] ? dp[(x + 1) * w + y + 1]! + 1 : Math.max(dp[(x + 1) * w + y]!, dp[x * w + y + 1]!);
  const pairs: Array<[number, number]> = [];
  let x = 0;
  let y = 0;
  while (x < n && y < m) {
    if (a[x] === b[y]) {
      pairs.push([x, y]);
      x++;
      y++;
    } else if (dp[(x + 1) * w + y]! >= dp[x * w + y + 1]!) x++;
    else y++;
  }
  return pairs;
}

function groupOpcodes(input: Opcode[], n: number): Opcode[][] {
  const codes: Opcode[] = input.length ? input.map((c) => [...c] as Opcode) : [["equal", 0, 1, 0, 1]];
  const first = codes[0]!;
  if (first[0] === "equal") codes[0] = ["equal", Math.max(first[1], first[2] - n), first[2], Math.max(first[3], first[4] - n), first[4]];
  const last = codes[codes.length - 1]!;
  if (last[0] === "equal") codes[codes.length - 1] = ["equal", last[1], Math.min(last[2], last[1] + n), last[3], Math.min(last[4], last[3] + n)];
  const groups: Opcode[][] = [];
  let group: Opcode[] = [];
  for (const code of codes) {
    const [tag, , i2, , j2] = code;
    let [, i1, , j1] = code;
    if (tag === "equal" && i2 - i1 > 2 * n) {
      group.push([tag, i1, Math.min(i2, i1 + n), j1, Math.min(j2, j1 + n)]);
      groups.push(group);
      group = [];
      i1 = Math.max(i1, i2 - n);
      j1 = Math.max(j1, j2 - n);
    }
    group.push([tag, i1, i2, j1, j2]);
  }
  if (group.length && !(group.length === 1 && group[0]![0] === "equal")) groups.push(group);
  return groups;
}
