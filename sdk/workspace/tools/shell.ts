import { z } from "zod";
import { capOutput, defineTool, normalizeNewlines, type ToolContext, type WorkspaceTool } from "./common.js";

export const BASH_DEFAULT_TIMEOUT_MS = 120_000;
export const BASH_MAX_TIMEOUT_MS = 600_000;

export const BashInputSchema = z.object({
  command: z.string().min(1, "command must not be empty").describe("The shell command to run (with /bin/sh -c) in the workspace root."),
  description: z.string().optional().describe("A few words on what the command does."),
  timeout: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe(`Timeout in milliseconds (default ${BASH_DEFAULT_TIMEOUT_MS}, at most ${BASH_MAX_TIMEOUT_MS}; larger values are clamped).`),
});

/** Bash: `/bin/sh -c command` in the workspace root, with a timeout and a 30 000-character output cap. */
export function bashTool(ctx: ToolContext): WorkspaceTool {
  return defineTool(ctx, {
    name: "Bash",
    description:
      "Runs a shell command in the workspace root and returns its output (stdout, then stderr). " +
      `Output over 30000 characters is truncated. Default timeout ${BASH_DEFAULT_TIMEOUT_MS} ms, max ${BASH_MAX_TIMEOUT_MS} ms.`,
    inputSchema: BashInputSchema,
    run: async ({ command, timeout }) => {
      // 0 would mean "time out at once"; treat it as "use the default".
      const timeoutMs = Math.min(timeout || BASH_DEFAULT_TIMEOUT_MS, BASH_MAX_TIMEOUT_MS);
      let result;
      try {
        result = await ctx.sandbox.exec(["/bin/sh", "-c", command], { cwd: "", timeoutMs, maxOutputBytes: 4 * 1024 * 1024 });
      } catch (e) {
        return { ok: false, output: `Command failed: ${command}\nError: ${e instanceof Error ? e.message : String(e)}` };
      }
      if (result.timedOut) return { ok: false, output: `Command timed out after ${timeoutMs}ms: ${command}`, metadata: { timedOut: true, timeoutMs } };
      const stdout = normalizeNewlines(result.stdout.toString("utf8"));
      const stderr = normalizeNewlines(result.stderr.toString("utf8"));
      if (result.exitCode !== 0) {
        let text = `Command failed: ${command}\n`;
        if (stdout) text += `\nStdout:\n${stdout}`;
        if (stderr) text += `\nStderr:\n${stderr}`;
        const capped = capOutput(text);
        return { ok: false, output: capped.text, metadata: { exitCode: result.exitCode, truncated: capped.truncated || result.truncated } };
      }
      const capped = capOutput(stdout && stderr ? `${stdout}\n${stderr}` : stdout || stderr);
      return { ok: true, output: capped.text, metadata: { exitCode: 0, truncated: capped.truncated || result.truncated } };
    },
  });
}
