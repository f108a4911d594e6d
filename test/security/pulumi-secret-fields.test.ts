import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import type { EngineEvent, Stack } from "@pulumi/pulumi/automation/index.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { FLEET_OUTPUT_NAME } from "../../sdk/contract/fleet.js";
import { readStackOutputs } from "../../sdk/manager/index.js";
import { WorkspaceFleet, type FleetWorkspaceInput } from "../../providers/index.js";
import { StepCollector, upWithPreview } from "../../sdk/cli/engine.js";
import { renderPreviewMarkdown } from "../../sdk/cli/preview-markdown.js";
import { ROOT, backendText, ensureBuilt, makeSandbox, pulumiBinDir, testStack, type Sandbox } from "../pulumi/pulumi-helpers.js";

// The real engine (and bwrap) on a shared 2-core machine: each operation takes seconds.
vi.setConfig({ testTimeout: 300_000 });

/**
 * Attack: read secrets a fleet declares (MCP header values, MCP env values, backend env values)
 * from where Pulumi keeps or shows them: the exported state and its history, engine events and
 * output (debug diagnostics included), `agentws outputs`, the preview comment and error
 * messages. Each field carries its own sentinel, once in a WorkspaceFleet program and once in a
 * fleet file that refers to stack config secrets.
 */
const PROJECT = "secfields";
const sentinel = (field: string) => `sentinel-${field}-${randomBytes(8).toString("hex")}`;
const S = {
  codeHeader: sentinel("code-header"),
  codeMcpEnv: sentinel("code-mcpenv"),
  codeBackendEnv: sentinel("code-backendenv"),
  fileHeader: sentinel("file-header"),
  fileMcpEnv: sentinel("file-mcpenv"),
  fileBackendEnv: sentinel("file-backendenv"),
};
const ALL = Object.values(S);

let sb: Sandbox;
let bin: string;
let stack: Stack;
let basedir: string;
let fleetFile: string;
let team = "a";
let mode: "ok" | "bad-field" = "ok";
const seen: string[] = [];
const record = {
  onOutput: (s: string) => seen.push(s),
  onError: (s: string) => seen.push(s),
  onEvent: (e: EngineEvent) => seen.push(JSON.stringify(e)),
};

function expectClean(where: string, text: string) {
  for (const s of ALL) expect(text.includes(s), `${where} holds a secret in plain text`).toBe(false);
}

function fleetFileText(headerRef: string): string {
  return [
    "workspaces:",
    "  - workspaceId: from-file",
    `    backend: { kind: bubblewrap, basedir: ${JSON.stringify(basedir)}, env: { FILE_ENV: { secret: "agentws:fileBackendEnv" } } }`,
    "    defaultMcps:",
    "      - name: remote",
    `        transport: { type: http, url: "http://127.0.0.1:9/mcp", headers: { Authorization: ${headerRef} } }`,
    "      - name: tool",
    "        transport: { type: stdio, command: node, env: { TOKEN: { secret: fileMcpEnv } } }",
  ].join("\n");
}

function codeSpec(): FleetWorkspaceInput {
  return {
    workspaceId: "from-code",
    backend: { kind: "bubblewrap", basedir, env: { CODE_ENV: S.codeBackendEnv } },
    defaultMcps: [
      { name: "remote", transport: { type: "http", url: "http://127.0.0.1:9/mcp", headers: { Authorization: S.codeHeader } } },
      { name: "tool", transport: { type: "stdio", command: "node", env: { TOKEN: S.codeMcpEnv } } },
    ],
    tags: { team },
    ...(mode === "bad-field" ? { bogus: "x" } : {}),
  } as FleetWorkspaceInput;
}

beforeAll(async () => {
  bin = pulumiBinDir();
  ensureBuilt();
  sb = makeSandbox("secret-fields");
  basedir = join(sb.dir, "workspaces");
  fleetFile = join(sb.dir, "fleet.yaml");
  writeFileSync(fleetFile, fleetFileText("{ secret: fileHeader }"));
  // A project file, so `agentws outputs --cwd` finds the project; its program is never run here.
  writeFileSync(join(sb.workDir, "Pulumi.yaml"), `name: ${PROJECT}\nruntime: nodejs\nmain: program.js\n`);
  writeFileSync(join(sb.workDir, "program.js"), "export default async () => ({});\n");
  stack = await testStack(
    sb,
    PROJECT,
    async () => {
      const fleet = new WorkspaceFleet("fleet", { workspaces: [codeSpec()], file: fleetFile, deleteData: true });
      return { [FLEET_OUTPUT_NAME]: fleet.workspaces };
    },
    bin,
  );
  await stack.setConfig(`${PROJECT}:fileHeader`, { value: S.fileHeader, secret: true });
  await stack.setConfig(`${PROJECT}:fileMcpEnv`, { value: S.fileMcpEnv, secret: true });
  await stack.setConfig("agentws:fileBackendEnv", { value: S.fileBackendEnv, secret: true });
});

afterAll(async () => {
  try {
    await stack?.destroy({ color: "never" });
  } catch {
    // already destroyed by the last test, or never created
  }
  sb?.dispose();
});

const env = () => ({
  ...process.env,
  PATH: [bin, process.env.PATH ?? ""].join(delimiter),
  PULUMI_BACKEND_URL: `file://${sb.backendDir}`,
  PULUMI_HOME: sb.pulumiHome,
  PULUMI_CONFIG_PASSPHRASE: "test-passphrase",
  PULUMI_SKIP_UPDATE_CHECK: "true",
});

