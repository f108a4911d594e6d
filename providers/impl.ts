import { ensureBackend, type BackendDescription, type Driver, type WorkspaceIdentity } from "../sdk/contract/driver.js";
import { changePolicyOf } from "../sdk/contract/registry.js";
import { BackendSpecSchema, type BackendSpec } from "../sdk/contract/registry.js";
import { InvalidArgumentError, UnavailableError, ConflictError } from "../sdk/errors.js";
import { silentLogger, type Logger } from "../sdk/logger.js";
import type { McpServerSpec } from "../sdk/workspace/mcp-spec.js";
import { diffWorkspace, stableJson, type WorkspaceDiff } from "./diff.js";
import { describeHome, homesIn, nextLeftovers, type DataHome } from "./ledger-state.js";
import { checkInputs, containsUnknown, plain, type CheckFailure } from "./inputs.js";

/**
 * The WorkspaceResource provider's real logic. It runs inside Pulumi's dynamic-provider
 * process, loaded by the tiny serialized shim in provider.ts, so it is versioned with the
 * installed package rather than frozen into state. Drivers load lazily per call.
 */
export const OUTPUTS_SCHEMA_VERSION = 1;

type Props = Record<string, unknown>;

/** Stack config the engine hands every dynamic provider (whole config, secrets unwrapped). */
let stackCredentials: Record<string, string> = {};
let logger: Logger = silentLogger;
/** Stack config agentws:allowDataLoss: changes that delete files may apply. */
let allowDataLoss = false;

export interface ProviderConfig {
  get(key: string): string | undefined;
}

export const workspaceProviderImpl = {
  /** Reads `agentws:credentials` (a JSON object, set as a secret) once per deployment. */
  async configure(config: ProviderConfig): Promise<void> {
    allowDataLoss = /^(1|true)$/i.test(config.get("agentws:allowDataLoss") ?? "");
    const raw = config.get("agentws:credentials");
    stackCredentials = {};
    if (!raw) return;
    try {
      const parsed: unknown = JSON.parse(raw);
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed))
        for (const [k, v] of Object.entries(parsed)) if (typeof v === "string") stackCredentials[k] = v;
    } catch {
      // Never quote the value: it is a secret.
      throw new InvalidArgumentError("stack config agentws:credentials must be a JSON object of strings (set it with `pulumi config set --secret --path`)", {
        field: "agentws:credentials",
        fieldPrefix: false,
      });
    }
  },

  async check(_olds: Props, news: Props): Promise<{ inputs: Props; failures: CheckFailure[] }> {
    return checkInputs(news);
  },

  async diff(_id: string, olds: Props, news: Props) {
    const d = diffWorkspace(olds, news, { forceReplace: replaceRequested(olds.workspaceId) || replaceRequested(news.workspaceId) });
    if ((d.effect === "recreate" || d.effect === "replace") && !containsUnknown(news)) {
      refuseDataLoss(d, news);
      // A new object is about to take the old one's place: its inputs must be good first.
      const driver = await loadDriverFor(parseBackend(news.backend));
      await driver.validate?.(driverContext(news));
    }
    return { changes: d.changes, replaces: d.replaces, deleteBeforeReplace: d.deleteBeforeReplace };
  },

  async create(inputs: Props): Promise<{ id: string; outs: Props }> {
    const spec = parseBackend(inputs.backend);
    const identity = identityOf(inputs);
    const driver = await loadDriverFor(spec);
    const { description } = await ensureBackend(driver, identity, driverContext(inputs));
    const outs = outputsOf(inputs, description);
    try {
      await initializeSeeds(driver, description, inputs);
    } catch (e) {
      // The backend object exists: report it with its id so it lands in state and can be deleted.
      throw {
        id: identity.workspaceId,
        properties: outs,
        reasons: [`workspace '${identity.workspaceId}' was created but initializing its layout or seeds failed: ${messageOf(e)}`],
      };
    }
    return { id: identity.workspaceId, outs };
  },

  async read(id: string, props: Props = {}): Promise<{ id?: string; props?: Props; inputs?: Props }> {
    const spec = parseBackend(props.backend, "backend (from state)");
    const driver = await loadDriverFor(spec);
    const workspaceId = typeof props.workspaceId === "string" ? props.workspaceId : id;
    const found = await driver.find(workspaceId, driverContext(props));
    // Gone out of band: no id tells the engine to drop it, so `refresh` shows the drift and `up` recreates.
    if (!found) return {};
    const outs = outputsOf(props, found);
    return { id, props: outs, inputs: inputsOf(props) };
  },

  async update(_id: string, olds: Props, news: Props): Promise<{ outs: Props }> {
    const d = diffWorkspace(olds, news);
    refuseDataLoss(d, news);
    const spec = parseBackend(news.backend);
    const identity = identityOf(news);
    const driver = await loadDriverFor(spec);
    const ctx = driverContext(news);
    const touched = new Set(d.fields.map((f) => f.path.split(".")[0]));
    let description: BackendDescription;
    if (d.effect === "recreate") description = await recreate(driver, identity, ctx);
    else {
      ({ description } = await ensureBackend(driver, identity, { ...ctx, expectExisting: true }));
      if (touched.has("tags")) await driver.updateTags?.(identity.workspaceId, identity.tags ?? {}, ctx);
      if (touched.has("backend")) await driver.reconfigure?.(identity.workspaceId, ctx);
    }
    // Always re-initialize: it is idempotent, applies changed seeds, and completes a workspace whose
    // create failed half-way (the engine retries those as updates).
    await initializeSeeds(driver, description, news);
    // Outputs describe the object as it is now (a re-created container has a new id).
    const now = (await driver.find(identity.workspaceId, ctx)) ?? description;
    return { outs: outputsOf(news, now) };
  },

  async delete(id: string, props: Props): Promise<void> {
    const spec = parseBackend(props.backend, "backend (from state)");
    const driver = await loadDriverFor(spec);
    const workspaceId = typeof props.workspaceId === "string" ? props.workspaceId : id;
    await driver.destroy(workspaceId, { deleteData: props.deleteData === true }, driverContext(props));
  },
};

