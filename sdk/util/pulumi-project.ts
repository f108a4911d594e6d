import { existsSync, readFileSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parse as parseYaml } from "yaml";

/**
 * Where a project's stacks live, decided in one place for every command and for
 * `WorkspaceManager.fromStack`: `agentws up` and `agentws serve` must read the same state.
 */
export interface ProjectFile {
  name: string;
  main?: string;
  stackConfigDir?: string;
  backend?: { url?: string };
}

export function readProjectFile(dir: string): ProjectFile | undefined {
  for (const f of ["Pulumi.yaml", "Pulumi.yml"]) {
    const p = join(dir, f);
    if (existsSync(p)) return parseYaml(readFileSync(p, "utf8")) as ProjectFile;
  }
  return undefined;
}

/** $PULUMI_BACKEND_URL, else Pulumi.yaml's backend.url, else file://<workDir>/.agentws/state. */
export function defaultBackendUrl(workDir: string, env: Record<string, string | undefined> = process.env): string {
  return env.PULUMI_BACKEND_URL || readProjectFile(resolve(workDir))?.backend?.url || pathToFileURL(join(resolve(workDir), ".agentws", "state")).href;
}

/**
 * The environment every engine call of a project gets: its state backend (defaultBackendUrl), the
 * passphrase of local stacks ($PULUMI_CONFIG_PASSPHRASE or its _FILE, else ""), no update checks or
 * plugin downloads, and the CLI's folder first on PATH.
 */
export function engineEnv(options: {
  workDir: string;
  backendUrl?: string | undefined;
  passphrase?: string | undefined;
  binDir?: string | undefined;
}): Record<string, string> {
  const env: Record<string, string> = {
    PULUMI_BACKEND_URL: options.backendUrl ?? defaultBackendUrl(options.workDir),
    PULUMI_SKIP_UPDATE_CHECK: "true",
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
    PULUMI_CONFIG_PASSPHRASE: options.passphrase ?? process.env.PULUMI_CONFIG_PASSPHRASE ?? "",
    PATH: [options.binDir, dirname(process.execPath), process.env.PATH ?? ""].filter(Boolean).join(delimiter),
  };
  if (process.env.PULUMI_CONFIG_PASSPHRASE_FILE && options.passphrase === undefined && process.env.PULUMI_CONFIG_PASSPHRASE === undefined) {
    delete env.PULUMI_CONFIG_PASSPHRASE;
    env.PULUMI_CONFIG_PASSPHRASE_FILE = process.env.PULUMI_CONFIG_PASSPHRASE_FILE;
  }
  return env;
}

/** Finds the folder with a usable `pulumi`: an explicit dir, PATH, then the toolchain script's cache. */
export function findPulumiBinDir(explicit?: string): string | undefined {
  const candidates = [explicit, ...(process.env.PATH ?? "").split(delimiter)];
  for (const d of candidates) if (d && existsSync(join(d, "pulumi"))) return d;
  const cacheRoot = join(process.env.AGENTWS_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "agent-workspaces"));
  if (existsSync(cacheRoot))
    for (const d of readdirSync(cacheRoot)
      .filter((n) => n.startsWith("pulumi-"))
      .sort()
      .reverse()) {
      const bin = join(cacheRoot, d, "bin");
      if (existsSync(join(bin, "pulumi"))) return bin;
    }
  return undefined;
}

/**
 * The engine's own words from an Automation API failure. Its CommandError message is
 * "code: -2\n stdout: ...\n stderr: error: <cause>"; the `error:` lines are what a user needs.
 */
export function engineMessage(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  const lines = text.split("\n").map((l) => l.trim());
  const errors = lines
    .map((l) => l.replace(/^stderr:\s*/, ""))
    .filter((l) => /^error:/i.test(l))
    .map((l) => l.replace(/^error:\s*/i, ""));
  // Else the first thing the CLI said on stderr (a spawn failure says it there too), else the first line.
  const stderr = lines.find((l) => /^stderr:\s*\S/.test(l))?.replace(/^stderr:\s*/, "");
  const picked = errors.length ? errors.join("; ") : (stderr ?? lines.find((l) => l && !/^(code|stdout|stderr|err\?):/.test(l)) ?? lines[0] ?? "unknown error");
  return picked.slice(0, 500);
}

/** True when the engine failed because the named stack does not exist. */
export function isNoSuchStack(e: unknown): boolean {
  const text = e instanceof Error ? e.message : String(e);
  return /no stack named|stack .* not found|does not exist/i.test(text);
}
