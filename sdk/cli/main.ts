import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { openStack, StepCollector, upWithPreview, withPlanEnv } from "./engine.js";
import { buildModel, stepsFromPreviewJson } from "./preview-model.js";
import { renderPreviewMarkdown, renderPreviewText } from "./preview-markdown.js";
import { printableOutputs } from "./outputs.js";
import { progressPrinter } from "./progress.js";
import { configSecrets } from "./safe-events.js";
import { maskSecrets } from "../util/mask.js";
import type { BackendCommand } from "../backends/module.js";
import { BACKEND_KINDS, backendCommands, loadBackend } from "../backends/registry.js";
import type { BackendKind } from "../backends/spec.js";
import { collectGarbage } from "../backends/gc.js";
import { openSessionStore } from "../service/index.js";
import { serveCommand, tokenCommand } from "./serve.js";
import { execCommand, statusCommand } from "./workspaces.js";

/** Commands with their own options, in their own modules. */
const OWN_COMMANDS: Record<string, (argv: string[]) => Promise<number>> = { serve: serveCommand, token: tokenCommand, status: statusCommand, exec: execCommand };

const USAGE = `agentws — provision agent workspaces with Pulumi (Automation API, no language host needed)

Usage:
  agentws up        [--stack local] [--cwd DIR] [--target URN]... [--skip-preview] [--refresh] [--replace ID]... [--allow-data-loss]
  agentws preview   [--stack local] [--diff] [--markdown [--out FILE]] [--expect-no-changes] [--refresh] [--replace ID]...
  agentws preview   --markdown --from-json FILE|-      (render a \`pulumi preview --json\` document)
  agentws refresh   [--stack local]
  agentws destroy   [--stack local] --yes
  agentws outputs   [--stack local]                    (stack outputs as JSON; secrets masked)
  agentws gc        [--kind K]... [--basedir DIR] [--store FILE|URL] [--yes] (runtime workspaces nobody owns, or with --store no session names; --yes removes them with their files)
  agentws serve     [--stack local] [--backend local] [--store FILE|postgres://URL] [--tokens FILE] [--port 8787] [--host 127.0.0.1]
                    [--egress-allow HOST|IP|CIDR[:PORT]]... [--egress-allow-private]
                    [--max-connections 1024] [--headers-timeout 20] [--keep-alive-timeout 65] [--min-body-rate 16384] (seconds; bytes/s)
  agentws token     <userId> [--store FILE|postgres://URL]   (a new bearer token; only its hash is stored)
  agentws status    [--kind K]... [--basedir DIR] [--json]  (workspaces on every backend: state, owner, idle time)
  agentws exec      <workspaceId> [--kind K] [--basedir DIR] -- <command> [args...]

The program is Pulumi.yaml's \`main\` (compiled JS: run \`npm run build\`). State goes to
$PULUMI_BACKEND_URL, else Pulumi.yaml backend.url, else <project>/.agentws/state.
Progress goes to stderr; markdown, JSON and outputs go to stdout.`;

/** The usage text, with the lines of the commands backends add (listed under USAGE's commands). */
async function usage(): Promise<string> {
  const extra = (await backendCommands()).map(({ command }) => `  ${command.usage}`);
  const [head, tail] = USAGE.split("\n\nThe program");
  return `${head}\n${extra.join("\n")}\n\nThe program${tail}`;
}

