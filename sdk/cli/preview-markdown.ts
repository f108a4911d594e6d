import { ORDER, type FieldRow, type PreviewModel, type WorkspaceChange, type WorkspaceOp } from "./preview-model.js";
import { changePolicyOf } from "../contract/registry.js";
import { maskSecrets } from "../util/mask.js";

/**
 * Renders a preview as a pull-request comment a reviewer can act on: a summary line, a warning
 * naming every change that deletes files, what the other resources are, then one section per
 * operation with each workspace's owner, its changes as old → new values (secrets masked) and
 * what the change costs (same object or a new one; files kept, deleted or left behind). Long
 * sections fold into <details>; the comment stays under GitHub's 65,536-character limit.
 */
export const GITHUB_COMMENT_LIMIT = 65_536;
/** Room kept for the truncation note and a caller's own footer. */
const BUDGET = GITHUB_COMMENT_LIMIT - 2_000;
const FOLD_AFTER = 10;
const MAX_FIELDS_SHOWN = 12;

const TITLE: Record<WorkspaceOp, string> = {
  create: "create",
  update: "update in place",
  recreate: "re-create in place",
  replace: "replace",
  rename: "rename",
  delete: "delete",
};
const SIGN: Record<WorkspaceOp, string> = { create: "+", update: "~", recreate: "~+", replace: "+-", rename: "+-", delete: "-" };
const COMPONENTS: Record<string, string> = {
  "agentws:index:WorkspaceFleet": "the fleet component: its `workspaces` output, which the runtime manager reads, follows the workspace changes",
  "pulumi-nodejs:dynamic/agentws:DataLedger":
    "the fleet's data ledger: it notes where each workspace keeps its files and which folders earlier replaces and removals left behind with `deleteData` off, so that `destroy` with `deleteData` on removes those too; it follows the workspace changes and touches no workspace",
};

export interface MarkdownOptions {
  stack?: string;
  /** Strings that must never appear (secret config values); replaced by [secret]. */
  redact?: string[];
  /** A link to the full log, shown when the comment is cut. */
  logUrl?: string;
  /** Character budget (tests); default stays under GitHub's limit. */
  budget?: number;
}

export function renderPreviewMarkdown(model: PreviewModel, options: MarkdownOptions = {}): string {
  const budget = options.budget ?? BUDGET;
  const counts = Object.fromEntries(ORDER.map((op) => [op, model.changes.filter((c) => c.op === op).length])) as Record<WorkspaceOp, number>;
  const head: string[] = [];
  head.push(`### Workspace preview${options.stack ? ` \`${escapeCode(options.stack)}\`` : ""}`);
  const unchanged = `${model.unchanged} ${model.unchangedUnit === "resources" ? "resources " : ""}unchanged`;
  const summary = ORDER.filter((op) => counts[op] > 0).map((op) => `${counts[op]} to ${op === "recreate" ? "re-create" : op}`);
  head.push(summary.length ? `**${summary.join(", ")}** · ${unchanged}` : `**No workspace changes** · ${unchanged}`);
  const losing = model.changes.filter((c) => c.data === "deleted");
  if (losing.length) {
    const needsOptIn = losing.some((c) => c.op === "recreate" || c.op === "replace");
    head.push(
      "",
      `> [!WARNING]\n> **Deletes workspace files:** ${losing.map((c) => `\`${escapeCode(c.workspaceId)}\` (${c.op === "recreate" ? "re-create" : c.op})`).join(", ")}.` +
        (needsOptIn ? "\n> A replace or re-create that deletes files is refused unless applied with `agentws up --allow-data-loss`." : ""),
    );
  }
  const others = model.otherResources ?? [];
  if (others.length)
    head.push("", `Other resources: ${others.map((r) => `\`${escapeCode(r.name)}\` to ${r.op} (${escapeCell(COMPONENTS[r.type] ?? r.type)})`).join("; ")}.`);
  else {
    const other = Object.entries(model.other).filter(([, n]) => n > 0);
    if (other.length) head.push("", `Other resources: ${other.map(([op, n]) => `${n} to ${op}`).join(", ")}.`);
  }
  if (model.errors.length) head.push("", "**Errors**", "```text", ...model.errors.map((e) => e.slice(0, 2_000)), "```");

  const sections: string[] = [];
  for (const op of ORDER) {
    const rows = model.changes.filter((c) => c.op === op);
    if (!rows.length) continue;
    const body = ["| Workspace | Owner | Backend | Changes | What happens |", "|---|---|---|---|---|", ...rows.map(row)].join("\n");
    const title = `${SIGN[op]} ${rows.length} to ${TITLE[op]}`;
    sections.push(rows.length > FOLD_AFTER ? `<details><summary><b>${title}</b></summary>\n\n${body}\n\n</details>` : `**${title}**\n\n${body}`);
  }

  let out = head.join("\n");
  let cut = 0;
  for (const [i, s] of sections.entries()) {
    if (out.length + s.length + 2 > budget) {
      cut = sections.length - i;
      break;
    }
    out += `\n\n${s}`;
  }
  if (cut) {
    const more = options.logUrl ? ` See the [full log](${options.logUrl}).` : " Run `agentws preview --diff` for the full list.";
    out += `\n\n> Comment shortened: ${cut} section(s) left out to stay under GitHub's ${GITHUB_COMMENT_LIMIT.toLocaleString("en-US")}-character limit.${more}`;
  }
  return maskSecrets(out, options.redact ?? []) + "\n";
}

