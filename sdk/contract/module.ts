import type { z } from "zod";
import type { Logger } from "../logger.js";
import type { BackendDescription, Driver, DriverContext, EnsureOutcome, WorkspaceIdentity } from "./driver.js";

/** What close() does to a workspace's backend object: pause it, keep it as is, or destroy it. */
export type Teardown = "pause" | "keep" | "destroy";

/** The spec fields of a backend (its schema's keys but `kind`). */
export type SpecField<Spec> = Exclude<keyof Spec & string, "kind">;

/**
 * The one descriptor of a backend: everything the rest of the SDK (registry, stacks, CLI, the
 * Workspace and Manager classes `defineBackend` builds from it) needs to know, so none of them
 * names one. A kind's index.ts passes it to `defineBackend` (sdk/backends/define.ts), which adds
 * the Workspace and Manager classes; loaded lazily through the registry, so a Local user never
 * loads Docker's code.
 */
export interface BackendModule<Spec extends { kind: string } = { kind: string }, D extends Driver = Driver> {
  readonly kind: Spec["kind"];
  /** The backend's option schema (also held eagerly by the registry). */
  readonly schema: z.ZodType<Spec>;
  /** A driver for a parsed spec of this kind. */
  createDriver(spec: Spec): D;
  /** How the workspace names its backend in its instructions ("Docker-based"). */
  readonly label: string;
  /**
   * The workspace root as processes in the sandbox see it: a fixed path, or one the driver computes
   * for an id (`workdirFor`, a host folder). With neither, the sandbox's own `workdir`, known once initialized.
   */
  readonly workdir?: string;
  workdirFor?(driver: D, workspaceId: string): string;
  readonly defaults: BackendDefaults<Spec>;
  /**
   * Folders made right after initialize: the reference's sandboxed workspaces have `data/` and
   * `sessions/` from the start (the default); its local one makes them on first use ([]).
   */
  readonly initFolders?: readonly string[];
  /** Why a workspace of this spec cannot run on this host (a missing binary, no engine), or undefined when it can. */
  canRunHere(spec: Spec): Promise<string | undefined>;
  /** Extra `agentws` sub-commands this backend adds (Docker's prune-images). */
  readonly commands?: readonly BackendCommand[];
  /**
   * Backend-specific repair of an ensured (and owner-checked) backend object before connecting,
   * e.g. a container built from an outdated image. Returns the new outcome when it rebuilt it.
   */
  reconcile?(args: ReconcileArgs<D>): Promise<EnsureOutcome | undefined>;
  /** How the runtime manager's options differ from the spec's fields: some left out, some required. */
  readonly managerOptions?: { readonly omit?: readonly SpecField<Spec>[]; readonly require?: readonly SpecField<Spec>[] };
  /** The spec a manager uses for a workspace a stack declared (default: the entry's own `backend`). */
  declaredSpec?(entry: { readonly backend: { readonly kind: string }; readonly location: Readonly<Record<string, string>> }): Spec | undefined;
}

/** What a reconcile hook gets: the workspace's driver, what ensureBackend found, who asks. */
export interface ReconcileArgs<D extends Driver = Driver> {
  readonly driver: D;
  readonly description: BackendDescription;
  readonly identity: WorkspaceIdentity;
  readonly ctx: DriverContext & { logger: Logger };
}

export interface BackendDefaults<Spec = unknown> {
  /** What an idle eviction does to a runtime workspace. */
  eviction: "pause" | "close";
  /** When idle workspaces are swept: by a background timer, or lazily on requests. */
  sweep: "background" | "lazy";
  /** What close() does to the backend object when the caller gave no `teardown` (also a manager's default). */
  teardown: Teardown | ((spec: Spec) => Teardown);
  /** Whether destroying the backend object also removes its files by default. */
  destroyDeletesData: boolean;
}

/** Output channels of a CLI command: JSON or markdown on stdout, progress lines on stderr. Library code never prints. */
export interface CommandIo {
  stdout(text: string): void;
  stderr(line: string): void;
}

/** One option of a backend's CLI command: `--<name>` with a value (`string`) or without (`boolean`). */
export interface BackendCommandOption {
  readonly type: "string" | "boolean";
  /** Repeatable (values collected in order). */
  readonly multiple?: boolean;
  /** The value's placeholder in help, e.g. "IMAGE". */
  readonly value?: string;
  /** What it does, for `agentws <command> --help`. */
  readonly help: string;
}

/** A sub-command a backend adds to `agentws`; the CLI parses its options and prints its help. */
export interface BackendCommand {
  readonly name: string;
  /** One line: what the command does. */
  readonly description: string;
  readonly options: Readonly<Record<string, BackendCommandOption>>;
  /** Example invocations for the help text. */
  readonly examples?: readonly string[];
  run(values: Record<string, string | boolean | string[] | undefined>, io: CommandIo): Promise<number>;
}