export async function main(argv: string[]): Promise<number> {
  // A command a backend adds (Docker's prune-images) parses its own options.
  const first = argv.findIndex((a) => !a.startsWith("-"));
  const added = first >= 0 ? (await backendCommands()).find(({ command }) => command.name === argv[first]) : undefined;
  if (added) return runBackendCommand(added.command, [...argv.slice(0, first), ...argv.slice(first + 1)]);
  if (argv[first] === "gc") return gcCommand([...argv.slice(0, first), ...argv.slice(first + 1)]);
  const own = first >= 0 && Object.hasOwn(OWN_COMMANDS, argv[first]!) ? OWN_COMMANDS[argv[first]!] : undefined;
  if (own) return runOwn(argv[first]!, own, [...argv.slice(0, first), ...argv.slice(first + 1)]);
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
      refresh: { type: "boolean" },
      replace: { type: "string", multiple: true },
      "allow-data-loss": { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  const command = positionals[0];
  if (values.help || !command) {
    process.stdout.write(`${await usage()}\n`);
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
  const common = { onEvent, color: "never" as const, ...(values.target ? { target: values.target } : {}), ...(values.refresh ? { refresh: true } : {}) };
  // The provider's switches: replace these workspaces; apply changes that delete files.
  const plan = { ...(values.replace ? { replaceWorkspaces: values.replace } : {}), ...(values["allow-data-loss"] ? { allowDataLoss: true } : {}) };
  err(`${command} stack '${stackName}' (${workDir})`);

  try {
    switch (command) {
      case "up": {
        if (!values["skip-preview"]) err("  previewing first (bad inputs fail here, before anything is provisioned)");
        await upWithPreview(stack, { ...common, ...plan, skipPreview: values["skip-preview"] ?? false });
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
              ...(values["expect-no-changes"] ? { expectNoChanges: true } : {}),
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
        else if (values.diff) process.stdout.write(`${maskSecrets(`${result.stdout.trimEnd()}\n\n${renderPreviewText(collector.model())}`, secrets).trimEnd()}\n`);
        return 0;
      }
    }
  } catch (e) {
    err(`agentws ${command} failed: ${maskSecrets(conciseError(e), secrets)}`);
    return 1;
  }
  return 0;
}

/**
 * Orphans of every backend (or the --kind ones): runtime-managed objects with no owner, in this
 * basedir only. A dry run unless --yes, as `destroy` is: removal deletes files.
 */
async function gcCommand(argv: string[]): Promise<number> {
  const err = (line: string) => process.stderr.write(`${line}\n`);
  try {
    const { values } = parseArgs({
      args: argv,
      options: { kind: { type: "string", multiple: true }, basedir: { type: "string" }, yes: { type: "boolean", short: "y" }, "dry-run": { type: "boolean" }, store: { type: "string" } },
    });
    // With a session store: owned runtime workspaces whose sessions are all gone are collected too.
    const referenced = values.store ? await referencedWorkspaces(values.store) : undefined;
    const remove = values.yes === true && values["dry-run"] !== true;
    const kinds = values.kind ?? [...BACKEND_KINDS];
    const results: unknown[] = [];
    let failed = false;
    for (const kind of kinds) {
      try {
        const backend = await loadBackend(kind as BackendKind);
        const spec = backend.schema.parse({ kind, ...(values.basedir ? { basedir: resolve(values.basedir) } : {}) });
        const why = await backend.canRunHere(spec as never);
        if (why) {
          err(`${kind}: skipped (${why})`);
          continue;
        }
        const r = await collectGarbage(backend.createDriver(spec as never), { remove, ...(referenced ? { referenced } : {}) });
        for (const o of r.orphans) err(`${kind}: ${r.removed.includes(o.workspaceId) ? "removed" : remove ? "kept" : "would remove"} ${o.workspaceId}`);
        for (const k of r.kept) err(`${kind}: kept ${k.workspaceId}: ${k.reason}`);
        results.push({ ...r, orphans: r.orphans.map((o) => ({ workspaceId: o.workspaceId, state: o.state, location: o.location })) });
      } catch (e) {
        // An explicitly named kind failing fails the command; an implicit one (no engine here) is reported.
        if (values.kind) failed = true;
        err(`${kind}: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    if (!remove) err("dry run: nothing removed (pass --yes to remove them with their files)");
    process.stdout.write(`${JSON.stringify({ dryRun: !remove, results }, null, 2)}\n`);
    return failed ? 1 : 0;
  } catch (e) {
    err(`agentws gc failed: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}

async function referencedWorkspaces(location: string): Promise<Set<string>> {
  const store = await openSessionStore(location);
  try {
    return await store.workspaceIds();
  } finally {
    await store.close();
  }
}

async function runOwn(name: string, command: (argv: string[]) => Promise<number>, argv: string[]): Promise<number> {
  try {
    return await command(argv);
  } catch (e) {
    process.stderr.write(`agentws ${name} failed: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
}

async function runBackendCommand(command: BackendCommand, argv: string[]): Promise<number> {
  const err = (line: string) => process.stderr.write(`${line}\n`);
  try {
    const { values } = parseArgs({ args: argv, options: command.options, allowPositionals: false });
    return await command.run(values, { stdout: (text) => process.stdout.write(text), stderr: err });
  } catch (e) {
    err(`agentws ${command.name} failed: ${e instanceof Error ? e.message : String(e)}`);
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