/** The pulumi CLI itself, as a user would run it against this stack's backend. */
function pulumiCli(args: string[]): string {
  const r = spawnSync(join(bin, "pulumi"), args, { cwd: sb.workDir, env: env(), encoding: "utf8" });
  expect(r.status, r.stderr).toBe(0);
  return `${r.stdout}\n${r.stderr}`;
}

describe.sequential("secret-bearing fleet fields never appear in plain text", () => {
  it("up: state, exported state, engine events (debug included) stay clean", async () => {
    await upWithPreview(stack, { ...record, color: "never", debug: true });
    const state = backendText(sb);
    expect(state).toContain("ciphertext");
    expectClean("state files", state);
    expectClean("pulumi stack export", pulumiCli(["stack", "export", "--stack", "test"]));
    expectClean("engine events and output", seen.join("\n"));
  });

  // The outputs echo what the provider received, so this also shows it got the real values.
  it("a manager reading the stack gets the values it seeds; `agentws outputs` masks them", async () => {
    const fleet = await readStackOutputs({
      stackName: "test",
      projectName: PROJECT,
      envVars: { PULUMI_BACKEND_URL: `file://${sb.backendDir}`, PULUMI_CONFIG_PASSPHRASE: "test-passphrase", PATH: env().PATH },
      pulumiHome: sb.pulumiHome,
    });
    const headerOf = (id: string) => {
      const t = fleet[id]!.defaultMcps![0]!.transport;
      return t.type === "http" ? t.headers?.Authorization : undefined;
    };
    expect(headerOf("from-code")).toBe(S.codeHeader);
    expect(headerOf("from-file")).toBe(S.fileHeader);
    expect(fleet["from-file"]!.backend).toMatchObject({ env: { FILE_ENV: S.fileBackendEnv } });

    const cli = spawnSync(process.execPath, [join(ROOT, "bin", "agentws.js"), "outputs", "--stack", "test", "--cwd", sb.workDir], {
      env: env(),
      encoding: "utf8",
    });
    expect(cli.status, cli.stderr).toBe(0);
    expectClean("agentws outputs", `${cli.stdout}\n${cli.stderr}`);
    const shown = JSON.parse(cli.stdout) as Record<string, Record<string, Record<string, unknown>>>;
    // The rest stays readable: only what state holds as secrets is masked (the engine keeps an
    // array holding a secret as one secret, so the MCP list is masked whole).
    const code = shown[FLEET_OUTPUT_NAME]!["from-code"]!;
    expect(code).toMatchObject({ workspaceId: "from-code", tags: { team: "a" }, defaultMcps: "[secret]" });
    expect(code.backend).toMatchObject({ kind: "bubblewrap", env: { CODE_ENV: "[secret]" } });
    // Plain `pulumi stack output` shows the fleet only masked as a whole.
    expectClean("pulumi stack output", pulumiCli(["stack", "output", "--stack", "test", "--json"]));
  });

  it("update, preview markdown and refresh stay clean", async () => {
    team = "b";
    const collector = new StepCollector();
    const p = await stack.preview({ ...record, onEvent: (e) => (collector.onEvent(e), record.onEvent(e)), diff: true, color: "never", debug: true });
    seen.push(p.stdout, p.stderr);
    const md = renderPreviewMarkdown(collector.model(), { stack: "test" });
    expect(md).toContain("`tags.team`");
    expectClean("preview markdown", md);
    await stack.up({ ...record, diff: true, color: "never" });
    await stack.refresh({ ...record, color: "never" });
    expectClean("state files", backendText(sb));
    expectClean("engine events and output", seen.join("\n"));
  });

  it("errors about secret-bearing specs name the field, never the value", async () => {
    const failure = async () => {
      try {
        await upWithPreview(stack, { ...record, color: "never" });
      } catch (e) {
        return e instanceof Error ? `${e.message}\n${e.stack ?? ""}` : String(e);
      }
      throw new Error("expected the update to fail");
    };
    mode = "bad-field";
    const unknownField = await failure();
    mode = "ok";
    expect(unknownField).toMatch(/workspaces\[0\]\.bogus/);
    expectClean("unknown-field error", unknownField);

    writeFileSync(fleetFile, fleetFileText("{ secret: notSet }"));
    const missing = await failure();
    expect(missing).toMatch(/workspaces\[0\]\.defaultMcps\[0\]\.transport\.headers\.Authorization/);
    expect(missing).toMatch(/secfields:notSet/);
    expectClean("missing-config error", missing);

    writeFileSync(fleetFile, fleetFileText('{ secret: "" }'));
    const badRef = await failure();
    expect(badRef).toMatch(/workspaces\[0\]\.defaultMcps\[0\]\.transport\.headers\.Authorization\.secret/);
    expectClean("bad-reference error", badRef);
    writeFileSync(fleetFile, fleetFileText("{ secret: fileHeader }"));
    expectClean("engine events and output", seen.join("\n"));
  });

  it("destroy output and the remaining history stay clean", async () => {
    await stack.destroy({ ...record, color: "never" });
    expectClean("engine events and output", seen.join("\n"));
    expectClean("state files", backendText(sb));
  });
});
