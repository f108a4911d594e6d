import { z } from "zod";
import type { BackendDefaults, BackendModule, SpecField } from "../contract/module.js";
import { fromZodError } from "../errors.js";
import { DriverWorkspace, TeardownSchema, type DriverWorkspaceOptions, type DriverWorkspaceOptionsFor } from "../kit/driver-workspace.js";
import { type PersistentAwareDriver, type Teardown } from "../kit/driver-workspace.js";
import { ManagerOptionsSchema, WorkspaceManager, type ManagerOptions } from "../manager/manager.js";
import { SandboxSeedOptionsShape, SandboxWorkspaceManager, type SandboxManagerParsedOptions } from "../manager/sandbox-manager.js";
import type { WorkspaceOptions } from "../workspace/workspace.js";

/** A constructor's parameters: the options object is optional when every field of it is. */
export type OptionsArgs<O> = object extends O ? [options?: O] : [options: O];

/** The Workspace class of a kind: facade options, the spec's fields (no kind), identity and teardown. */
export type WorkspaceClass<S extends z.ZodType<{ kind: string }>, D extends PersistentAwareDriver> = new (
  ...args: OptionsArgs<DriverWorkspaceOptionsFor<S>>
) => DriverWorkspace<z.output<S>, D>;

type ShapeOf<S> = S extends z.ZodObject<infer Shape> ? Shape : never;
type Required_<T> = T extends z.ZodOptional<infer Inner> ? Inner : T;

/** The shape of a kind's Manager options: manager options, the spec's fields (but kind; O left out, R required), workspace seeds, `teardown`. */
export type ManagerOptionsShape<
  S extends z.ZodType<{ kind: string }>,
  O extends string = never,
  R extends string = never,
> = typeof ManagerOptionsSchema.shape & {
  [K in Exclude<keyof ShapeOf<S>, "kind" | O>]: K extends R ? Required_<ShapeOf<S>[K]> : ShapeOf<S>[K];
} & typeof SandboxSeedOptionsShape & {
    /** What an eviction does to the backend object; default the backend's own teardown default. */
    teardown: z.ZodOptional<typeof TeardownSchema>;
  };

/** The schema of a kind's Manager options. */
export type ManagerOptionsSchemaFor<S extends z.ZodType<{ kind: string }>, O extends string = never, R extends string = never> = z.ZodObject<
  ManagerOptionsShape<S, O, R>,
  z.core.$strict
>;

/** The Manager options of a kind, as its constructor takes them. */
export type ManagerOptionsFor<S extends z.ZodType<{ kind: string }>, O extends string = never, R extends string = never> = z.input<
  ManagerOptionsSchemaFor<S, O, R>
> &
  Pick<ManagerOptions, "logger" | "onEvent">;

/** A Manager class of a kind, building workspaces of class W; with WorkspaceManager's static constructors. */
export type ManagerClass<Spec extends { kind: string }, W extends DriverWorkspace<Spec, PersistentAwareDriver>, Options> = (new (
  ...args: OptionsArgs<Options>
) => SandboxWorkspaceManager<Spec, W>) &
  Pick<typeof WorkspaceManager, "fromOutputs" | "fromStack">;

/** What `defineBackend` returns: the descriptor itself, with the Workspace and Manager classes built from it. */
export type DefinedBackend<
  S extends z.ZodType<{ kind: string }>,
  D extends PersistentAwareDriver,
  O extends string = never,
  R extends string = never,
> = BackendModule<z.output<S>, D> & {
  readonly schema: S;
  /** The kind's Workspace class; a kind's index.ts names it: `export class DockerWorkspace extends docker.Workspace {}`. */
  readonly Workspace: WorkspaceClass<S, D>;
  /** The options a Manager of this kind validates. */
  readonly ManagerOptionsSchema: ManagerOptionsSchemaFor<S, O, R>;
  /** A Manager class building workspaces of the plain `Workspace` (what a service over any kind uses). */
  readonly Manager: ManagerClass<z.output<S>, DriverWorkspace<z.output<S>, D>, ManagerOptionsFor<S, O, R>>;
  /** The kind's Manager class, building workspaces of `Workspace` (a subclass of this backend's): `export class DockerWorkspaceManager extends docker.managerFor(DockerWorkspace) {}`. */
  managerFor<W extends DriverWorkspace<z.output<S>, D>>(
    Workspace: abstract new (...args: never[]) => W,
  ): ManagerClass<z.output<S>, W, ManagerOptionsFor<S, O, R>>;
};

/** What a backend's common case is; a descriptor gives only what differs. */
export const DEFAULT_BACKEND_DEFAULTS = {
  eviction: "pause",
  sweep: "background",
  teardown: "pause",
  destroyDeletesData: false,
} as const satisfies BackendDefaults;