/**
 * The fleet's data ledger (DataLedger): created before and deleted after every workspace of the
 * fleet. Its inputs are where each workspace's files live; each update adds the homes that
 * workspaces leave behind with deleteData off (see nextLeftovers). Its delete, when the fleet's
 * deleteData is on, removes those leftovers through the backend's own driver
 * (`destroy(id, { deleteData: true, leftover: true })`), which refuses (a ConflictError) files a
 * live workspace uses now: those are kept and named. Any other failure fails the delete, so the
 * ledger and all its entries stay in state for the next destroy.
 */
export const ledgerProviderImpl = {
  async check(_olds: Props, news: Props): Promise<{ inputs: Props; failures: CheckFailure[] }> {
    return { inputs: news, failures: [] };
  },

  async diff(_id: string, olds: Props, news: Props) {
    const changes = (olds.deleteData === true) !== (news.deleteData === true) || stableJson(homesIn(olds.homes)) !== stableJson(homesIn(news.homes));
    return { changes, replaces: [], deleteBeforeReplace: false };
  },

  async create(inputs: Props): Promise<{ id: string; outs: Props }> {
    return { id: "data-ledger", outs: ledgerOutputs(inputs, []) };
  },

  async read(id: string, props: Props = {}): Promise<{ id: string; props: Props }> {
    return { id, props };
  },

  async update(_id: string, olds: Props, news: Props): Promise<{ outs: Props }> {
    return { outs: ledgerOutputs(news, nextLeftovers(olds, homesIn(news.homes))) };
  },

  async delete(_id: string, props: Props): Promise<void> {
    const leftovers = homesIn(props.leftovers);
    if (!leftovers.length) return;
    if (props.deleteData !== true) {
      await warn(`deleteData is off: kept the files ${leftovers.length} earlier workspace(s) left behind: ${leftovers.map(describeHome).join("; ")}`);
      return;
    }
    const failures: string[] = [];
    for (const h of leftovers) {
      try {
        const spec = parseBackend(h.backend, "backend (from the data ledger)");
        // Only drivers whose policy names their data fields know the leftover mode of destroy.
        if (!changePolicyOf(spec.kind).dataFields)
          throw new InvalidArgumentError(`the ${spec.kind} backend cannot remove files left behind; remove them by hand`);
        const driver = await loadDriverFor(spec);
        await driver.destroy(h.workspaceId, { deleteData: true, leftover: true }, driverContext({}));
      } catch (e) {
        if (e instanceof Error && (e as { code?: unknown }).code === "conflict") await warn(`kept the files of ${describeHome(h)}: ${e.message}`);
        else failures.push(`${describeHome(h)}: ${messageOf(e)}`);
      }
    }
    if (failures.length)
      throw new UnavailableError(
        `could not delete the files ${failures.length} earlier workspace(s) left behind (the data ledger keeps them; fix this and run destroy again): ${failures.join("; ")}`,
      );
  },
};

function ledgerOutputs(inputs: Props, leftovers: DataHome[]): Props {
  return plain({ deleteData: inputs.deleteData === true, homes: homesIn(inputs.homes), leftovers });
}

/** A warning for the operator: the provider logger, and the engine's diagnostics when run by it. */
async function warn(message: string): Promise<void> {
  logger.warn(message);
  const { warnEngine } = await import("./engine-log.js");
  await warnEngine(message);
}

/** Re-creates the object under its name, the driver's way, or (no such way) by destroying it keeping its files and creating it anew. */
async function recreate(driver: Driver, identity: WorkspaceIdentity, ctx: ReturnType<typeof driverContext>): Promise<BackendDescription> {
  if (driver.recreate) return driver.recreate(identity, ctx);
  await driver.validate?.(ctx);
  await driver.destroy(identity.workspaceId, { deleteData: false }, ctx);
  return driver.create(identity, ctx);
}

