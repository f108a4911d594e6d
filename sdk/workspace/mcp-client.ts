import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { TimeoutError, WorkspaceError, errorForCode, McpError as WorkspaceMcpError, ClosedError } from "../errors.js";
import type { EgressGuard } from "../util/egress.js";
import { toWorkspacePath } from "../paths.js";
import type { Sandbox } from "../sandbox.js";
import { isStateful, type McpServerSpec } from "./mcp-spec.js";
import { SandboxProcessTransport } from "./mcp-transport.js";
import { maskSecrets, urlSecrets } from "../util/mask.js";

/** One MCP tool as models see it: `mcp__<server>__<tool>`. */
export interface McpTool {
  name: string;
  mcpName: string;
  toolName: string;
  description: string;
  /** JSON Schema of the arguments (defaults: type object, no properties, nothing required). */
  inputSchema: Record<string, unknown>;
  readOnly: boolean;
  call(args?: Record<string, unknown>): Promise<McpToolResult>;
}

export interface McpToolResult {
  /** False when the server flagged the result as an error (`isError`). */
  ok: boolean;
  /** Text blocks joined by newlines; other blocks are summarised, e.g. `[image image/png]`. */
  output: string;
  /** The raw MCP content blocks. */
  content: unknown[];
  structuredContent?: Record<string, unknown>;
}

/** A live MCP client private to one (agent, session) scope. */
export interface McpClientHandle {
  readonly name: string;
  /** A copy of the declaration. */
  readonly spec: McpServerSpec;
  readonly stateful: boolean;
  /** True once closed, evicted, or (stateful) after its server process exited. */
  readonly closed: boolean;
  listTools(): Promise<McpTool[]>;
  /** Calls a tool by its server-side name (hidden tools included: filters only affect listing). */
  callTool(toolName: string, args?: Record<string, unknown>): Promise<McpToolResult>;
  close(): Promise<void>;
}

export interface McpClientOptions {
  /** Bound on spawning + `initialize` (stdio; HTTP uses its `timeout` when set). */
  connectTimeoutMs: number;
  /** Per-call bound when the spec has no `executionTimeout`. */
  defaultCallTimeoutMs: number;
  /** How long a stdio server gets to exit after stdin closes before it is killed. */
  closeGraceMs: number;
  /** Runs every MCP listing and call as workspace activity: counted in flight, so never evicted mid-call. */
  track: <T>(fn: () => Promise<T>) => Promise<T>;
  /** Every HTTP request (redirects included) goes through its fetch: checked, and pinned to the checked address. */
  egress: EgressGuard;
}

const CLIENT_INFO = { name: "agent-workspaces", version: "0.1.0" };

/** One MCP session: a connected SDK Client plus what is needed to explain its failures. */
class Connection {
  constructor(
    readonly client: Client,
    readonly transport: Transport,
    private readonly spec: McpServerSpec,
  ) {}

  get alive(): boolean {
    return !(this.transport instanceof SandboxProcessTransport) || !this.transport.closed;
  }

  /** "exited with code 1; stderr: …" for a dead stdio server, "" otherwise. */
  exitInfo(): string {
    const t = this.transport;
    if (!(t instanceof SandboxProcessTransport) || !t.closed) return "";
    const code = t.exitCode === undefined ? "" : t.exitCode === null ? " (killed by a signal)" : ` with code ${t.exitCode}`;
    // Mask first, then cut: cutting first could leave a secret's tail in the excerpt. Where the
    // transport's own buffer already cut the stream, a partial secret may open it: drop that much.
    let tail = redact(t.stderrTail, this.spec);
    if (t.stderrTruncated) tail = tail.slice(longestSecret(this.spec));
    tail = tail.trim().slice(-STDERR_EXCERPT_CHARS);
    return `server process exited${code}${tail ? `; stderr: ${tail}` : ""}`;
  }

  /** `force` skips the stdio grace period (the server is misbehaving anyway). */
  async close(force = false): Promise<void> {
    if (force && this.transport instanceof SandboxProcessTransport) await this.transport.terminate();
    if (this.transport instanceof StreamableHTTPClientTransport && this.transport.sessionId) await this.transport.terminateSession().catch(() => undefined);
    await this.client.close().catch(() => undefined);
  }
}

