import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ROOT, ensureBuilt, makeSandbox, pulumiBinDir, type Sandbox } from "./pulumi-helpers.js";

vi.setConfig({ testTimeout: 300_000 });

/**
 * A project as a user has it after the quick start: no PULUMI_BACKEND_URL, so `agentws up` keeps
 * its state in <project>/.agentws/state, and every other command (and `agentws serve`, through
 * fromStack) must find it there. Only `up` creates stacks.
 */
let sb: Sandbox;
let env: NodeJS.ProcessEnv;
let declared = 0;

function agentws(args: string[]): { stdout: string; stderr: string; status: number | null } {
  const r = spawnSync(process.execPath, [join(ROOT, "bin", "agentws.js"), ...args, "--cwd", sb.workDir], { env, encoding: "utf8", timeout: 240_000 });
  return { stdout: r.stdout, stderr: r.stderr, status: r.status };
}

beforeAll(() => {
  ensureBuilt();
  sb = makeSandbox("state");
  const home = join(sb.dir, "user-home");
  mkdirSync(home);
  writeFileSync(join(sb.workDir, "Pulumi.yaml"), `name: state\nruntime: nodejs\nmain: ${relative(sb.workDir, join(ROOT, "dist", "stacks", "index.js"))}\n`);
  mkdirSync(join(sb.workDir, "stacks"));
  const { PULUMI_BACKEND_URL: _url, AGENTWS_STACK: _stack, PULUMI_ACCESS_TOKEN: _token, ...rest } = process.env;
  env = { ...rest, HOME: home, PATH: `${pulumiBinDir()}:${process.env.PATH}`, PULUMI_HOME: sb.pulumiHome, PULUMI_CONFIG_PASSPHRASE: "state-test" };
  copyFileSync(join(ROOT, "stacks", "local.fleet.yaml"), join(sb.workDir, "stacks", "local.fleet.yaml"));
});

afterAll(() => sb?.dispose());

describe.sequential("one state backend for every command", () => {
  it("`up` keeps state in the project's .agentws/state; `outputs` reads it", () => {
    const up = agentws(["up", "--stack", "local"]);
    expect(up.status, up.stderr).toBe(0);
    expect(existsSync(join(sb.workDir, ".agentws", "state", ".pulumi"))).toBe(true);
    const out = agentws(["outputs", "--stack", "local"]);
    expect(out.status, out.stderr).toBe(0);
    declared = Object.keys((JSON.parse(out.stdout) as { workspaces: Record<string, unknown> }).workspaces).length;
    expect(declared).toBeGreaterThan(0);
  });

  it("a mistyped --stack is an error naming the stacks that exist, and creates nothing", () => {
    for (const command of [["outputs"], ["preview"], ["refresh"], ["destroy", "--yes"]]) {
      const r = agentws([...command, "--stack", "typo"]);
      expect({ command, status: r.status === 0 }).toEqual({ command, status: false });
      expect(r.stderr).toContain("no stack 'typo'");
      expect(r.stderr).toContain("stacks there: local");
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
    expect(existsSync(join(sb.workDir, ".agentws", "state", ".pulumi", "stacks", "state", "typo.json"))).toBe(false);
  });

  it("a plain `agentws serve` serves the fleet `up` provisioned", async () => {
    const child = spawn(
      process.execPath,
      [join(ROOT, "bin", "agentws.js"), "serve", "--cwd", sb.workDir, "--port", "0", "--store", join(sb.dir, "sessions.db")],
      { env, stdio: ["ignore", "ignore", "pipe"] },
    );
    let stderr = "";
    try {
      await new Promise<void>((ok, fail) => {
        child.stderr.on("data", (d: Buffer) => {
          stderr += d.toString();
          if (/workspaces at http/.test(stderr)) ok();
        });
        child.once("exit", (code) => fail(new Error(`serve exited (${code}): ${stderr}`)));
      });
    } finally {
      child.kill("SIGTERM");
    }
    expect(stderr).toContain(`stack 'local' declares ${declared} workspace(s)`);
    expect(stderr).not.toContain("serving without a fleet");
  });

  it("an explicit --stack that cannot be read stops `serve` with the engine's reason", () => {
    const r = agentws(["serve", "--stack", "typo", "--port", "0", "--store", join(sb.dir, "sessions.db")]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("typo");
    expect(r.stderr).not.toContain("code: -2");
  });
});
