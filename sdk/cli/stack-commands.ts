import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { maskSecrets } from "../util/mask.js";
import { openStack, StepCollector, upWithPreview, withPlanEnv } from "./engine.js";
import { printableOutputs } from "./outputs.js";
import { renderPreviewMarkdown, renderPreviewText } from "./preview-markdown.js";
import { buildModel, stepsFromPreviewJson } from "./preview-model.js";
import { progressPrinter } from "./progress.js";
import { configSecrets } from "./safe-events.js";

export type StackCommand = "up" | "preview" | "refresh" | "destroy" | "outputs";

/** Options of the stack commands, as the CLI parsed them (each command declares the ones it takes). */
export interface StackCommandOptions {
  stack?: string | undefined;
  cwd?: string | undefined;
  target?: string[] | undefined;
  replace?: string[] | undefined;
  skipPreview?: boolean | undefined;
  refresh?: boolean | undefined;
  allowDataLoss?: boolean | undefined;
  diff?: boolean | undefined;
  markdown?: boolean | undefined;
  out?: string | undefined;
  fromJson?: string | undefined;
  expectNoChanges?: boolean | undefined;
  yes?: boolean | undefined;
}

/**
 * `agentws up|preview|refresh|destroy|outputs`: one Pulumi operation on the project's stack
 * (Automation API, inline program). Progress on stderr; markdown, JSON and outputs on stdout.
 */
export async function stackCommand(command: StackCommand, values: StackCommandOptions): Promise<number> {
  const err = (line: string) => process.stderr.write(`${line}\n`);
  const stackName = values.stack ?? process.env.AGENTWS_STACK ?? "local";
  if (command === "preview" && values.fromJson) {
    const text = values.fromJson === "-" ? readFileSync(0, "utf8") : readFileSync(values.fromJson, "utf8");
    const { steps, diagnostics, unchangedResources } = stepsFromPreviewJson(JSON.parse(text));
    emit(renderPreviewMarkdown(buildModel(steps, diagnostics, unchangedResources), { ...(values.stack ? { stack: values.stack } : {}) }), values.out);
    return 0;
  }
  if (command === "destroy" && !values.yes) {
    err("destroy removes every workspace of the stack (and, with agentws:deleteData, their files); pass --yes to confirm");
    return 2;
  }

  const workDir = resolve(values.cwd ?? process.cwd());
  // The stack program resolves fleet files against the project folder, as `pulumi up` would.
  process.chdir(workDir);
  if (process.env.PULUMI_CONFIG_PASSPHRASE === undefined && process.env.PULUMI_CONFIG_PASSPHRASE_FILE === undefined)
    err("note: PULUMI_CONFIG_PASSPHRASE is not set; stack secrets are encrypted with an empty passphrase (fine for local use only)");
  err(`${command} stack '${stackName}' (${workDir}): starting the Pulumi engine`);
  // Only `up` creates a stack; the others select one, and a mistyped name lists those that exist.
  const stack = await openStack({ workDir, stackName, create: command === "up" });
  const secrets = await configSecrets(stack);
  const onEvent = progressPrinter(err, () => secrets, command === "preview");
  const common = { onEvent, color: "never" as const, ...(values.target ? { target: values.target } : {}), ...(values.refresh ? { refresh: true } : {}) };
  // The provider's switches: replace these workspaces; apply changes that delete files.
  const plan = { ...(values.replace ? { replaceWorkspaces: values.replace } : {}), ...(values.allowDataLoss ? { allowDataLoss: true } : {}) };

  try {
    switch (command) {
      case "up": {
        if (!values.skipPreview) err("  previewing first (bad inputs fail here, before anything is provisioned)");
        await upWithPreview(stack, { ...common, ...plan, skipPreview: values.skipPreview ?? false });
        return 0;
      }
      case "refresh": {
        await stack.refresh({ onEvent, color: "never" });
        return 0;
      }
      case "destroy": {
        await stack.destroy({ onEvent, color: "never" });
        return 0;
      }
      case "outputs": {
        process.stdout.write(`${await printableOutputs(stack, secrets)}\n`);
        return 0;
      }
      case "preview": {
        const collector = new StepCollector();
        const both = (e: Parameters<typeof onEvent>[0]) => {
          collector.onEvent(e);
          onEvent(e);
        };
        let result: Awaited<ReturnType<typeof stack.preview>>;
        try {
          result = await withPlanEnv(stack, { ...plan, preview: true }, () =>
            stack.preview({
              onEvent: both,
              color: "never",
              ...(values.diff ? { diff: true } : {}),
              ...(values.expectNoChanges ? { expectNoChanges: true } : {}),
              ...(values.target ? { target: values.target } : {}),
              ...(values.refresh ? { refresh: true } : {}),
            }),
          );
        } catch (e) {
          // A failed preview still makes a comment: reviewers need to see the errors too.
          if (values.markdown) emit(renderPreviewMarkdown(collector.model(), { stack: stackName, redact: secrets }), values.out);
          throw e;
        }
        if (values.markdown) emit(renderPreviewMarkdown(collector.model(), { stack: stackName, redact: secrets }), values.out);
        else if (values.diff)
          process.stdout.write(`${maskSecrets(`${result.stdout.trimEnd()}\n\n${renderPreviewText(collector.model())}`, secrets).trimEnd()}\n`);
        return 0;
      }
    }
  } catch (e) {
    err(`agentws ${command} failed: ${maskSecrets(conciseError(e), secrets)}`);
    return 1;
  }
  return 0;
}

function emit(text: string, out: string | undefined): void {
  if (out) writeFileSync(out, text);
  else process.stdout.write(text);
}

/** The engine's error carries the full command output; keep its diagnostics section only. */
function conciseError(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  const diag = text.indexOf("Diagnostics:");
  if (diag >= 0)
    return text
      .slice(diag)
      .split(/\n(?:Resources|Duration):/)[0]!
      .trim();
  return text.split("\n").slice(0, 20).join("\n");
}