/** Workspace ids whose replacement was asked for (`agentws up --replace`), from the environment. */
function replaceRequested(id: unknown): boolean {
  const ids = (process.env.AGENTWS_REPLACE ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  return typeof id === "string" && ids.includes(id);
}

/**
 * A change that deletes the workspace's files is refused unless opted in (`agentws up
 * --allow-data-loss`, AGENTWS_ALLOW_DATA_LOSS=1 or stack config agentws:allowDataLoss). While the
 * CLI previews (AGENTWS_PREVIEW=1) it is reported rather than refused, so the plan still shows.
 */
function refuseDataLoss(d: WorkspaceDiff, news: Props): void {
  if (d.data !== "deleted" || allowDataLoss || /^(1|true)$/i.test(process.env.AGENTWS_ALLOW_DATA_LOSS ?? "") || process.env.AGENTWS_PREVIEW === "1") return;
  const why = d.fields
    .filter((f) => f.effect === d.effect)
    .map((f) => f.path)
    .join(", ");
  const verb = d.effect === "recreate" ? "re-creates its backend object" : "replaces it";
  throw new ConflictError(
    `workspace '${String(news.workspaceId)}': changing ${why} ${verb} and deletes its files; ` +
      "apply it with `agentws up --allow-data-loss` (or AGENTWS_ALLOW_DATA_LOSS=1, or stack config agentws:allowDataLoss=true)",
    { field: why.split(", ")[0] },
  );
}

/** Lets a host process (the CLI, tests) route provider diagnostics; never receives secret values. */
export function setProviderLogger(next: Logger): void {
  logger = next;
}

async function loadDriverFor(spec: BackendSpec): Promise<Driver> {
  const { loadDriver } = await import("../sdk/backends/load.js");
  return loadDriver(spec);
}

async function initializeSeeds(driver: Driver, description: BackendDescription, inputs: Props): Promise<void> {
  const { initializeWorkspace } = await import("./seed.js");
  await initializeWorkspace(
    driver,
    description,
    { skillPaths: inputs.skillPaths as string[] | undefined, defaultMcps: inputs.defaultMcps as McpServerSpec[] | undefined },
    logger,
  );
}

/**
 * Parses a backend spec. State written by an older provider may carry fields this version no
 * longer knows: those are dropped (so delete and refresh still work) rather than failing.
 */
export function parseBackend(value: unknown, field = "backend"): BackendSpec {
  let candidate = value;
  for (let attempt = 0; attempt < 3; attempt++) {
    const r = BackendSpecSchema.safeParse(candidate);
    if (r.success) return r.data;
    const unknownKeys = r.error.issues.flatMap((i) => (i.code === "unrecognized_keys" && i.path.length === 0 ? i.keys : []));
    if (!unknownKeys.length || !candidate || typeof candidate !== "object") {
      const first = r.error.issues[0];
      throw new InvalidArgumentError(first?.message ?? "invalid backend spec", { field: `${field}${first?.path.length ? `.${first.path.join(".")}` : ""}` });
    }
    candidate = Object.fromEntries(Object.entries(candidate).filter(([k]) => !unknownKeys.includes(k)));
  }
  throw new InvalidArgumentError("invalid backend spec", { field });
}

function identityOf(inputs: Props): WorkspaceIdentity {
  const str = (v: unknown) => (typeof v === "string" ? v : undefined);
  const workspaceId = str(inputs.workspaceId);
  if (!workspaceId) throw new InvalidArgumentError("missing from the resource's inputs; run `pulumi up` so check can derive it", { field: "workspaceId" });
  return {
    workspaceId,
    userId: str(inputs.userId),
    agentId: str(inputs.agentId),
    managedBy: "pulumi",
    tags: (inputs.tags as Record<string, string> | undefined) ?? undefined,
  };
}

/** Driver context; credentials ride along for backends that need them (never logged). */
function driverContext(inputs: Props): { logger: Logger; credentials: Record<string, string> } {
  const own = inputs.credentials && typeof inputs.credentials === "object" ? (inputs.credentials as Record<string, string>) : {};
  return { logger, credentials: { ...stackCredentials, ...own } };
}

const INPUT_KEYS = ["workspaceId", "userId", "agentId", "backend", "skillPaths", "defaultMcps", "tags", "ttlSeconds", "deleteData", "credentials"] as const;

function inputsOf(props: Props): Props {
  const out: Props = {};
  for (const k of INPUT_KEYS) if (props[k] !== undefined) out[k] = props[k];
  if (props.__provider !== undefined) out.__provider = props.__provider;
  return plain(out);
}

/** Full outputs: the inputs plus what the backend reports. Plain JSON only. */
function outputsOf(inputs: Props, description: BackendDescription): Props {
  const { __provider: _p, ...rest } = inputsOf(inputs);
  return plain({
    ...rest,
    schemaVersion: OUTPUTS_SCHEMA_VERSION,
    kind: description.kind,
    managedBy: "pulumi",
    state: description.state,
    location: { ...description.location },
  });
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
