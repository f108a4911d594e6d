import { randomUUID } from "node:crypto";
import { z } from "zod";
import { InvalidArgumentError, isWorkspaceError } from "../../errors.js";
import type { Workspace } from "../../workspace/workspace.js";
import type { McpTool } from "../../workspace/mcp.js";
import type { WorkspaceTool } from "../../workspace/tools/index.js";
import { DEFAULT_TOOL_RESULT_LIMIT, offloadIfLarge } from "./offload-policy.js";

export const BASIC_GROUP = "basic";
export const SKILL_TOOL = "Skill";
export const ACTIVATE_TOOL = "ActivateToolGroup";

export interface ToolGroupSpec {
  description?: string;
  /** Tool names; a name ending in `*` matches by prefix (e.g. `mcp__github__*`). */
  tools: string[];
}

export interface ToolkitOptions {
  agentId?: string;
  sessionId: string;
  /** Groups the agent activates on demand; tools in no group are in `basic`, which is always on. */
  groups?: Record<string, ToolGroupSpec | string[]>;
  /** Tool results over this many tokens (bytes / 4) are offloaded; `false` turns offloading off. Default 50 000. */
  toolResultLimit?: number | false;
  /** More tools of the same shape as the built-ins (e.g. your own). */
  extraTools?: WorkspaceTool[];
}

/** One tool as both adapters hand it to their framework. `run` never throws. */
export interface ToolkitTool {
  name: string;
  description: string;
  group: string;
  /** The zod schema the tool has (built-ins, Skill, the meta-tool); MCP tools only have JSON Schema. */
  zodSchema: z.ZodType | undefined;
  jsonSchema: Record<string, unknown>;
  /** Runs the tool (its own validation included) and returns the text the model reads. */
  run(input: unknown, callId?: string): Promise<string>;
}

const SkillInputSchema = z.object({
  name: z.string().min(1).optional().describe("The skill to load. Leave out to list the skills."),
});
const ActivateInputSchema = z.object({ group: z.string().min(1).describe("The tool group to activate.") });

/**
 * The agent's toolset over one workspace: built-in tools, MCP tools of every registered server
 * (`mcp__<server>__<tool>`), the `Skill` tool, tool groups with `ActivateToolGroup`, and the
 * offload policy on every result. The framework adapters are thin wrappers over this.
 */
export class Toolkit {
  readonly tools: ToolkitTool[] = [];
  readonly #byName = new Map<string, ToolkitTool>();
  readonly #groups = new Map<string, { description: string; tools: string[] }>();
  readonly #active = new Set<string>([BASIC_GROUP]);
  readonly #workspace: Workspace;
  readonly #options: ToolkitOptions;

  private constructor(workspace: Workspace, options: ToolkitOptions) {
    this.#workspace = workspace;
    this.#options = options;
  }