/**
 * What a kind's index.ts writes: its BackendModule, with the kind read off the schema, the driver
 * given as its class (constructed with a parsed spec), `defaults` only where they differ from
 * DEFAULT_BACKEND_DEFAULTS, and `canRunHere` only when something can be missing.
 */
export type BackendDescriptor<
  S extends z.ZodObject & z.ZodType<{ kind: string }>,
  D extends PersistentAwareDriver,
  O extends string = never,
  R extends string = never,
> = Omit<BackendModule<z.output<S>, D>, "kind" | "schema" | "createDriver" | "defaults" | "canRunHere" | "managerOptions"> & {
  readonly schema: S;
  readonly Driver: new (spec: z.output<S>) => D;
  readonly defaults?: Partial<BackendDefaults<z.output<S>>>;
  canRunHere?(spec: z.output<S>): Promise<string | undefined>;
  readonly managerOptions?: { readonly omit?: readonly O[]; readonly require?: readonly R[] };
};

/**
 * Builds a kind's BackendModule from its descriptor, and from it the kind's Workspace class (on
 * DriverWorkspace), its Manager options schema and Manager class (on SandboxWorkspaceManager). A
 * kind's index.ts is this call, the public class names, and its exports.
 */
export function defineBackend<
  S extends z.ZodObject & z.ZodType<{ kind: string }>,
  D extends PersistentAwareDriver,
  const O extends SpecField<z.output<S>> = never,
  const R extends SpecField<z.output<S>> = never,
>(descriptor: BackendDescriptor<S, D, O, R>): DefinedBackend<S, D, O, R> {
  const { Driver, defaults, canRunHere, ...rest } = descriptor;
  const module = {
    ...rest,
    kind: (descriptor.schema.shape as { kind: z.ZodLiteral<string> }).kind.value as z.output<S>["kind"],
    createDriver: (spec) => new Driver(spec),
    defaults: { ...DEFAULT_BACKEND_DEFAULTS, ...defaults },
    canRunHere: canRunHere ?? (() => Promise.resolve(undefined)),
  } as BackendModule<z.output<S>, D> & { readonly schema: S; readonly managerOptions?: { readonly omit?: readonly O[]; readonly require?: readonly R[] } };
  type Spec = z.output<S>;

  class BackendWorkspace extends DriverWorkspace<Spec, D> {
    constructor(options: WorkspaceOptions & DriverWorkspaceOptions = {}) {
      super(options, module);
    }
  }

  const omit = new Set<string>(["kind", ...(module.managerOptions?.omit ?? [])]);
  const specShape: Record<string, z.ZodType> = {};
  for (const [key, field] of Object.entries(module.schema.shape as Record<string, z.ZodType>)) {
    if (omit.has(key)) continue;
    // A required field is the optional spec field made mandatory (workspaces that must outlive the process need a basedir).
    specShape[key] =
      (module.managerOptions?.require as readonly string[] | undefined)?.includes(key) && field instanceof z.ZodOptional
        ? (field.unwrap() as z.ZodType)
        : field;
  }
  const ManagerOptionsSchemaOfKind = ManagerOptionsSchema.extend({
    ...specShape,
    ...SandboxSeedOptionsShape,
    /** What an eviction does to the backend object; default the backend's own teardown default. */
    teardown: TeardownSchema.optional(),
  });

  function managerFor<W extends DriverWorkspace<Spec, D>>(Workspace: abstract new (...args: never[]) => W): ManagerClass<Spec, W, ManagerOptionsFor<S, O, R>> {
    class BackendManager extends SandboxWorkspaceManager<Spec, W> {
      constructor(options?: ManagerOptionsFor<S, O, R>) {
        const { logger, onEvent, ...rest } = options ?? ({} as ManagerOptionsFor<S, O, R>);
        const parsed = ManagerOptionsSchemaOfKind.safeParse(rest);
        if (!parsed.success) throw fromZodError("options", parsed.error);
        const { teardown, ...managerOptions } = parsed.data as Record<string, unknown> & { teardown?: Teardown };
        super(
          { ...(managerOptions as SandboxManagerParsedOptions), ...(logger ? { logger } : {}), ...(onEvent ? { onEvent } : {}) },
          {
            module: module as BackendModule<Spec, PersistentAwareDriver>,
            ...(teardown ? { teardown } : {}),
            Workspace: Workspace as never,
          },
        );
      }
    }
    return BackendManager as unknown as ManagerClass<Spec, W, ManagerOptionsFor<S, O, R>>;
  }

  return Object.assign({}, module, {
    Workspace: BackendWorkspace as unknown as WorkspaceClass<S, D>,
    ManagerOptionsSchema: ManagerOptionsSchemaOfKind as unknown as ManagerOptionsSchemaFor<S, O, R>,
    Manager: managerFor(BackendWorkspace),
    managerFor,
  }) as DefinedBackend<S, D, O, R>;
}
