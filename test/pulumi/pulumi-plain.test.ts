import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { FleetOutputsSchema } from "../../sdk/contract/fleet.js";
import { ROOT, ensureBuilt, makeSandbox, pulumiBinDir, type Sandbox } from "./pulumi-helpers.js";

// The real engine on a shared 2-core machine: operations take seconds each, more under load.
vi.setConfig({ testTimeout: 300_000 });

/**
 * The default local stack program (stacks/index.ts, compiled) run two ways on a fresh HOME:
 * plain `pulumi up` (through whichever Node language host the toolchain provides, ours when
 * the CLI was built from Go modules) and `agentws up` (Automation API, inline program).
 */
let sb: Sandbox;
let bin: string;
let env: NodeJS.ProcessEnv;
const bwrap = spawnSync("sh", ["-c", "command -v bwrap"]).status === 0;

function pulumi(args: string[], input?: string): string {
  const r = spawnSync(join(bin, "pulumi"), [...args, "--non-interactive"], { cwd: sb.workDir, env, encoding: "utf8", input, timeout: 180_000 });
  if (r.status !== 0) throw new Error(`pulumi ${args.join(" ")} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

function agentws(args: string[], input?: string): { stdout: string; stderr: string; status: number | null } {
  const r = spawnSync(process.execPath, [join(ROOT, "bin", "agentws.js"), ...args, "--cwd", sb.workDir, "--stack", "cli"], {
    env,
    encoding: "utf8",
    input,
    timeout: 180_000,
  });
  return { stdout: r.stdout, stderr: r.stderr, status: r.status };
}

beforeAll(() => {
  bin = pulumiBinDir();
  ensureBuilt();
  sb = makeSandbox("plain");
  const home = join(sb.dir, "user-home");
  mkdirSync(home);
  // A project folder of its own (so stack config files land in the sandbox) running the repo's stack program.
  writeFileSync(
    join(sb.workDir, "Pulumi.yaml"),
    `name: plain\nruntime:\n  name: nodejs\n  options:\n    typescript: false\nmain: ${relative(sb.workDir, join(ROOT, "dist", "stacks", "index.js"))}\n`,
  );
  mkdirSync(join(sb.workDir, "stacks"));
  copyFileSync(join(ROOT, "stacks", "local.fleet.yaml"), join(sb.workDir, fleetFile));
  env = {
    ...process.env,
    HOME: home,
    PATH: `${bin}:${process.env.PATH}`,
    PULUMI_HOME: sb.pulumiHome,
    PULUMI_BACKEND_URL: `file://${sb.backendDir}`,
    PULUMI_CONFIG_PASSPHRASE: "plain-test",
    PULUMI_SKIP_UPDATE_CHECK: "true",
  };
});

afterAll(() => sb?.dispose());

// Relative, as in the repository's own stacks: resolved against the project folder by both paths.
const fleetFile = "stacks/local.fleet.yaml";

describe.sequential("the default local stack", () => {
  it("plain `pulumi up` provisions it, preview --json renders as a no-change comment, destroy removes it", () => {
    pulumi(["stack", "init", "plain"]);
    pulumi(["config", "set", "agentws:fleetFile", fleetFile]);
    pulumi(["config", "set", "--type", "bool", "agentws:deleteData", "true"]);
    const up = pulumi(["up", "--yes"]);
    expect(up).toMatch(/created/);
    const fleet = FleetOutputsSchema.parse(JSON.parse(pulumi(["stack", "output", "--json"])).workspaces);
    const kinds = Object.values(fleet)
      .map((w) => w.backend.kind)
      .sort();
    expect(kinds).toEqual(bwrap ? ["bubblewrap", "local"] : ["local"]);
    for (const w of Object.values(fleet)) expect(existsSync(w.location.hostPath!)).toBe(true);
    expect(fleet[Object.keys(fleet).find((k) => fleet[k]!.backend.kind === "local")!]!.location.hostPath).toContain(
      join(sb.dir, "user-home", ".agent-workspaces", "local"),
    );

    const previewJson = pulumi(["preview", "--json"]);
    const md = agentws(["preview", "--markdown", "--from-json", "-"], previewJson);
    expect(md.status).toBe(0);
    // The fleet component, its data ledger and its workspaces (the default provider is not a step).
    expect(md.stdout).toContain(`**No workspace changes** · ${kinds.length + 2} resources unchanged`);

    pulumi(["destroy", "--yes"]);
    expect(readdirSync(join(sb.dir, "user-home", ".agent-workspaces", "local"))).toEqual([]);
  });

  it("`agentws up` does the same through the Automation API, with live progress lines", () => {
    execFileSync(join(bin, "pulumi"), ["stack", "init", "cli", "--non-interactive"], { cwd: sb.workDir, env, stdio: "ignore" });
    execFileSync(join(bin, "pulumi"), ["config", "set", "--stack", "cli", "agentws:fleetFile", fleetFile], { cwd: sb.workDir, env, stdio: "ignore" });
    execFileSync(join(bin, "pulumi"), ["config", "set", "--stack", "cli", "--type", "bool", "agentws:deleteData", "true"], {
      cwd: sb.workDir,
      env,
      stdio: "ignore",
    });
    const up = agentws(["up"]);
    expect(up.status, up.stderr).toBe(0);
    expect(up.stderr).toMatch(/\+ created {2}workspace fleet-[0-9a-f]{16} \(\d+\.\ds\)/);
    const outputs = agentws(["outputs"]);
    const fleet = FleetOutputsSchema.parse(JSON.parse(outputs.stdout).workspaces);
    expect(Object.keys(fleet)).toHaveLength(bwrap ? 2 : 1);

    const md = agentws(["preview", "--markdown"]);
    expect(md.status, md.stderr).toBe(0);
    expect(md.stdout).toContain("**No workspace changes**");

    expect(agentws(["destroy"]).status).toBe(2); // needs --yes
    const destroyed = agentws(["destroy", "--yes"]);
    expect(destroyed.status, destroyed.stderr).toBe(0);
    expect(readdirSync(join(sb.dir, "user-home", ".agent-workspaces", "local"))).toEqual([]);
  });

  it("a failing preview still renders a markdown comment with the error, and exits non-zero", () => {
    const bad = join(sb.dir, "bad.fleet.yaml");
    writeFileSync(bad, "workspaces:\n  - workspaceId: broken\n    backend: { kind: local }\n    ttlSeconds: -1\n");
    execFileSync(join(bin, "pulumi"), ["config", "set", "--stack", "cli", "agentws:fleetFile", bad], { cwd: sb.workDir, env, stdio: "ignore" });
    const md = agentws(["preview", "--markdown"]);
    expect(md.status).toBe(1);
    expect(md.stdout).toContain("**Errors**");
    expect(md.stdout).toContain("workspaces[0].ttlSeconds");
    expect(md.stderr).toContain("agentws preview failed");
  });
});
