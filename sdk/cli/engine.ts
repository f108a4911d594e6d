import { existsSync } from "node:fs";
import { basename, delimiter, dirname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { LocalWorkspace, PulumiCommand, type EngineEvent, type PulumiFn, type Stack, type UpOptions, type UpResult } from "@pulumi/pulumi/automation/index.js";
import { defaultBackendUrl, engineEnv, engineMessage, findPulumiBinDir, isNoSuchStack, readProjectFile, type ProjectFile } from "../util/pulumi-project.js";
import { ConflictError, InvalidArgumentError, UnavailableError } from "../errors.js";
import { buildModel, type PreviewModel, type StepLike } from "./preview-model.js";
import { guardStack } from "./safe-events.js";

/**
 * Drives the Pulumi engine through the Automation API with an inline program, so only the
 * `pulumi` CLI and the npm-shipped dynamic-provider host are needed (no Node language host).
 * Stacks it opens mask secrets in everything their operations hand to caller hooks.
 */
export interface EngineOptions {
  /** Folder holding Pulumi.yaml (or where one is written) and node_modules; the provider process runs here. */
  workDir: string;
  stackName: string;
  /** Inline program; default: the default export of Pulumi.yaml's `main`. */
  program?: PulumiFn;
  /** Project name when workDir has no Pulumi.yaml. */
  projectName?: string;
  /** Default: $PULUMI_BACKEND_URL, else Pulumi.yaml backend.url, else file://<workDir>/.agentws/state. */
  backendUrl?: string;
  /** Default: $PULUMI_HOME (else Pulumi's own default). Tests pass a temp dir. */
  pulumiHome?: string;
  /** Default: $PULUMI_CONFIG_PASSPHRASE, else "" (local stacks). */
  passphrase?: string;
  /** Extra environment for the CLI and the provider process. */
  env?: Record<string, string>;
  /**
   * Create the stack when it does not exist. Default false: a mistyped name is an error listing the
   * stacks that exist (only `agentws up` creates one).
   */
  create?: boolean;
  /** Folder holding `pulumi` (and pulumi-resource-pulumi-nodejs); default: PATH, then the toolchain cache. */
  pulumiBinDir?: string;
}

export { findPulumiBinDir, readProjectFile, type ProjectFile } from "../util/pulumi-project.js";

/** Loads the stack program: the default export (a function) of Pulumi.yaml's main, or its named exports. */
export async function loadProgram(workDir: string, project: ProjectFile | undefined): Promise<PulumiFn> {
  const main = resolve(workDir, project?.main ?? "index.js");
  if (!existsSync(main)) throw new UnavailableError(`stack program ${main} not found; run \`npm run build\` (Pulumi.yaml main points at compiled JS)`);
  return async () => {
    const mod = (await import(pathToFileURL(main).href)) as { default?: unknown } & Record<string, unknown>;
    if (typeof mod.default === "function") return (await (mod.default as () => unknown)()) as Record<string, unknown> | void;
    const { default: _d, ...named } = mod;
    return named;
  };
}

export async function openStack(options: EngineOptions): Promise<Stack> {
  const workDir = resolve(options.workDir);
  const project = readProjectFile(workDir);
  const binDir = findPulumiBinDir(options.pulumiBinDir);
  if (!binDir) throw new UnavailableError("no `pulumi` CLI found: run scripts/pulumi-toolchain.sh (builds one offline) or install Pulumi");
  const backendUrl = options.backendUrl ?? defaultBackendUrl(workDir);
  if (backendUrl.startsWith("file://")) {
    const { mkdirSync } = await import("node:fs");
    mkdirSync(new URL(backendUrl).pathname, { recursive: true });
  }
  const env = { ...engineEnv({ workDir, backendUrl, passphrase: options.passphrase, binDir }), ...options.env };
  const pulumiHome = options.pulumiHome ?? process.env.PULUMI_HOME;
  // PulumiCommand looks for <root>/bin/pulumi; a CLI in a folder not named bin is found through PATH.
  if (basename(binDir) !== "bin") process.env.PATH = [binDir, process.env.PATH ?? ""].join(delimiter);
  const pulumiCommand = await PulumiCommand.get({ ...(basename(binDir) === "bin" ? { root: dirname(binDir) } : {}), skipVersionCheck: true });
  const program = options.program ?? (await loadProgram(workDir, project));
  const projectName = project?.name ?? options.projectName;
  if (!projectName) throw new InvalidArgumentError(`no Pulumi.yaml in ${workDir} and no projectName given`, { field: "projectName" });
  const args = { stackName: options.stackName, projectName, program };
  const wsOptions = {
    workDir,
    pulumiCommand,
    envVars: env,
    ...(pulumiHome ? { pulumiHome } : {}),
    ...(project ? {} : { projectSettings: { name: projectName, runtime: "nodejs" as const } }),
  };
  let stack: Stack;
  try {
    stack = options.create ? await LocalWorkspace.createOrSelectStack(args, wsOptions) : await LocalWorkspace.selectStack(args, wsOptions);
  } catch (e) {
    if (options.create || !isNoSuchStack(e))
      throw new UnavailableError(`could not open stack '${options.stackName}' (state: ${backendUrl}): ${engineMessage(e)}`, { cause: e });
    const names = await LocalWorkspace.create(wsOptions)
      .then((w) => w.listStacks())
      .then((l) => l.map((x) => x.name))
      .catch(() => [] as string[]);
    throw new InvalidArgumentError(
      `no stack '${options.stackName}' in ${backendUrl} (stacks there: ${names.length ? names.join(", ") : "none"}); \`agentws up --stack ${options.stackName}\` creates it`,
      { field: "stack", details: { stacks: names } },
    );
  }
  // Events and output handed to callers' hooks are masked (sdk/cli/safe-events.ts).
  return guardStack(stack);
}

/** What `agentws` asks of the provider beyond the program: set for one operation, then restored. */
export interface PlanOptions {
  /** Workspace ids to replace even when nothing changed (`--replace`). */
  replaceWorkspaces?: string[];
  /** Apply changes that delete workspace files (refused otherwise). */
  allowDataLoss?: boolean;
}

/**
 * Runs `fn` with the provider's switches in the stack's environment (the engine hands it to the
 * provider process): AGENTWS_REPLACE, AGENTWS_ALLOW_DATA_LOSS and, for previews, AGENTWS_PREVIEW
 * (data-deleting changes are shown, not refused).
 */
export async function withPlanEnv<T>(stack: Stack, options: PlanOptions & { preview?: boolean }, fn: () => Promise<T>): Promise<T> {
  const env = (stack.workspace as unknown as { envVars?: Record<string, string> }).envVars;
  if (!env) return fn();
  const wanted: Record<string, string> = {
    AGENTWS_REPLACE: (options.replaceWorkspaces ?? []).join(","),
    AGENTWS_ALLOW_DATA_LOSS: options.allowDataLoss ? "1" : "",
    AGENTWS_PREVIEW: options.preview ? "1" : "",
  };
  const saved = Object.fromEntries(Object.keys(wanted).map((k) => [k, env[k]]));
  Object.assign(env, wanted);
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(saved))
      if (v === undefined) delete env[k];
      else env[k] = v;
  }
}

