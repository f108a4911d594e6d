import { ConflictError, fromZodError, isWorkspaceError, UnavailableError } from "../errors.js";
import type { Logger } from "../logger.js";
import { EgressGuard, type EgressPolicy } from "../util/egress.js";
import { toWorkspacePath } from "../paths.js";
import type { Sandbox } from "../sandbox.js";
import { McpHandle, type McpClientHandle, type McpClientOptions } from "./mcp-client.js";
import { MAX_MCP_FILE_BYTES, MCP_FILE, parseMcpFile, serializeMcpFile, unreadableMcpFileMessage } from "./mcp-file.js";
import { McpServerSpecSchema, isStateful, type McpServerSpec } from "./mcp-spec.js";
import { readCapped } from "./capped-read.js";

export type { McpClientHandle, McpTool, McpToolResult } from "./mcp-client.js";

export interface McpRegistryOptions {
  defaultMcps: McpServerSpec[];
  /** Cap on live stateful clients across all scopes; default max(40, 2 × stateful defaults). */
  maxLiveStateful?: number | undefined;
  logger: Logger;
  /** Wraps every MCP tool listing and call, so the workspace counts it as an operation in flight. */
  track: <T>(fn: () => Promise<T>) => Promise<T>;
  /** Bound on starting a server and its `initialize` answer. Default 30 s. */
  connectTimeoutMs?: number;
  /** Per-call bound when a spec has no `executionTimeout`. Default 600 s. */
  defaultCallTimeoutMs?: number;
  /** Grace period for a stdio server to exit after stdin closes. Default 2 s. */
  closeGraceMs?: number;
  /** Where HTTP MCP servers may be (the agent writes `.mcp`). Default: public addresses only. */
  egress?: EgressPolicy | undefined;
}

export interface McpScope {
  agentId?: string | undefined;
  sessionId?: string | undefined;
}

interface Declared {
  agentId: string;
  sessionId: string;
  specs: McpServerSpec[];
}

/**
 * MCP declarations and live clients per (agent, session) scope, as the reference: a scope that
 * never diverged inherits fresh copies of the defaults; its first add/remove materialises and
 * persists the effective list (`[]` included). Live clients are private to their scope and capped
 * across scopes with least-recently-listed eviction. Every mutation runs under one lock.
 */
export class McpRegistry {
  readonly #sandbox: Sandbox;
  readonly #defaults: McpServerSpec[];
  readonly #cap: number;
  readonly #logger: Logger;
  readonly #clientOptions: McpClientOptions;
  /** Persisted layer, in first-divergence order (the `.mcp` key order). */
  readonly #declared = new Map<string, Declared>();
  readonly #live = new Map<string, Map<string, McpHandle>>();
  readonly #lastUsed = new Map<string, number>();
  /** Why `.mcp` could not be read completely; while set, nothing rewrites it. */
  #unreadable: string | undefined;
  #clock = 0;
  #queue: Promise<unknown> = Promise.resolve();
  #connects = 0;

