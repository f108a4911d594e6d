import { randomUUID } from "node:crypto";
import path from "node:path";
import { z } from "zod";
import { WorkspaceError, fromZodError, ClosedError } from "../errors.js";
import { silentLogger, type Logger } from "../logger.js";
import { expandHome } from "../paths.js";
import type { Sandbox } from "../sandbox.js";
import { EgressPolicySchema } from "../util/egress.js";
import { McpServerSpecSchema, type McpServerSpec } from "./mcp-spec.js";
import { McpRegistry, type McpClientHandle } from "./mcp.js";
import { SkillStore, type Skill, type SkillArchiveOptions } from "./skills.js";
import { partitionName } from "./skill-index.js";
import { Offloader, type DataBlock, type Message, type ToolResult } from "./offload.js";
import { createBuiltinTools, type WorkspaceTool } from "./tools/index.js";
import { renderInstructions } from "./instructions.js";
import { TrackedSandbox } from "./tracked-sandbox.js";

export const WorkspaceOptionsSchema = z.strictObject({
  /** Empty or missing: a fresh uuid4 hex id, as the reference. */
  workspaceId: z.string().optional(),
  defaultMcps: z.array(McpServerSpecSchema).optional(),
  skillPaths: z.array(z.string().min(1)).optional(),
  maxLiveStatefulMcps: z.number().int().positive().optional(),
  /** Instruction template; `{workdir}` and `{backend}` are substituted. */
  instructions: z.string().optional(),
  /**
   * Where the host may connect for this workspace's HTTP MCP servers (declared by the caller or
   * written into `.mcp` by the agent). Default: public addresses only; loopback, private,
   * link-local and cloud metadata addresses need an `allow` entry.
   */
  egress: EgressPolicySchema.optional(),
});
export type WorkspaceOptions = z.input<typeof WorkspaceOptionsSchema> & { logger?: Logger };

/** How close() treats the backend object; the manager sets these for replicas sharing one. */
export interface WorkspaceCloseOptions {
  /** Release client-side resources only and leave the backend object as it is (another replica may be using it). */
  keepBackend?: boolean;
}

export interface Scope {
  agentId?: string | undefined;
  sessionId?: string | undefined;
}

/**
 * A workspace written once over the Sandbox interface. Subclasses only say how to get a
 * Sandbox (`provision`) and what to do with it on close (`teardown`).
 */
export abstract class Workspace implements AsyncDisposable {
  readonly workspaceId: string;
  protected readonly logger: Logger;
  protected readonly options: z.output<typeof WorkspaceOptionsSchema>;
  /** Human name of the backend used in instructions, e.g. "local", "Docker-based". */
  protected abstract readonly backendLabel: string;

  #sandbox: Sandbox | undefined;
  /** The handle getBackend() gives out: the same sandbox, every operation through it tracked. */
  #handle: TrackedSandbox | undefined;
  #alive = false;
  #initializing: Promise<void> | undefined;
  #inFlight = 0;
  #lastActivity = Date.now();
  #skills: SkillStore | undefined;
  /** Set by the first successful initialize(); tells "never initialized" from "closed". */
  #everAlive = false;
  #mcp: McpRegistry | undefined;
  #offloader: Offloader | undefined;

  constructor(options: WorkspaceOptions = {}) {
    const { logger, ...rest } = options;
    const parsed = WorkspaceOptionsSchema.safeParse(rest);
    if (!parsed.success) throw fromZodError("options", parsed.error);
    this.options = parsed.data;
    this.workspaceId = parsed.data.workspaceId || randomUUID().replace(/-/g, "");
    this.logger = logger ?? silentLogger;
  }

  /** Binds the backend: create, reattach or resume, and return the sandbox handle. */
  protected abstract provision(): Promise<Sandbox>;
  /** Called on close after MCP clients are closed. Default: release the handle. */
  protected async teardown(sandbox: Sandbox, _options: WorkspaceCloseOptions = {}): Promise<void> {
    await sandbox.close?.();
  }

