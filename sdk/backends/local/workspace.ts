import path from "node:path";
import { z } from "zod";
import { fromZodError } from "../../errors.js";
import type { Logger } from "../../logger.js";
import { expandHome } from "../../paths.js";
import type { Sandbox } from "../../sandbox.js";
import { renderInstructions } from "../../workspace/instructions.js";
import { Workspace, WorkspaceOptionsSchema } from "../../workspace/workspace.js";
import { LocalSandbox } from "../../kit/host-sandbox.js";

export const LocalWorkspaceOptionsSchema = WorkspaceOptionsSchema.extend({
  /** Host folder that is the workspace root; created on initialize. `~` is expanded. */
  workdir: z.string().min(1, "workdir must be a host folder path"),
});
export type LocalWorkspaceOptions = z.input<typeof LocalWorkspaceOptionsSchema> & { logger?: Logger };

/**
 * A workspace in a host folder. No isolation: commands run on the host with the folder as their
 * working directory; file operations are confined to the folder.
 */
export class LocalWorkspace extends Workspace {
  protected readonly backendLabel = "local";
  readonly #workdir: string;

  constructor(options: LocalWorkspaceOptions) {
    const { workdir, logger, base } = parse(options);
    super({ ...base, logger });
    this.#workdir = path.resolve(expandHome(workdir));
    // A bad template should fail here, not in the middle of building a prompt.
    renderInstructions(this.options.instructions, { backend: "local", workdir: this.#workdir });
  }

  get workdir(): string {
    return this.#workdir;
  }

  protected async provision(): Promise<Sandbox> {
    return new LocalSandbox(this.#workdir);
  }
}

function parse(options: LocalWorkspaceOptions): { workdir: string; logger: Logger | undefined; base: z.input<typeof WorkspaceOptionsSchema> } {
  const { logger, ...rest } = options ?? ({} as LocalWorkspaceOptions);
  const parsed = LocalWorkspaceOptionsSchema.safeParse(rest);
  if (!parsed.success) throw fromZodError("options", parsed.error);
  const { workdir, ...base } = parsed.data;
  return { workdir, logger, base };
}