  constructor(sandbox: Sandbox, options: McpRegistryOptions) {
    this.#sandbox = sandbox;
    this.#defaults = options.defaultMcps.map((s) => McpServerSpecSchema.parse(s));
    const statefulDefaults = this.#defaults.filter(isStateful).length;
    this.#cap = options.maxLiveStateful ?? Math.max(40, 2 * statefulDefaults);
    this.#logger = options.logger;
    this.#clientOptions = {
      connectTimeoutMs: options.connectTimeoutMs ?? 30_000,
      defaultCallTimeoutMs: options.defaultCallTimeoutMs ?? 600_000,
      closeGraceMs: options.closeGraceMs ?? 2000,
      track: options.track,
      egress: new EgressGuard(options.egress),
    };
  }

  get maxLiveStateful(): number {
    return this.#cap;
  }
  /** Stateful clients started so far (eviction makes restarts visible here). */
  get connects(): number {
    return this.#connects;
  }

  /**
   * Reads `.mcp` once. Never throws for a bad file: every scope then uses the defaults, and the
   * file, which could not be read, is never rewritten: writes are refused until it is repaired.
   */
  async restore(): Promise<void> {
    return this.#locked(() => this.#load());
  }

  /** Live clients of the scope in declaration order, started lazily; failing servers are skipped with a warning. */
  async list(scope: McpScope = {}): Promise<McpClientHandle[]> {
    return this.#locked(async () => {
      const { agentId, sessionId, key } = normScope(scope);
      this.#lastUsed.set(key, ++this.#clock);
      const specs = this.#effective(key);
      for (const spec of specs)
        try {
          await this.#ensure(spec, key);
        } catch (e) {
          this.#logger.warn(`Failed to start MCP '${spec.name}' for agent='${agentId}' session='${sessionId}', skipping`, {
            error: e instanceof Error ? e.message : String(e),
          });
        }
      const live = this.#liveMap(key);
      return specs.map((s) => live.get(s.name)).filter((h): h is McpHandle => h !== undefined);
    });
  }

  /** The names the scope declares, in declaration order; nothing is started. Not queued behind a slow start. */
  async names(scope: McpScope = {}): Promise<string[]> {
    return this.#effective(normScope(scope).key).map((s) => s.name);
  }

  /**
   * The scope's live client of one server, started if needed (that server only); undefined when
   * the scope declares no such server. A failed start propagates (its message carries no secret of the spec).
   */
  async get(name: string, scope: McpScope = {}): Promise<McpClientHandle | undefined> {
    const { key } = normScope(scope);
    // A running client is handed out at once: only starting one waits for the lock (and so behind another server's start).
    const running = this.#live.get(key)?.get(name);
    if (running && !running.closed && this.#effective(key).some((s) => s.name === name)) {
      this.#lastUsed.set(key, ++this.#clock);
      return running;
    }
    return this.#locked(async () => {
      const spec = this.#effective(key).find((s) => s.name === name);
      if (!spec) return undefined;
      this.#lastUsed.set(key, ++this.#clock);
      return this.#ensure(spec, key);
    });
  }

  /** Declares and starts a server in the scope; start failures propagate and nothing is recorded. */
  async add(specInput: unknown, scope: McpScope = {}): Promise<void> {
    const parsed = McpServerSpecSchema.safeParse(specInput);
    if (!parsed.success) throw fromZodError("spec", parsed.error);
    const spec = parsed.data;
    if (spec.transport.type === "stdio" && spec.transport.cwd !== undefined) toWorkspacePath(this.#sandbox.workdir, spec.transport.cwd, "spec.transport.cwd");
    return this.#locked(async () => {
      await this.#ensureWritable();
      const { agentId, sessionId, key } = normScope(scope);
      const specs = this.#effective(key);
      if (specs.some((s) => s.name === spec.name))
        throw new ConflictError(`MCP '${spec.name}' already exists for agent='${agentId}' session='${sessionId}'; remove it first to replace it`, {
          field: "spec.name",
        });
      const live = this.#liveMap(key);
      const stale = live.get(spec.name);
      if (stale) {
        live.delete(spec.name);
        await stale.close();
      }
      const handle = await this.#start(spec, key);
      try {
        await this.#commit(key, agentId, sessionId, [...specs, spec]);
      } catch (e) {
        await handle.close();
        throw e;
      }
      live.set(spec.name, handle);
    });
  }

  /** Removes a declaration and closes its client; an unknown name only warns. */
  async remove(name: string, scope: McpScope = {}): Promise<void> {
    return this.#locked(async () => {
      await this.#ensureWritable();
      const { agentId, sessionId, key } = normScope(scope);
      const specs = this.#effective(key);
      if (!specs.some((s) => s.name === name)) {
        this.#logger.warn(`MCP '${name}' not found for agent='${agentId}' session='${sessionId}'; nothing removed`);
        return;
      }
      await this.#commit(
        key,
        agentId,
        sessionId,
        specs.filter((s) => s.name !== name),
      );
      const live = this.#live.get(key);
      const handle = live?.get(name);
      if (handle) {
        live!.delete(name);
        await this.#closeQuietly(handle);
      }
    });
  }

  /** Forgets a scope: closes its clients and drops its declaration (defaults apply again). Best effort. */
  async purge(scope: McpScope): Promise<void> {
    return this.#locked(async () => {
      const { key } = normScope(scope);
      await this.#closeScope(key);
      this.#lastUsed.delete(key);
      if (this.#declared.delete(key)) {
        if (this.#unreadable !== undefined) {
          this.#logger.warn(`${MCP_FILE} was not rewritten after purging a scope: ${unreadableMcpFileMessage(this.#unreadable)}`, { file: MCP_FILE });
          return;
        }
        try {
          await this.#persist();
        } catch (e) {
          this.#logger.warn(`could not rewrite ${MCP_FILE} after purging a scope`, { error: String(e) });
        }
      }
    });
  }

  /** Closes every client and deletes `.mcp`: every scope reverts to the defaults. */
  async reset(): Promise<void> {
    return this.#locked(async () => {
      await this.#closeEverything();
      this.#declared.clear();
      await this.#sandbox.remove(MCP_FILE);
      this.#unreadable = undefined;
    });
  }

  /** Closes every live client; declarations survive and clients restart on the next list. */
  async closeAll(): Promise<void> {
    return this.#locked(() => this.#closeEverything());
  }

  // internals (call only under the lock)

  async #load(): Promise<void> {
    this.#declared.clear();
    this.#unreadable = undefined;
    if (!this.#sandbox.persistent) return;
    let text: string;
    try {
      const st = await this.#sandbox.stat(MCP_FILE);
      if (!st) return;
      text = (await readCapped(this.#sandbox, MCP_FILE, MAX_MCP_FILE_BYTES)).toString("utf8");
    } catch (e) {
      if (isWorkspaceError(e, "not_found")) return;
      this.#unreadable = isWorkspaceError(e, "too_large") ? `it is over the ${MAX_MCP_FILE_BYTES}-byte limit` : `reading it failed: ${String(e)}`;
      this.#logger.warn(`could not read ${MCP_FILE}; using default MCPs for every scope, and refusing to rewrite it until it is repaired or deleted`, {
        file: MCP_FILE,
        error: String(e),
      });
      return;
    }
    const parsed = parseMcpFile(text);
    for (const w of parsed.warnings) this.#logger.warn(w, { file: MCP_FILE });
    this.#unreadable = parsed.unreadable;
    for (const s of parsed.scopes) this.#declared.set(scopeKey(s.agentId, s.sessionId), s);
  }

  /** Before any write: a file that could not be read is read again (it may have been repaired), else the write is refused. */
  async #ensureWritable(): Promise<void> {
    if (this.#unreadable === undefined) return;
    await this.#load();
    if (this.#unreadable !== undefined) throw new ConflictError(unreadableMcpFileMessage(this.#unreadable), { field: MCP_FILE });
  }

  #effective(key: string): McpServerSpec[] {
    const declared = this.#declared.get(key);
    return (declared ? declared.specs : this.#defaults).map((s) => structuredClone(s));
  }

  #liveMap(key: string): Map<string, McpHandle> {
    let live = this.#live.get(key);
    if (!live) this.#live.set(key, (live = new Map()));
    return live;
  }

  /** The scope's live client of a declared server: the running one, else a new one (a closed one is replaced). */
  async #ensure(spec: McpServerSpec, key: string): Promise<McpHandle> {
    const live = this.#liveMap(key);
    const existing = live.get(spec.name);
    if (existing && !existing.closed) return existing;
    if (existing) {
      live.delete(spec.name);
      await existing.close();
    }
    const handle = await this.#start(spec, key);
    live.set(spec.name, handle);
    return handle;
  }

  async #start(spec: McpServerSpec, key: string): Promise<McpHandle> {
    if (isStateful(spec)) {
      await this.#makeRoom(key);
      this.#connects++;
    }
    return McpHandle.open(this.#sandbox, spec, this.#clientOptions);
  }

  /** Evicts the first stateful client of the least recently listed other scope until under the cap. */
  async #makeRoom(requester: string): Promise<void> {
    for (;;) {
      let count = 0;
      let victim: { key: string; used: number } | undefined;
      for (const [key, live] of this.#live) {
        const stateful = [...live.values()].filter((h) => h.stateful && !h.closed).length;
        count += stateful;
        if (key === requester || stateful === 0) continue;
        const used = this.#lastUsed.get(key) ?? 0;
        if (!victim || used < victim.used) victim = { key, used };
      }
      if (count < this.#cap) return;
      if (!victim) {
        this.#logger.warn(`live stateful MCP cap (${this.#cap}) exceeded by one scope; raise maxLiveStatefulMcps if this is expected`);
        return;
      }
      const live = this.#live.get(victim.key)!;
      const [name, handle] = [...live.entries()].find(([, h]) => h.stateful && !h.closed)!;
      live.delete(name);
      this.#logger.debug(`evicting MCP '${name}' to stay under the live cap`, { cap: this.#cap });
      await this.#closeQuietly(handle);
    }
  }

  /** Sets the scope's declaration and persists it; restores the previous state if the write fails. */
  async #commit(key: string, agentId: string, sessionId: string, specs: McpServerSpec[]): Promise<void> {
    const previous = this.#declared.get(key);
    this.#declared.set(key, { agentId, sessionId, specs });
    try {
      await this.#persist();
    } catch (e) {
      if (previous) this.#declared.set(key, previous);
      else this.#declared.delete(key);
      throw isWorkspaceError(e) ? e : new UnavailableError(`could not write ${MCP_FILE}: ${String(e)}; nothing was changed`, { cause: e });
    }
  }

  async #persist(): Promise<void> {
    if (!this.#sandbox.persistent) return;
    await this.#sandbox.writeFile(MCP_FILE, serializeMcpFile([...this.#declared.values()]));
  }

  async #closeScope(key: string): Promise<void> {
    const live = this.#live.get(key);
    this.#live.delete(key);
    if (live) await Promise.all([...live.values()].map((h) => this.#closeQuietly(h)));
  }

  async #closeEverything(): Promise<void> {
    const keys = [...this.#live.keys()];
    await Promise.all(keys.map((k) => this.#closeScope(k)));
    this.#lastUsed.clear();
    // Idle keep-alive connections to HTTP servers go too (the guard opens new ones on the next use).
    this.#clientOptions.egress.close();
  }

  async #closeQuietly(handle: McpHandle): Promise<void> {
    try {
      await handle.close();
    } catch (e) {
      this.#logger.warn(`closing MCP '${handle.name}' failed`, { error: String(e) });
    }
  }

  #locked<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => undefined);
    return run;
  }
}

function normScope(scope: McpScope): { agentId: string; sessionId: string; key: string } {
  const agentId = scope.agentId ?? "";
  const sessionId = scope.sessionId ?? "";
  return { agentId, sessionId, key: scopeKey(agentId, sessionId) };
}

function scopeKey(agentId: string, sessionId: string): string {
  return JSON.stringify([agentId, sessionId]);
}
