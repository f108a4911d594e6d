import type { z } from "zod";
import type { Driver } from "./driver.js";

/**
 * What one backend folder exports from its index.ts: everything the rest of the SDK (registry,
 * stacks, CLI) needs to know about a backend, so none of them names one. Loaded lazily through
 * the registry: a Local user never loads Docker's code.
 */
export interface BackendModule<Spec extends { kind: string } = { kind: string }> {
  readonly kind: Spec["kind"];
  /** The backend's option schema (also held eagerly by the registry). */
  readonly schema: z.ZodType<Spec>;
  /** A driver for a parsed spec of this kind. */
  createDriver(spec: Spec): Driver;
  /** The backend's Workspace class (constructed with WorkspaceOptions and the spec's fields). */
  readonly Workspace: abstract new (...args: never[]) => object;
  /** The backend's runtime WorkspaceManager class. */
  readonly Manager: abstract new (...args: never[]) => object;
  readonly defaults: BackendDefaults;
  /** Why a workspace of this spec cannot run on this host (a missing binary, no engine), or undefined when it can. */
  canRunHere(spec: Spec): Promise<string | undefined>;
  /** Extra `agentws` sub-commands this backend adds (Docker's prune-images). */
  readonly commands?: readonly BackendCommand[];
}

export interface BackendDefaults {
  /** What an idle eviction does to a runtime workspace. */
  eviction: "pause" | "close";
  /** When idle workspaces are swept: by a background timer, or lazily on requests. */
  sweep: "background" | "lazy";
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
