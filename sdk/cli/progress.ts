import type { EngineEvent } from "@pulumi/pulumi/automation/index.js";
import { maskSecrets } from "../util/mask.js";

/**
 * Live progress lines from engine events: one line when a resource operation starts and one
 * when it ends, with its duration. Known secret values are masked in everything printed.
 */
const VERB: Record<string, [string, string]> = {
  create: ["+ creating", "+ created"],
  update: ["~ updating", "~ updated"],
  delete: ["- deleting", "- deleted"],
  replace: ["+-replacing", "+-replaced"],
  "create-replacement": ["+ creating replacement", "+ created replacement"],
  "delete-replaced": ["- deleting replaced", "- deleted replaced"],
  refresh: ["  refreshing", "  refreshed"],
  read: ["  reading", "  read"],
};

const PREVIEW_SIGN: Record<string, string> = { create: "+", update: "~", delete: "-", replace: "+-", "create-replacement": "+", "delete-replaced": "-" };

export function progressPrinter(write: (line: string) => void, secrets: () => string[], preview = false): (e: EngineEvent) => void {
  const started = new Map<string, number>();
  const label = (urn: string, type: string) => {
    const name = urn.split("::").at(-1) ?? urn;
    return type === "pulumi-nodejs:dynamic/agentws:Workspace" ? `workspace ${name}` : `${type.split(":").at(-1)} ${name}`;
  };
  const out = (line: string) => write(maskSecrets(line, secrets()));
  // The stack and provider resources are bookkeeping, not something the user declared.
  const shown = (type: string) => type !== "pulumi:pulumi:Stack" && !type.startsWith("pulumi:providers:");
  return (e) => {
    const pre = e.resourcePreEvent?.metadata;
    if (pre && pre.op !== "same" && shown(pre.type)) {
      const verbs = VERB[pre.op];
      if (preview) out(`  ${PREVIEW_SIGN[pre.op] ?? " "} ${pre.op}  ${label(pre.urn, pre.type)}`);
      else {
        started.set(`${pre.op}:${pre.urn}`, Date.now());
        out(`  ${verbs?.[0] ?? pre.op}  ${label(pre.urn, pre.type)} ...`);
      }
    }
    const done = e.resOutputsEvent?.metadata;
    if (done && done.op !== "same" && shown(done.type) && !preview) {
      const t0 = started.get(`${done.op}:${done.urn}`);
      const secs = t0 ? ` (${((Date.now() - t0) / 1000).toFixed(1)}s)` : "";
      out(`  ${VERB[done.op]?.[1] ?? done.op}  ${label(done.urn, done.type)}${secs}`);
    }
    const failed = e.resOpFailedEvent?.metadata;
    if (failed) out(`  ! ${failed.op} failed  ${label(failed.urn, failed.type)}`);
    const d = e.diagnosticEvent;
    if (d && (d.severity === "error" || d.severity === "warning") && !d.ephemeral) {
      const msg = d.message.trim();
      if (msg && !/^update failed$|^preview failed$/.test(msg)) out(`  ${d.severity}: ${msg.split("\n").join("\n    ")}`);
    }
    const s = e.summaryEvent;
    if (s) {
      const parts = Object.entries(s.resourceChanges ?? {})
        .filter(([op, n]) => op !== "same" && n)
        .map(([op, n]) => `${n} ${op}`);
      out(`  done in ${s.durationSeconds}s: ${parts.length ? `${parts.join(", ")} (resources, counting the stack and components)` : "no changes"}`);
    }
  };
}