  get isAlive(): boolean {
    return this.#alive;
  }
  /** The workspace root as the agent sees it. */
  abstract get workdir(): string;
  get defaultMcps(): McpServerSpec[] {
    return this.options.defaultMcps ?? [];
  }
  /** Host paths as the reference normalises them: `~` expanded, made absolute. */
  get skillPaths(): string[] {
    return (this.options.skillPaths ?? []).map((p) => path.resolve(expandHome(p)));
  }

  /** Operations currently running (the manager never evicts a busy workspace). */
  get inFlight(): number {
    return this.#inFlight;
  }
  /** Epoch ms of the last operation start or end. */
  get lastActivityAt(): number {
    return this.#lastActivity;
  }
  /** Marks activity without an operation (e.g. a manager hand-off). */
  touch(): void {
    this.#lastActivity = Date.now();
  }

  /** Every public operation runs through here: counts as activity and keeps the workspace busy. */
  protected async track<T>(fn: () => Promise<T>): Promise<T> {
    const end = this.#begin();
    try {
      return await fn();
    } finally {
      end();
    }
  }

  /** One operation starts: busy until the returned end (idempotent) runs. */
  #begin(): () => void {
    this.#inFlight++;
    this.#lastActivity = Date.now();
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.#inFlight--;
      this.#lastActivity = Date.now();
    };
  }

  /** An operation through the handle: refused once closed (the backend may be paused or released). */
  #beginOnHandle(): () => void {
    if (!this.#alive) throw this.#closedError();
    return this.#begin();
  }

  #closedError(): WorkspaceError {
    return new ClosedError(
      `${this.constructor.name} '${this.workspaceId}' is closed (its backend may be paused or released, e.g. by an idle eviction); call initialize() to resume it, or ask the manager again (getWorkspace), then getBackend()`,
    );
  }

  async initialize(): Promise<void> {
    if (this.#alive) return;
    // Concurrent initialize() calls share one provisioning.
    this.#initializing ??= this.#doInitialize().finally(() => {
      this.#initializing = undefined;
    });
    return this.#initializing;
  }

  async #doInitialize(): Promise<void> {
    const sandbox = await this.provision();
    try {
      this.#sandbox = sandbox;
      this.#handle = undefined;
      this.#skills = new SkillStore(sandbox, this.logger);
      this.#offloader = new Offloader(sandbox, this.logger);
      this.#mcp = new McpRegistry(sandbox, {
        defaultMcps: this.defaultMcps,
        maxLiveStateful: this.options.maxLiveStatefulMcps,
        egress: this.options.egress,
        logger: this.logger,
        track: (fn) => this.track(fn),
      });
      await this.#mcp.restore();
      await this.#skills.initialize(this.skillPaths);
      this.#alive = true;
      this.#everAlive = true;
    } catch (e) {
      this.#sandbox = undefined;
      await this.teardown(sandbox).catch((err: unknown) => this.logger.warn("teardown after failed initialize failed", { error: String(err) }));
      throw e;
    }
  }

  /** Idempotent. Closes live MCP clients, then lets the backend tear down (pause, release). */
  async close(options: WorkspaceCloseOptions = {}): Promise<void> {
    if (this.#initializing) await this.#initializing.catch(() => undefined);
    if (!this.#alive) return;
    this.#alive = false;
    const sandbox = this.#sandbox;
    // Commands and processes started through the handle end before the backend is paused or released: a paused container would freeze them.
    if (this.#handle?.running) await this.#handle.stop();
    try {
      await this.#mcp?.closeAll();
    } catch (e) {
      this.logger.warn("closing MCP clients failed", { error: String(e) });
    }
    if (sandbox) await this.teardown(sandbox, options);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /**
   * The live sandbox, as a handle whose every operation counts as activity (a spawned process while
   * it lives); throws `closed` when the workspace is not initialized. Operations through a handle
   * kept past close() fail with `closed`; commands still running at close() are ended.
   */
  getBackend(): Sandbox {
    const sandbox = this.#raw();
    // Built on first use: most workspaces never hand out their handle.
    this.#handle ??= new TrackedSandbox(sandbox, { begin: () => this.#beginOnHandle() });
    return this.#handle.handle;
  }

  /** The sandbox itself, for the workspace's own (already tracked) operations. */
  #raw(): Sandbox {
    if (!this.#sandbox || !this.#alive) throw new ClosedError(`${this.constructor.name} '${this.workspaceId}' is not initialized; call initialize() first`);
    return this.#sandbox;
  }

  #parts(): { skills: SkillStore; mcp: McpRegistry; offloader: Offloader } {
    this.#raw();
    return { skills: this.#skills!, mcp: this.#mcp!, offloader: this.#offloader! };
  }

  /** Deletes `.mcp`, skills/, sessions/ and data/; MCP clients are closed. Seeds are not re-applied. */
  async reset(): Promise<void> {
    return this.track(async () => {
      const { skills, mcp } = this.#parts();
      await mcp.reset();
      await skills.reset();
      const sandbox = this.#raw();
      await Promise.all(["sessions", "data"].map((p) => sandbox.remove(p)));
    });
  }

  getInstructions(): string {
    return renderInstructions(this.options.instructions, { backend: this.backendLabel, workdir: this.workdir });
  }

  /** Built-in shell, read, write, edit, glob and grep tools bound to this workspace. */
  listTools(): WorkspaceTool[] {
    const sandbox = this.#raw();
    return createBuiltinTools(sandbox, { track: (fn) => this.track(fn) });
  }

  // MCP
  listMcps(scope: Scope = {}): Promise<McpClientHandle[]> {
    return this.track(() => this.#parts().mcp.list(scope));
  }
  /** The names of the MCP servers the scope declares, without starting any. */
  listMcpNames(scope: Scope = {}): Promise<string[]> {
    return this.track(() => this.#parts().mcp.names(scope));
  }
  /** One declared server's live client, started if needed (no other server is); undefined when not declared. */
  getMcp(name: string, scope: Scope = {}): Promise<McpClientHandle | undefined> {
    return this.track(() => this.#parts().mcp.get(name, scope));
  }
  addMcp(spec: z.input<typeof McpServerSpecSchema>, scope: Scope = {}): Promise<void> {
    return this.track(() => this.#parts().mcp.add(spec, scope));
  }
  removeMcp(name: string, scope: Scope = {}): Promise<void> {
    return this.track(() => this.#parts().mcp.remove(name, scope));
  }
  /** Forgets one session: its MCP scope and sessions/<id>/. */
  purgeSession(scope: { agentId?: string; sessionId: string }): Promise<void> {
    return this.track(async () => {
      const { mcp, offloader } = this.#parts();
      await mcp.purge(scope);
      await offloader.purgeSession(scope.sessionId);
    });
  }
  /** Deletes the agent's skill partition. */
  purgeAgent(scope: { agentId: string }): Promise<void> {
    return this.track(() => this.#parts().skills.purgeAgent(scope.agentId));
  }

  // Skills
  listSkills(scope: { agentId?: string } = {}): Promise<Skill[]> {
    // As the reference: a workspace never initialized has no skills yet (after close() this is 'closed').
    if (!this.#everAlive)
      return this.track(async () => {
        partitionName(scope.agentId);
        return [];
      });
    return this.track(() => this.#parts().skills.list(scope.agentId));
  }
  addSkill(skillPath: string, scope: { agentId?: string } = {}): Promise<Skill | undefined> {
    return this.track(() => this.#parts().skills.add(skillPath, scope.agentId));
  }
  addSkillArchive(data: Uint8Array | AsyncIterable<Uint8Array>, options: SkillArchiveOptions & { agentId?: string }): Promise<Skill | undefined> {
    return this.track(() => this.#parts().skills.addArchive(data, options));
  }
  removeSkill(name: string, scope: { agentId?: string } = {}): Promise<boolean> {
    return this.track(() => this.#parts().skills.remove(name, scope.agentId));
  }

  // Offload
  offloadContext(sessionId: string, messages: Message[]): Promise<string> {
    return this.track(() => this.#parts().offloader.offloadContext(sessionId, messages));
  }
  offloadToolResult(sessionId: string, result: ToolResult): Promise<string> {
    return this.track(() => this.#parts().offloader.offloadToolResult(sessionId, result));
  }
  offloadData(block: DataBlock): Promise<DataBlock> {
    return this.track(() => this.#parts().offloader.offloadData(block));
  }
}
