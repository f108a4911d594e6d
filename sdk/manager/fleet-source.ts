import { basename, delimiter, dirname } from "node:path";
import { FLEET_OUTPUT_NAME, FleetOutputsSchema, SECRET_MASK, type FleetOutputs } from "../contract/fleet.js";
import { InvalidArgumentError, UnavailableError, fromZodError } from "../errors.js";
import { engineEnv, engineMessage, findPulumiBinDir } from "../util/pulumi-project.js";
import { isObject } from "../util/records.js";

/**
 * Reads the `workspaces` stack output (the FleetOutputsSchema contract in sdk/contract/fleet.ts) from
 * whatever shape the caller has:
 * - the map itself, `{ <workspaceId>: FleetEntry }`;
 * - plain stack outputs, `{ workspaces: <map>, ... }` (`pulumi stack output --json`);
 * - Automation API outputs, `{ workspaces: { value: <map>, secret } , ... }`.
 *
 * A fleet with secret-bearing values (MCP headers and env, backend env) makes `workspaces` a
 * Pulumi secret: the Automation API (`fromStack`) and `pulumi stack output --json --show-secrets`
 * give it decrypted, plain `pulumi stack output --json` only as "[secret]", which is refused here
 * with that advice. The manager needs the values: it seeds them into workspaces it (re)creates.
 */
export function parseFleetOutputs(outputs: unknown): FleetOutputs {
  const parsed = FleetOutputsSchema.safeParse(unwrap(outputs));
  if (!parsed.success) throw fromZodError(FLEET_OUTPUT_NAME, parsed.error);
  return parsed.data;
}

function unwrap(outputs: unknown): unknown {
  if (!isObject(outputs)) throw new InvalidArgumentError("stack outputs must be a JSON object", { field: FLEET_OUTPUT_NAME });
  const named = outputs[FLEET_OUTPUT_NAME];
  const value = isObject(named) && "value" in named && "secret" in named ? named.value : named;
  if (value === SECRET_MASK)
    throw new InvalidArgumentError(
      "is a secret output shown masked (the fleet holds MCP header/env or backend env values); read it with WorkspaceManager.fromStack or `pulumi stack output --json --show-secrets`",
      { field: FLEET_OUTPUT_NAME },
    );
  // A fleet map may itself hold a workspace whose id is "workspaces": that one has a backend.
  if (!isObject(named) || "backend" in named) return outputs;
  if ("value" in named && "secret" in named) return named.value;
  return named;
}

/** Which stack to read. `workDir` is a Pulumi project folder; otherwise `projectName` names it. */
export interface StackSelector {
  stackName: string;
  workDir?: string;
  projectName?: string;
  /** Extra environment for the Pulumi CLI, e.g. PULUMI_BACKEND_URL, PULUMI_CONFIG_PASSPHRASE. */
  envVars?: Record<string, string>;
  /** Pulumi home folder (plugins, credentials); default ~/.pulumi. */
  pulumiHome?: string;
}

/** Loads a stack's outputs through the Automation API (needs the pulumi CLI on PATH). */
export async function readStackOutputs(selector: StackSelector): Promise<FleetOutputs> {
  if (!selector.stackName) throw new InvalidArgumentError("is required", { field: "stackName" });
  // Loaded lazily: managers that never read a stack do not load the Pulumi SDK.
  const { LocalWorkspace, PulumiCommand } = await import("@pulumi/pulumi/automation/index.js");
  // The same state backend, passphrase default and CLI as `agentws up` (sdk/util/pulumi-project.ts);
  // the caller's envVars win.
  const binDir = findPulumiBinDir();
  const base = selector.workDir ? engineEnv({ workDir: selector.workDir, binDir }) : binDir ? { PATH: [binDir, process.env.PATH ?? ""].join(delimiter) } : {};
  const envVars = { ...base, ...selector.envVars };
  // The Automation API finds its CLI on this process's PATH, not envVars': hand it the one found.
  const pulumiCommand =
    binDir && basename(binDir) === "bin" ? await PulumiCommand.get({ root: dirname(binDir), skipVersionCheck: true }).catch(() => undefined) : undefined;
  const opts = {
    envVars,
    ...(pulumiCommand ? { pulumiCommand } : {}),
    ...(selector.pulumiHome ? { pulumiHome: selector.pulumiHome } : {}),
  };
  let outputs: Record<string, unknown>;
  try {
    const stack = selector.workDir
      ? await LocalWorkspace.selectStack({ stackName: selector.stackName, workDir: selector.workDir }, opts)
      : await LocalWorkspace.selectStack(
          {
            stackName: selector.stackName,
            projectName: requireProject(selector.projectName),
            // Only outputs are read; the program never runs.
            program: async () => undefined,
          },
          opts,
        );
    outputs = await stack.outputs();
  } catch (e) {
    if (e instanceof InvalidArgumentError) throw e;
    throw new UnavailableError(
      `could not read outputs of stack '${selector.stackName}' (state: ${envVars.PULUMI_BACKEND_URL ?? process.env.PULUMI_BACKEND_URL ?? "Pulumi's default"}): ${engineMessage(e)}`,
      { cause: e },
    );
  }
  if (!(FLEET_OUTPUT_NAME in outputs))
    throw new InvalidArgumentError(`stack '${selector.stackName}' has no '${FLEET_OUTPUT_NAME}' output; export the WorkspaceFleet's outputs under that name`, {
      field: FLEET_OUTPUT_NAME,
    });
  return parseFleetOutputs(outputs);
}

function requireProject(projectName: string | undefined): string {
  if (!projectName) throw new InvalidArgumentError("is required when workDir is not given", { field: "projectName" });
  return projectName;
}