function row(c: WorkspaceChange): string {
  const shown = c.fields.slice(0, MAX_FIELDS_SHOWN).map(fieldText);
  if (c.fields.length > MAX_FIELDS_SHOWN) shown.push(`and ${c.fields.length - MAX_FIELDS_SHOWN} more`);
  const id = c.previousId ? `\`${escapeCode(c.previousId)}\` → \`${escapeCode(c.workspaceId)}\`` : `\`${escapeCode(c.workspaceId)}\``;
  const owner = c.userId || c.agentId ? `${escapeCell(c.userId ?? "—")} / ${escapeCell(c.agentId ?? "—")}` : "—";
  const kindChange = c.fields.find((f) => f.path === "backend.kind");
  const kind = kindChange?.from && kindChange.to ? `${unquote(kindChange.from)} → ${unquote(kindChange.to)}` : c.kind;
  return `| ${id} | ${owner} | ${escapeCell(kind)} | ${shown.join("<br>") || "—"} | ${consequence(c)} |`;
}

/** `path`: `old` → `new`, with additions and removals said as such. */
function fieldText(f: FieldRow): string {
  const path = `\`${escapeCode(f.path)}\``;
  const value = (v: string) => `\`${escapeCode(v)}\``;
  const mark = f.replace ? " (forces replacement)" : f.effect === "recreate" ? " (re-creates)" : "";
  if (f.from !== undefined && f.to !== undefined) return `${path}: ${value(f.from)} → ${value(f.to)}${mark}`;
  if (f.to !== undefined) return `${path}: added ${value(f.to)}${mark}`;
  if (f.from !== undefined) return `${path}: removed (was ${value(f.from)})${mark}`;
  return `${path}${mark}`;
}

/** What the change costs, in the backend's own word for its object. */
function consequence(c: WorkspaceChange): string {
  const noun = changePolicyOf(c.kind).noun ?? "backend object";
  const files =
    c.data === "deleted" ? "**files deleted**" : c.data === "left-behind" ? "files stay in the old folder (not moved); the new one starts empty" : "files kept";
  switch (c.op) {
    case "create":
      return `new ${noun}`;
    case "update":
      return `same ${noun}; ${files}`;
    case "recreate":
      return `${noun} re-created (new id; the new one is prepared before the old one goes); ${files}`;
    case "replace":
      return `new ${noun}; ${files}`;
    case "rename":
      return `new ${noun}; the old one is removed, ${c.data === "deleted" ? "its **files deleted**" : "its files left in its old folder (not moved)"}`;
    case "delete":
      return `${noun} removed; ${c.data === "deleted" ? "**files deleted**" : "files kept on the host"}`;
  }
}

function unquote(s: string): string {
  return s.replace(/^"|"$/g, "");
}

function escapeCode(s: string): string {
  return s.replace(/`/g, "'").replace(/\|/g, "\\|");
}

function escapeCell(s: string): string {
  return s.replace(/\|/g, "\\|").replace(/[<>]/g, "");
}

/** The same plan as plain lines, printed after `agentws preview --diff`'s engine diff. */
export function renderPreviewText(model: PreviewModel): string {
  if (!model.changes.length) return "Workspace plan: no workspace changes.";
  const lines = ["Workspace plan (what `agentws up` does to each backend object and its files):"];
  for (const c of model.changes) {
    const id = c.previousId ? `${c.previousId} -> ${c.workspaceId}` : c.workspaceId;
    const owner = c.userId || c.agentId ? ` (${c.userId ?? "-"} / ${c.agentId ?? "-"})` : "";
    lines.push(`  ${SIGN[c.op].padEnd(2)} ${TITLE[c.op]}  ${id}${owner}, ${c.kind}: ${consequence(c).replace(/\*\*/g, "")}`);
    for (const f of c.fields) lines.push(`       ${fieldText(f).replace(/`/g, "")}`);
  }
  return lines.join("\n");
}