async function openConnection(sandbox: Sandbox, spec: McpServerSpec, options: McpClientOptions): Promise<Connection> {
  const t = spec.transport;
  let transport: Transport;
  let timeoutMs = options.connectTimeoutMs;
  if (t.type === "stdio") {
    const cwd = toWorkspacePath(sandbox.workdir, t.cwd ?? "", "transport.cwd");
    const argv = [t.command, ...(t.args ?? [])];
    transport = new SandboxProcessTransport(() => sandbox.spawn(argv, { cwd, ...(t.env ? { env: t.env } : {}) }), {
      closeGraceMs: options.closeGraceMs,
    });
  } else {
    const { url, headers } = withBasicAuth(t.url, t.headers);
    transport = new StreamableHTTPClientTransport(url, { fetch: options.egress.fetch, ...(headers ? { requestInit: { headers } } : {}) });
    if (t.timeout !== undefined) timeoutMs = t.timeout * 1000;
  }
  const client = new Client(CLIENT_INFO);
  const conn = new Connection(client, transport, spec);
  // Swallow out-of-band transport errors (stray stdout lines, HTTP SSE hiccups): failures that
  // matter surface through the pending request.
  client.onerror = () => undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      client.connect(transport, { timeout: timeoutMs }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new McpError(ErrorCode.RequestTimeout, "connect timed out")), timeoutMs + 1000);
      }),
    ]);
    return conn;
  } catch (e) {
    // Map before closing: closing kills the process, which would hide a timeout behind "exited".
    const error = mapMcpError(e, spec, conn, "initialize", timeoutMs);
    await conn.close(true);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** Maps SDK and transport failures to WorkspaceErrors that say what happened and what to do. */
function mapMcpError(e: unknown, spec: McpServerSpec, conn: Connection | undefined, what: string, timeoutMs: number): WorkspaceError {
  // The egress policy's refusals (and failed lookups) name the host only; say which server too.
  if (e instanceof WorkspaceError && e.details?.host !== undefined)
    return errorForCode(e.code, `MCP server '${spec.name}' failed during ${what}: ${e.message}`, {
      cause: e,
      details: { mcp: spec.name, host: e.details.host },
    });
  if (e instanceof WorkspaceError) return e;
  const exit = conn?.exitInfo() ?? "";
  if (e instanceof McpError && e.code === ErrorCode.RequestTimeout && !exit) {
    const hint =
      what === "initialize"
        ? `check that it speaks MCP on ${spec.transport.type === "stdio" ? "stdout" : "its URL"}`
        : "the call was cancelled; raise executionTimeout if the tool needs longer";
    return new TimeoutError(`MCP server '${spec.name}' did not answer ${what} within ${timeoutMs} ms; ${hint}`, {
      cause: e,
      details: { mcp: spec.name },
    });
  }
  const msg = redact(e instanceof Error ? e.message : String(e), spec);
  const hint = spec.transport.type === "stdio" ? "check the command and its arguments" : "check that the server is reachable";
  return new WorkspaceMcpError(`MCP server '${spec.name}' failed during ${what}: ${exit || msg}; ${hint}`, {
    cause: safeCause(e, spec),
    details: { mcp: spec.name },
  });
}

/** The stderr excerpt an error message quotes (its last characters, after masking). */
const STDERR_EXCERPT_CHARS = 1000;

/** Secrets of a spec: env values, header values, and credentials inside its URL. */
function specSecrets(spec: McpServerSpec): string[] {
  const t = spec.transport;
  if (t.type === "stdio") return Object.values(t.env ?? {});
  return [...Object.values(t.headers ?? {}), ...urlSecrets(t.url)];
}

function longestSecret(spec: McpServerSpec): number {
  return Math.max(0, ...specSecrets(spec).map((s) => s.length));
}

/** Secrets from the spec never reach messages. */
function redact(text: string, spec: McpServerSpec): string {
  return maskSecrets(text, specSecrets(spec), "***");
}

/**
 * The cause chain as given when it carries no secret, else one plain Error with the masked
 * message: callers log causes too (fetch errors quote the URL whole).
 */
function safeCause(e: unknown, spec: McpServerSpec): unknown {
  let text = "";
  for (let c: unknown = e, depth = 0; c !== undefined && c !== null && depth < 8; c = (c as { cause?: unknown }).cause, depth++) {
    const err = c as { message?: unknown; stack?: unknown };
    text += `${String(err.message ?? c)}\n${String(err.stack ?? "")}\n`;
  }
  if (redact(text, spec) === text) return e;
  // eslint-disable-next-line no-restricted-syntax -- a redacted stand-in for a foreign error, kept only as `cause` under its own name
  const masked = new Error(redact(e instanceof Error ? e.message : String(e), spec));
  masked.name = e instanceof Error ? e.name : "Error";
  masked.stack = `${masked.name}: ${masked.message}`;
  return masked;
}

/**
 * fetch refuses URLs with user info, so `https://user:pass@host` becomes the URL without it plus
 * a Basic Authorization header (as Python's httpx does), unless the headers already carry one.
 */
function withBasicAuth(raw: string, headers: Record<string, string> | undefined): { url: URL; headers: Record<string, string> | undefined } {
  const url = new URL(raw);
  if (!url.username && !url.password) return { url, headers };
  const user = decodeURIComponent(url.username);
  const pass = decodeURIComponent(url.password);
  url.username = "";
  url.password = "";
  if (Object.keys(headers ?? {}).some((k) => k.toLowerCase() === "authorization")) return { url, headers };
  return { url, headers: { ...headers, Authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString("base64")}` } };
}

export class McpHandle implements McpClientHandle {
  readonly name: string;
  readonly stateful: boolean;
  readonly #spec: McpServerSpec;
  readonly #sandbox: Sandbox;
  readonly #options: McpClientOptions;
  #conn: Connection | undefined;
  /** Stateless handles open one session per operation; tracked so close() can end them. */
  readonly #transient = new Set<Connection>();
  #closed = false;

  private constructor(sandbox: Sandbox, spec: McpServerSpec, options: McpClientOptions) {
    this.#sandbox = sandbox;
    this.#spec = structuredClone(spec);
    this.name = spec.name;
    this.stateful = isStateful(spec);
    this.#options = options;
  }

  /** Stateful servers are connected now (errors propagate); stateless ones on each use. */
  static async open(sandbox: Sandbox, spec: McpServerSpec, options: McpClientOptions): Promise<McpHandle> {
    const handle = new McpHandle(sandbox, spec, options);
    if (handle.stateful) handle.#conn = await openConnection(sandbox, spec, options);
    return handle;
  }

  get spec(): McpServerSpec {
    return structuredClone(this.#spec);
  }

  get closed(): boolean {
    return this.#closed || (this.#conn !== undefined && !this.#conn.alive);
  }

  async listTools(): Promise<McpTool[]> {
    const raw = await this.#run("tools/list", this.#options.connectTimeoutMs, async (client, timeout) => {
      const tools: Tool[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : {}, { timeout });
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor);
      return tools;
    });
    const { enableTools, disableTools } = this.#spec;
    return raw.filter((t) => (enableTools ? enableTools.includes(t.name) : true) && !(disableTools ?? []).includes(t.name)).map((t) => this.#wrap(t));
  }

  async callTool(toolName: string, args: Record<string, unknown> = {}): Promise<McpToolResult> {
    const timeoutMs = this.#spec.executionTimeout ? Math.ceil(this.#spec.executionTimeout * 1000) : this.#options.defaultCallTimeoutMs;
    const result = await this.#run(`tool call '${toolName}'`, timeoutMs, (client, timeout) =>
      client.callTool({ name: toolName, arguments: args }, undefined, { timeout, maxTotalTimeout: timeout }),
    );
    const content = Array.isArray(result.content) ? (result.content as unknown[]) : [];
    const out: McpToolResult = { ok: result.isError !== true, output: renderContent(content, result), content };
    if (result.structuredContent && typeof result.structuredContent === "object") out.structuredContent = result.structuredContent as Record<string, unknown>;
    return out;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const conns = [...this.#transient, ...(this.#conn ? [this.#conn] : [])];
    this.#transient.clear();
    await Promise.all(conns.map((c) => c.close()));
  }

  async #run<T>(what: string, timeoutMs: number, op: (client: Client, timeout: number) => Promise<T>): Promise<T> {
    if (this.#closed) throw new ClosedError(`MCP '${this.name}' was closed (removed, evicted or workspace closed); list MCPs again to get a live client`);
    return this.#options.track(async () => {
      let conn = this.#conn;
      if (conn && !conn.alive)
        throw new WorkspaceMcpError(`MCP server '${this.name}' is not running (${conn.exitInfo()}); list MCPs again to restart it`, {
          details: { mcp: this.name },
        });
      const transient = !conn;
      if (!conn) {
        conn = await openConnection(this.#sandbox, this.#spec, this.#options);
        this.#transient.add(conn);
        if (this.#closed) {
          await conn.close();
          throw new ClosedError(`MCP '${this.name}' was closed during ${what}`);
        }
      }
      try {
        return await op(conn.client, timeoutMs);
      } catch (e) {
        throw mapMcpError(e, this.#spec, conn, what, timeoutMs);
      } finally {
        if (transient) {
          this.#transient.delete(conn);
          await conn.close();
        }
      }
    });
  }

  #wrap(t: Tool): McpTool {
    const schema: Record<string, unknown> = { ...(t.inputSchema as Record<string, unknown>) };
    schema.type ??= "object";
    schema.properties ??= {};
    schema.required ??= [];
    return {
      name: `mcp__${this.name}__${t.name}`,
      mcpName: this.name,
      toolName: t.name,
      description: t.description ?? "",
      inputSchema: schema,
      readOnly: t.annotations?.readOnlyHint === true,
      call: (args) => this.callTool(t.name, args),
    };
  }
}

function renderContent(content: unknown[], result: Record<string, unknown>): string {
  if (content.length === 0 && "toolResult" in result) return JSON.stringify(result.toolResult);
  return content
    .map((block) => {
      const b = block as { type?: string; text?: string; mimeType?: string; resource?: { uri?: string; text?: string }; uri?: string };
      if (b.type === "text") return b.text ?? "";
      if (b.type === "image" || b.type === "audio") return `[${b.type} ${b.mimeType ?? ""}]`.replace(" ]", "]");
      if (b.type === "resource") return b.resource?.text ?? `[resource ${b.resource?.uri ?? ""}]`;
      if (b.type === "resource_link") return `[resource ${b.uri ?? ""}]`;
      return JSON.stringify(block);
    })
    .join("\n");
}
