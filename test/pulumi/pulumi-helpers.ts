import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { PulumiFn } from "@pulumi/pulumi/automation/index.js";
import { openStack } from "../../sdk/cli/engine.js";

/**
 * Real-engine test support: the Pulumi CLI from scripts/pulumi-toolchain.sh, compiled JS in
 * dist/ (the dynamic-provider process cannot load TypeScript), and one private file backend
 * and PULUMI_HOME per test file. Work dirs sit inside the repo (.cache/, git-ignored) so the
 * provider process resolves @pulumi/pulumi and the package's own name from them.
 */
export const ROOT = join(import.meta.dirname, "../..");

export function pulumiBinDir(): string {
  return execFileSync(join(ROOT, "scripts", "pulumi-toolchain.sh"), { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim();
}

/** Compiles dist/ when any source is newer than its stamp; serialized across test files by flock. */
export function ensureBuilt(): void {
  const stamp = join(ROOT, "dist", ".pulumi-test-build-stamp");
  const newest = newestMtime(["sdk", "providers", "stacks"].map((d) => join(ROOT, d)));
  if (existsSync(stamp) && statSync(stamp).mtimeMs >= newest) return;
  // tsc still emits when another engineer's in-flight file has a type error; we only need the JS.
  spawnSync("flock", ["/tmp/agentws-build.lock", "npx", "tsc", "-p", "tsconfig.build.json"], { cwd: ROOT, stdio: "ignore" });
  if (!existsSync(join(ROOT, "dist", "providers", "impl.js"))) throw new Error("npm run build did not produce dist/providers/impl.js");
  writeFileSync(stamp, "");
}

function newestMtime(dirs: string[]): number {
  let max = 0;
  const walk = (d: string) => {
    if (!existsSync(d)) return;
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".ts")) max = Math.max(max, statSync(p).mtimeMs);
    }
  };
  dirs.forEach(walk);
  return max;
}

export interface Sandbox {
  dir: string;
  workDir: string;
  backendDir: string;
  pulumiHome: string;
  dispose(): void;
}

export function makeSandbox(prefix: string): Sandbox {
  const base = join(ROOT, ".cache", "pulumi-test");
  mkdirSync(base, { recursive: true });
  const dir = mkdtempSync(join(base, `${prefix}-`));
  const s = { dir, workDir: join(dir, "project"), backendDir: join(dir, "state"), pulumiHome: join(dir, "home") };
  for (const d of [s.workDir, s.backendDir, s.pulumiHome]) mkdirSync(d, { recursive: true });
  return { ...s, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}

export async function testStack(sb: Sandbox, projectName: string, program: PulumiFn, binDir: string) {
  return openStack({
    workDir: sb.workDir,
    projectName,
    stackName: "test",
    program,
    backendUrl: `file://${sb.backendDir}`,
    pulumiHome: sb.pulumiHome,
    passphrase: "test-passphrase",
    pulumiBinDir: binDir,
    create: true,
  });
}

/** Every file of the backend (current state, history, backups) as text. */
export function backendText(sb: Sandbox): string {
  const parts: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else parts.push(readFileSync(p, "utf8"));
    }
  };
  walk(sb.backendDir);
  return parts.join("\n");
}

export function stateResources(sb: Sandbox, projectName: string): { type: string; id?: string; outputs?: Record<string, unknown> }[] {
  const file = join(sb.backendDir, ".pulumi", "stacks", projectName, "test.json");
  const doc = JSON.parse(readFileSync(file, "utf8")) as {
    checkpoint: { latest?: { resources?: { type: string; id?: string; outputs?: Record<string, unknown> }[] } };
  };
  return doc.checkpoint.latest?.resources ?? [];
}

/** Waits for `p` at most `ms` (a busy shared engine can hold an image removal for minutes); cleanup only. */
export async function bounded(p: Promise<unknown>, ms = 20_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p.catch(() => undefined), new Promise((r) => (timer = setTimeout(r, ms)))]).finally(() => clearTimeout(timer));
}
