// The Local backend: a host folder per workspace, no isolation. Entry point `agent-workspaces/local`.
import path from "node:path";
import { z } from "zod";
import { fromZodError } from "../../errors.js";
import type { Logger } from "../../logger.js";
import { expandHome } from "../../paths.js";
import { blake2bHex } from "../../util/blake2b.js";
import { WorkspaceOptionsSchema } from "../../workspace/workspace.js";
import { defineBackend, type ManagerOptionsFor } from "../define.js";
import { LocalDriver, defaultLocalBasedir } from "./driver.js";
import { LocalBackendSchema, type LocalBackendSpec } from "./schema.js";

export { LocalBackendSchema, type LocalBackendSpec } from "./schema.js";
export { LocalDriver } from "./driver.js";
export { LocalSandbox } from "../../kit/host-sandbox.js";

export const backend = defineBackend({
  schema: LocalBackendSchema,
  Driver: LocalDriver,
  label: "local",
  // The host folder itself: commands run on the host with it as their working directory.
  workdirFor: (driver, workspaceId) => driver.folderFor(workspaceId),
  // A folder has nothing to pause: eviction closes, lazily on requests; its files stay.
  defaults: { eviction: "close", sweep: "lazy" },
  // As the reference's LocalWorkspace: only skills/ after initialize; data/ and sessions/ come on first use.
  initFolders: [],
  // No canRunHere: a host folder needs nothing but the file system.
  // A manager serves one folder per workspace id under its basedir, never one folder for all.
  managerOptions: { omit: ["path"] },
  // A declared workspace lives where the stack put it: its described host path, else its spec.
  declaredSpec: (entry): LocalBackendSpec | undefined => (entry.location.hostPath ? { kind: "local", path: entry.location.hostPath } : undefined),
});

export const LocalWorkspaceOptionsSchema = WorkspaceOptionsSchema.extend({
  /** Host folder that is the workspace root; created on initialize. `~` is expanded. */
  workdir: z.string().min(1, "workdir must be a host folder path"),
});
export type LocalWorkspaceOptions = z.input<typeof LocalWorkspaceOptionsSchema> & { logger?: Logger };

const WorkdirSchema = LocalWorkspaceOptionsSchema.pick({ workdir: true });

/**
 * A workspace in a host folder. No isolation: commands run on the host with the folder as their
 * working directory; file operations are confined to the folder. The folder's owner record sits
 * beside it (`<parent>/.agentws/owners/<name>.json`), out of the file tools' reach. Without a
 * workspaceId, the id is the folder's own (BLAKE2b of its path), so reopening a folder is the same workspace.
 */
export class LocalWorkspace extends backend.Workspace {
  constructor(options: LocalWorkspaceOptions) {
    super(localOptions(options));
  }
}

/** The folder as the spec's `path`; a manager builds its workspaces from its spec (`basedir`) instead. */
function localOptions(options: LocalWorkspaceOptions): ConstructorParameters<typeof backend.Workspace>[0] {
  const o = (options ?? {}) as LocalWorkspaceOptions & { basedir?: unknown; path?: unknown };
  if (o.workdir === undefined && (o.basedir !== undefined || o.path !== undefined)) return o as never;
  const parsed = WorkdirSchema.safeParse({ workdir: o.workdir });
  if (!parsed.success) throw fromZodError("options", parsed.error);
  const { workdir: _workdir, ...rest } = o;
  const folder = path.resolve(expandHome(parsed.data.workdir));
  return { ...rest, path: folder, workspaceId: rest.workspaceId || blake2bHex(`local::${folder}`, 16) } as never;
}

export const LocalWorkspaceManagerOptionsSchema = backend.ManagerOptionsSchema;
export type LocalWorkspaceManagerOptions = ManagerOptionsFor<typeof LocalBackendSchema, "path">;

/**
 * Workspaces in host folders, one per workspace id (never one per agent: two users or two
 * sessions never share a folder). Folders carry the LocalDriver's metadata (owner, managed-by),
 * so a restarted manager reattaches and still refuses another user's id. Eviction closes (a folder
 * has nothing to pause) and happens lazily, on requests.
 */
export class LocalWorkspaceManager extends backend.managerFor(LocalWorkspace) {
  /** Host folder holding one folder per workspace id: `<basedir>/<workspaceId>`. Default ~/.agent-workspaces/local. */
  readonly basedir: string;

  constructor(options: LocalWorkspaceManagerOptions = {}) {
    const basedir =
      typeof options?.basedir === "string" && options.basedir
        ? path.resolve(options.basedir)
        : options?.basedir === undefined
          ? path.resolve(defaultLocalBasedir())
          : options.basedir;
    super({ ...options, basedir });
    this.basedir = basedir;
  }

  /** The host folder of a workspace id served by this manager. */
  folderFor(workspaceId: string): string {
    const declared = this.declared(workspaceId);
    if (!declared) return path.join(this.basedir, workspaceId);
    return new LocalDriver(backend.declaredSpec!(declared) ?? (declared.backend as LocalBackendSpec)).folderFor(workspaceId);
  }
}