  static async create(workspace: Workspace, options: ToolkitOptions): Promise<Toolkit> {
    if (typeof options?.sessionId !== "string" || options.sessionId === "")
      throw new InvalidArgumentError("must be a non-empty string", { field: "sessionId" });
    const kit = new Toolkit(workspace, options);
    const groupOf = groupMatcher(options.groups ?? {});
    for (const [name, spec] of Object.entries(options.groups ?? {})) {
      if (name === BASIC_GROUP) throw new InvalidArgumentError("is always on and takes the tools no group lists", { field: `groups.${BASIC_GROUP}` });
      const s = Array.isArray(spec) ? { tools: spec } : spec;
      kit.#groups.set(name, { description: s.description ?? "", tools: [] });
    }
    const add = (t: Omit<ToolkitTool, "group" | "run">, run: (input: unknown) => Promise<string>, group = groupOf(t.name)) => {
      const tool: ToolkitTool = { ...t, group, run: (input, callId) => kit.#run(tool, run, input, callId) };
      kit.tools.push(tool);
      kit.#byName.set(tool.name, tool);
      kit.#groups.get(group)?.tools.push(tool.name);
    };
    for (const t of [...workspace.listTools(), ...(options.extraTools ?? [])])
      add({ name: t.name, description: t.description, zodSchema: t.inputSchema, jsonSchema: t.jsonSchema }, (input) => runWorkspaceTool(t, input));
    for (const t of await kit.#mcpTools())
      add({ name: t.name, description: t.description, zodSchema: undefined, jsonSchema: t.inputSchema }, (input) => kit.#callMcp(t, input));
    const skills = await workspace.listSkills({ agentId: options.agentId });
    add(
      {
        name: SKILL_TOOL,
        description: skillDescription(skills),
        zodSchema: SkillInputSchema,
        jsonSchema: z.toJSONSchema(SkillInputSchema, { io: "input" }) as Record<string, unknown>,
      },
      (input) => kit.#skill(input),
      BASIC_GROUP,
    );
    if (kit.#groups.size > 0)
      add(
        {
          name: ACTIVATE_TOOL,
          description: kit.#activateDescription(),
          zodSchema: ActivateInputSchema,
          jsonSchema: z.toJSONSchema(ActivateInputSchema, { io: "input" }) as Record<string, unknown>,
        },
        async (input) => kit.#activate(input),
        BASIC_GROUP,
      );
    return kit;
  }

  /** Groups on now (`basic` always). */
  get activeGroups(): string[] {
    return [...this.#active];
  }
  /** Names of the tools the model should see now. */
  activeToolNames(): string[] {
    return this.tools.filter((t) => this.#active.has(t.group)).map((t) => t.name);
  }
  activate(group: string): void {
    if (!this.#groups.has(group)) throw new InvalidArgumentError(`no tool group '${group}'`, { field: "group" });
    this.#active.add(group);
  }
  get(name: string): ToolkitTool | undefined {
    return this.#byName.get(name);
  }

  async #run(tool: ToolkitTool, run: (input: unknown) => Promise<string>, input: unknown, callId: string | undefined): Promise<string> {
    if (!this.#active.has(tool.group))
      return `Error: tool '${tool.name}' is in the tool group '${tool.group}', which is not active. Call ${ACTIVATE_TOOL} with {"group":"${tool.group}"} first, then call '${tool.name}' again.`;
    let text: string;
    try {
      text = await run(input);
    } catch (e) {
      text = errorText(tool.name, e);
    }
    const limit = this.#options.toolResultLimit ?? DEFAULT_TOOL_RESULT_LIMIT;
    if (limit === false) return text;
    return offloadIfLarge(this.#workspace, this.#options.sessionId, { id: callId || randomUUID().replace(/-/g, ""), name: tool.name }, text, limit);
  }

  async #mcpTools(): Promise<McpTool[]> {
    const out: McpTool[] = [];
    for (const handle of await this.#workspace.listMcps(this.#scope())) out.push(...(await handle.listTools()));
    return out;
  }

  #scope(): { agentId?: string; sessionId: string } {
    return { ...(this.#options.agentId !== undefined ? { agentId: this.#options.agentId } : {}), sessionId: this.#options.sessionId };
  }

  /** A closed client (evicted, or its server exited) is listed again once, which restarts it. */
  async #callMcp(tool: McpTool, input: unknown): Promise<string> {
    const args = input !== null && typeof input === "object" && !Array.isArray(input) ? (input as Record<string, unknown>) : {};
    let result;
    try {
      result = await tool.call(args);
    } catch (e) {
      if (!isWorkspaceError(e, "closed") && !isWorkspaceError(e, "mcp_error")) throw e;
      const handle = (await this.#workspace.listMcps(this.#scope())).find((h) => h.name === tool.mcpName);
      if (!handle) throw e;
      result = await handle.callTool(tool.toolName, args);
    }
    return result.ok ? result.output : `Error: ${result.output}`;
  }

  async #skill(input: unknown): Promise<string> {
    const { name } = SkillInputSchema.parse(input ?? {});
    const skills = await this.#workspace.listSkills({ agentId: this.#options.agentId });
    if (name === undefined) return skills.length === 0 ? "No skills are installed." : skills.map((s) => `- ${s.name}: ${s.description}`).join("\n");
    const skill = skills.find((s) => s.name === name);
    if (!skill) return `Error: no skill named '${name}'. Skills: ${skills.map((s) => s.name).join(", ") || "none"}`;
    return `# Skill: ${skill.name}\nFolder: ${skill.dir}\n\n${skill.markdown}`;
  }

  #activate(input: unknown): string {
    const { group } = ActivateInputSchema.parse(input ?? {});
    if (group === BASIC_GROUP) return `Tool group '${BASIC_GROUP}' is always active.`;
    const g = this.#groups.get(group);
    if (!g) return `Error: no tool group '${group}'. Groups: ${[...this.#groups.keys()].join(", ")}`;
    this.#active.add(group);
    return `Tool group '${group}' is active. Its tools: ${g.tools.join(", ") || "none"}.`;
  }

  #activateDescription(): string {
    const lines = [...this.#groups].map(([name, g]) => `- ${name}${g.description ? `: ${g.description}` : ""} (${g.tools.join(", ")})`);
    return `Activates a tool group so its tools can be called. The '${BASIC_GROUP}' group is always active. Groups:\n${lines.join("\n")}`;
  }
}

async function runWorkspaceTool(tool: WorkspaceTool, input: unknown): Promise<string> {
  const r = await tool.execute(input);
  return r.output;
}

function groupMatcher(groups: Record<string, ToolGroupSpec | string[]>): (name: string) => string {
  const entries = Object.entries(groups).map(([g, s]) => [g, Array.isArray(s) ? s : s.tools] as const);
  return (name) => {
    for (const [group, tools] of entries) if (tools.some((p) => (p.endsWith("*") ? name.startsWith(p.slice(0, -1)) : p === name))) return group;
    return BASIC_GROUP;
  };
}

function skillDescription(skills: Array<{ name: string; description: string }>): string {
  const list = skills.map((s) => `- ${s.name}: ${s.description}`).join("\n");
  return `Loads a skill's instructions (its SKILL.md) by name; without a name, lists the skills.${list ? `\nSkills:\n${list}` : ""}`;
}

/** Errors become text the model reads: ours carry caller-safe messages, anything else only its kind. */
function errorText(tool: string, e: unknown): string {
  if (isWorkspaceError(e)) return `Error: ${e.message}`;
  if (e instanceof z.ZodError) {
    const issue = e.issues[0];
    return `Error: ${tool}: ${issue ? `${issue.path.join(".") || "input"}: ${issue.message}` : "invalid input"}`;
  }
  return `Error: ${tool} failed`;
}
