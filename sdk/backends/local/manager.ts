import path from "node:path";
import { z } from "zod";
import { ensureBackend, type EnsureOutcome } from "../../contract/driver.js";
import { LocalDriver, defaultLocalBasedir } from "./driver.js";
import { LocalWorkspace } from "./workspace.js";
import { ConflictError, fromZodError } from "../../errors.js";
import { WorkspaceOptionsSchema } from "../../workspace/workspace.js";
import { ManagerOptionsSchema, WorkspaceManager, type ManagedIdentity, type ManagerOptions, type WorkspaceClaim } from "../../manager/manager.js";

export const LocalWorkspaceManagerOptionsSchema = ManagerOptionsSchema.extend({
  /** Host folder holding one folder per workspace id: `<basedir>/<workspaceId>`. Default ~/.agent-workspaces/local. */
  basedir: z.string().min(1).optional(),
  ...WorkspaceOptionsSchema.pick({ defaultMcps: true, skillPaths: true, maxLiveStatefulMcps: true, instructions: true, egress: true }).shape,
});
export type LocalWorkspaceManagerOptions = z.input<typeof LocalWorkspaceManagerOptionsSchema> & Pick<ManagerOptions, "logger" | "onEvent">;

/**
 * Workspaces in host folders, one per workspace id (never one per agent: two users or two
 * sessions never share a folder). Folders carry the LocalDriver's metadata (owner, managed-by),
 * so a restarted manager reattaches and still refuses another user's id. Eviction closes (a folder
 * has nothing to pause) and happens lazily, on requests.
 */
export class LocalWorkspaceManager extends WorkspaceManager<LocalWorkspace> {
  readonly basedir: string;
  readonly #outcomes = new WeakMap<LocalWorkspace, EnsureOutcome>();
  readonly #drivers = new WeakMap<LocalWorkspace, LocalDriver>();

  constructor(options: LocalWorkspaceManagerOptions = {}) {
    const { logger, onEvent, ...rest } = options;
    const parsed = LocalWorkspaceManagerOptionsSchema.safeParse(rest);
    if (!parsed.success) throw fromZodError("options", parsed.error);
    const { basedir, defaultMcps, skillPaths, maxLiveStatefulMcps, instructions, egress, ...managerOptions } = parsed.data;
    const root = path.resolve(basedir ?? defaultLocalBasedir());
    const defaultDriver = new LocalDriver({ kind: "local", basedir: root });
    super({
      ...managerOptions,
      ...(logger ? { logger } : {}),
      ...(onEvent ? { onEvent } : {}),
      profile: { kind: "local", eviction: "close", sweep: "lazy" },
      factory: async (identity) => {
        const driver = identity.declared ? driverForDeclared(identity) : defaultDriver;
        const { description, outcome } = await ensureBackend(driver, identity, { expectExisting: Boolean(identity.declared), logger: this.logger });
        if (description.userId !== undefined && identity.userId !== undefined && description.userId !== identity.userId)
          throw new ConflictError(`workspace '${identity.workspaceId}' belongs to another user; workspace ids are never shared between users`, {
            field: "userId",
            details: { workspaceId: identity.workspaceId },
          });
        const declared = identity.declared;
        const ws = new LocalWorkspace({
          workspaceId: identity.workspaceId,
          workdir: driver.folderFor(identity.workspaceId),
          defaultMcps: declared?.defaultMcps ?? defaultMcps,
          skillPaths: declared?.skillPaths ?? skillPaths,
          maxLiveStatefulMcps,
          instructions,
          ...(egress ? { egress } : {}),
          logger: this.logger,
        });
        this.#outcomes.set(ws, outcome);
        this.#drivers.set(ws, driver);
        return ws;
      },
    });
    this.basedir = root;
  }

  /** The host folder of a workspace id served by this manager. */
  folderFor(workspaceId: string): string {
    const declared = this.declared(workspaceId);
    return declared ? driverForDeclared({ workspaceId, declared }).folderFor(workspaceId) : path.join(this.basedir, workspaceId);
  }

  protected override outcomeOf(ws: LocalWorkspace, identity: ManagedIdentity): EnsureOutcome {
    return this.#outcomes.get(ws) ?? super.outcomeOf(ws, identity);
  }

  /** A claimed warm folder records its owner beside the folder, before the hand-off. */
  protected override async claimPooled(ws: LocalWorkspace, owner: WorkspaceClaim): Promise<void> {
    const driver = this.#drivers.get(ws);
    if (!driver) throw new ConflictError(`workspace '${ws.workspaceId}' was not built by this manager`);
    await driver.claimOwner(ws.workspaceId, owner);
  }

  /** A warm folder nobody claimed was never handed out: remove it with its files. */
  protected override async disposePooled(ws: LocalWorkspace): Promise<void> {
    await ws.close();
    await this.#drivers.get(ws)?.destroy(ws.workspaceId, { deleteData: true }, { logger: this.logger });
  }
}

/** A declared workspace lives where the stack put it: its described host path, else its spec. */
function driverForDeclared(identity: Pick<ManagedIdentity, "workspaceId" | "declared">): LocalDriver {
  const entry = identity.declared!;
  const hostPath = entry.location.hostPath;
  if (hostPath) return new LocalDriver({ kind: "local", path: hostPath });
  if (entry.backend.kind !== "local") throw new ConflictError(`workspace '${identity.workspaceId}' is declared on backend '${entry.backend.kind}', not local`);
  return new LocalDriver(entry.backend);
}
