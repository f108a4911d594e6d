import { ORDER, type PreviewModel, type WorkspaceChange, type WorkspaceOp } from "./preview-model.js";
import { maskSecrets } from "../util/mask.js";

/**
 * Renders a preview as a short pull-request comment: a summary line, then one section per
 * operation listing workspaces and changed fields. Long sections fold into <details>; the
 * whole comment stays under GitHub's 65,536-character limit with a note when cut.
 */
export const GITHUB_COMMENT_LIMIT = 65_536;
/** Room kept for the truncation note and a caller's own footer. */
const BUDGET = GITHUB_COMMENT_LIMIT - 2_000;
const FOLD_AFTER = 10;
const MAX_FIELDS_SHOWN = 12;

const TITLE: Record<WorkspaceOp, string> = { create: "create", update: "update in place", replace: "replace", delete: "delete" };
const SIGN: Record<WorkspaceOp, string> = { create: "+", update: "~", replace: "+-", delete: "-" };

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
  const summary = ORDER.filter((op) => counts[op] > 0).map((op) => `${counts[op]} to ${op}`);
  head.push(
    summary.length
      ? `**${summary.join(", ")}** · ${unchanged}`
      : `**No workspace changes** · ${unchanged}`,
  );
  const other = Object.entries(model.other).filter(([, n]) => n > 0);
  if (other.length) head.push(`Other resources: ${other.map(([op, n]) => `${n} to ${op}`).join(", ")}.`);
  if (model.errors.length) {
    head.push("", "**Errors**", "```text", ...model.errors.map((e) => e.slice(0, 2_000)), "```");
  }

  const sections: string[] = [];
  for (const op of ORDER) {
    const rows = model.changes.filter((c) => c.op === op);
    if (!rows.length) continue;
    const body = ["| Workspace | Backend | Changes |", "|---|---|---|", ...rows.map(row)].join("\n");
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
  const shown = c.fields.slice(0, MAX_FIELDS_SHOWN).map((f) => `\`${escapeCode(f.path)}\`${f.replace ? " (forces replacement)" : ""}`);
  if (c.fields.length > MAX_FIELDS_SHOWN) shown.push(`and ${c.fields.length - MAX_FIELDS_SHOWN} more`);
  return `| \`${escapeCode(c.workspaceId)}\` | ${escapeCell(c.kind)} | ${shown.join(", ") || "—"} |`;
}

function escapeCode(s: string): string {
  return s.replace(/`/g, "'").replace(/\|/g, "\\|");
}

function escapeCell(s: string): string {
  return s.replace(/\|/g, "\\|").replace(/[<>]/g, "");
}