/**
 * `up` the way `pulumi up` does it: a preview first, so bad inputs fail in check before any
 * workspace is provisioned (the Automation API's own `up` skips the preview and creates valid
 * resources while a sibling fails check). The preview's plan goes to `onPlan`; a replace or
 * re-create that deletes files stops here unless `allowDataLoss`, and a `--replace` id the stack
 * does not hold is an error. `skipPreview` trades those guarantees for speed (the provider still
 * refuses data loss).
 */
export async function upWithPreview(
  stack: Stack,
  options: UpOptions & PlanOptions & { skipPreview?: boolean; onPlan?: (model: PreviewModel) => void } = {},
): Promise<UpResult> {
  guardStack(stack);
  const { skipPreview, replaceWorkspaces, allowDataLoss, onPlan, ...up } = options;
  const plan: PlanOptions = { ...(replaceWorkspaces ? { replaceWorkspaces } : {}), ...(allowDataLoss ? { allowDataLoss } : {}) };
  if (!skipPreview) {
    const { onEvent: _e, onOutput: _o, ...rest } = up;
    const collector = new StepCollector();
    await withPlanEnv(stack, { ...plan, preview: true }, () =>
      stack.preview({ ...rest, onEvent: collector.onEvent, ...(up.onError ? { onError: up.onError } : {}) }),
    );
    const model = collector.model();
    onPlan?.(model);
    const missing = (replaceWorkspaces ?? []).filter((id) => !model.changes.some((c) => c.workspaceId === id && c.op === "replace"));
    if (missing.length)
      throw new InvalidArgumentError(`no workspace ${missing.map((m) => `'${m}'`).join(", ")} in stack '${stack.name}' to replace`, { field: "--replace" });
    const losing = model.changes.filter((c) => c.data === "deleted" && (c.op === "replace" || c.op === "recreate"));
    if (losing.length && !allowDataLoss)
      throw new ConflictError(
        `refusing to apply: ${losing.map((c) => `${c.op === "recreate" ? "re-creating" : "replacing"} workspace '${c.workspaceId}' (${c.fields.map((f) => f.path).join(", ")})`).join("; ")} deletes its files; ` +
          "review `agentws preview --markdown`, then run `agentws up --allow-data-loss` to apply",
        { field: "--allow-data-loss" },
      );
  }
  return withPlanEnv(stack, plan, () => stack.up(up));
}

/** Turns engine events into the same step shape `pulumi preview --json` gives. */
export class StepCollector {
  readonly steps: StepLike[] = [];
  readonly diagnostics: { severity?: string; message?: string }[] = [];
  readonly onEvent = (e: EngineEvent): void => {
    const m = e.resourcePreEvent?.metadata;
    if (m)
      this.steps.push({
        op: m.op,
        urn: m.urn,
        type: m.type,
        oldInputs: m.old?.inputs as Record<string, unknown> | undefined,
        oldOutputs: m.old?.outputs as Record<string, unknown> | undefined,
        newInputs: m.new?.inputs as Record<string, unknown> | undefined,
        replaceKeys: m.keys,
        diffKeys: m.diffs,
      });
    if (e.diagnosticEvent) this.diagnostics.push({ severity: e.diagnosticEvent.severity, message: e.diagnosticEvent.message });
  };
  model(): PreviewModel {
    return buildModel(this.steps, this.diagnostics);
  }
}
