import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { openStack, StepCollector, upWithPreview } from "./engine.js";
import { buildModel, stepsFromPreviewJson } from "./preview-model.js";
import { renderPreviewMarkdown } from "./preview-markdown.js";
import { printableOutputs } from "./outputs.js";
import { progressPrinter } from "./progress.js";
import { configSecrets } from "./safe-events.js";
import { maskSecrets } from "../util/mask.js";

const USAGE = `agentws — provision agent workspaces with Pulumi (Automation API, no language host needed)

Usage:
  agentws up        [--stack local] [--cwd DIR] [--target URN]... [--skip-preview]
  agentws preview   [--stack local] [--diff] [--markdown [--out FILE]] [--expect-no-changes]
  agentws preview   --markdown --from-json FILE|-      (render a \`pulumi preview --json\` document)
  agentws refresh   [--stack local]
  agentws destroy   [--stack local] --yes
  agentws outputs   [--stack local]                    (stack outputs as JSON; secrets masked)
  agentws prune-images [--base IMAGE] [--dry-run]      (remove Docker workspace images no container uses)

The program is Pulumi.yaml's \`main\` (compiled JS: run \`npm run build\`). State goes to
$PULUMI_BACKEND_URL, else Pulumi.yaml backend.url, else <project>/.agentws/state.
Progress goes to stderr; markdown, JSON and outputs go to stdout.`;

export async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      stack: { type: "string", short: "s" },
      cwd: { type: "string" },
      diff: { type: "boolean" },
      markdown: { type: "boolean" },
      out: { type: "string" },
      "from-json": { type: "string" },
      "expect-no-changes": { type: "boolean" },
      target: { type: "string", multiple: true },
      yes: { type: "boolean", short: "y" },
      "skip-preview": { type: "boolean" },
      base: { type: "string" },
      "dry-run": { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  const command = positionals[0];
  if (values.help || !command) {
    process.stdout.write(`${USAGE}\n`);
    return command || values.help ? 0 : 2;
  }
  const stackName = values.stack ?? process.env.AGENTWS_STACK ?? "local";
  const err = (line: string) => process.stderr.write(`${line}\n`);

  if (command === "preview" && values["from-json"]) {
    const text = values["from-json"] === "-" ? readFileSync(0, "utf8") : readFileSync(values["from-json"], "utf8");
    const { steps, diagnostics, unchangedResources } = stepsFromPreviewJson(JSON.parse(text));
    emit(renderPreviewMarkdown(buildModel(steps, diagnostics, unchangedResources), { ...(values.stack ? { stack: values.stack } : {}) }), values.out);
    return 0;
  }
  if (command === "prune-images") return pruneImagesCommand(values.base, values["dry-run"] ?? false, err);
  if (!["up", "preview", "refresh", "destroy", "outputs"].includes(command)) {
    err(`unknown command '${command}'\n\n${USAGE}`);
    return 2;
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
  const stack = await openStack({ workDir, stackName });
  const secrets = await configSecrets(stack);
  const onEvent = progressPrinter(err, () => secrets, command === "preview");
  const common = { onEvent, color: "never" as const, ...(values.target ? { target: values.target } : {}) };
  err(`${command} stack '${stackName}' (${workDir})`);

  try {
    switch (command) {
      case "up": {
        if (!values["skip-preview"]) err("  previewing first (bad inputs fail here, before anything is provisioned)");
        await upWithPreview(stack, { ...common, skipPreview: values["skip-preview"] ?? false });
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
          result = await stack.preview({
            onEvent: both,
            color: "never",
            ...(values.diff ? { diff: true } : {}),
            ...(values["expect-no-changes"] ? { expectNoChanges: true } : {}),
            ...(values.target ? { target: values.target } : {}),
          });
        } catch (e) {
          // A failed preview still makes a comment: reviewers need to see the errors too.
          if (values.markdown) emit(renderPreviewMarkdown(collector.model(), { stack: stackName, redact: secrets }), values.out);
          throw e;
        }
        if (values.markdown) emit(renderPreviewMarkdown(collector.model(), { stack: stackName, redact: secrets }), values.out);
        else if (values.diff) process.stdout.write(`${maskSecrets(result.stdout, secrets).trimEnd()}\n`);
        return 0;
      }
    }
  } catch (e) {
    err(`agentws ${command} failed: ${maskSecrets(conciseError(e), secrets)}`);
    return 1;
  }
  return 0;
}

/** Old workspace images pile up as image inputs change; this clears the unused ones (DOCKER_HOST applies). */
async function pruneImagesCommand(baseImage: string | undefined, dryRun: boolean, err: (line: string) => void): Promise<number> {
  const { DockerDriver } = await import("../backends/docker/driver.js");
  try {
    const { removed, kept } = await new DockerDriver({}).pruneImages({ baseImage, dryRun });
    const verb = dryRun ? "would remove" : "removed";
    for (const r of removed) err(`${verb} ${r.tag} (${(r.bytes / 1e6).toFixed(1)} MB)`);
    for (const k of kept) err(`kept ${k.tag}: used by ${k.containers} container(s)`);
    const total = removed.reduce((n, r) => n + r.bytes, 0);
    err(`${verb} ${removed.length} image(s), ${(total / 1e6).toFixed(1)} MB; kept ${kept.length} in use`);
    process.stdout.write(`${JSON.stringify({ dryRun, removed, kept }, null, 2)}\n`);
    return 0;
  } catch (e) {
    err(`agentws prune-images failed: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}

function emit(text: string, out: string | undefined): void {
  if (out) writeFileSync(out, text);
  else process.stdout.write(text);
}

/** The engine's error carries the full command output; keep its diagnostics section only. */
function conciseError(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  const diag = text.indexOf("Diagnostics:");
  if (diag >= 0) return text.slice(diag).split(/\n(?:Resources|Duration):/)[0]!.trim();
  return text.split("\n").slice(0, 20).join("\n");
}
