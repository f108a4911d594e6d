import { InvalidArgumentError } from "../errors.js";

/**
 * The system-prompt fragment describing the workspace. Templates use Python `str.format`
 * placeholders like the reference: `{backend}` and `{workdir}`; `{{` and `}}` are literal braces.
 */
export const DEFAULT_WORKSPACE_INSTRUCTIONS = `<workspace>
You are working in a {backend} workspace rooted at {workdir}. Files you leave there persist between sessions.

Layout:
\`\`\`
{workdir}/
├── data/       # managed by the system: offloaded images, audio and other payloads
├── skills/     # skills, one folder per owning agent, each skill with a SKILL.md
└── sessions/   # managed by the system: offloaded context and long tool results per session
\`\`\`
Treat data/ and sessions/ as read-only; read them when a reminder points you there.

Keeping the workspace tidy:
- Put each task in its own dated project folder, e.g. \`20250131_sales_report/\`, with a short README.md saying what it is and how to run it.
- Other sessions may work here at the same time: use a git worktree or a separate folder per session, put your session in the names of what you create, and delete only what you created.
- Use a \`scratch/\` folder in the workspace for throwaway files instead of /tmp, and clean it up when done.
- Track project folders with git, keep a .gitignore, and never commit secrets or credentials.
- Give each Python project its own environment with uv; never install packages globally:
\`\`\`shell
uv init && uv add <package> && uv run <script.py>
\`\`\`
</workspace>`;

/** Renders a template; unknown placeholders and stray braces are errors naming the option. */
export function renderInstructions(template: string | undefined, values: { backend: string; workdir: string }): string {
  const source = template ?? DEFAULT_WORKSPACE_INSTRUCTIONS;
  const vars: Record<string, string> = { backend: values.backend, workdir: values.workdir };
  return source.replace(/\{\{|\}\}|\{([^{}]*)\}|[{}]/g, (match, name: string | undefined) => {
    if (match === "{{") return "{";
    if (match === "}}") return "}";
    if (name !== undefined) {
      const value = vars[name];
      if (value === undefined)
        throw new InvalidArgumentError(`unknown placeholder '{${name}}'; use {backend} or {workdir}, and double braces ('{{', '}}') for literal ones`, {
          field: "instructions",
        });
      return value;
    }
    throw new InvalidArgumentError(`single '${match}' in the template; double it ('${match}${match}') for a literal brace`, { field: "instructions" });
  });
}
