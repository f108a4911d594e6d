import { execFile } from "node:child_process";
import { promises as fs, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * The packed tarball imported from a scratch project, with and without the optional peer
 * `dockerode`. The tarball is unpacked as npm would into node_modules/agent-workspaces; its
 * dependencies are linked from this checkout's node_modules (installing them would need the
 * network), and the optional peers (dockerode, the agent frameworks) only in the "with peer" project.
 */
const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
  exports: Record<string, unknown>;
};

let tmp: string;
let tarball: string;

async function scratch(name: string, peers: string[]): Promise<string> {
  const dir = path.join(tmp, name);
  const modules = path.join(dir, "node_modules");
  await fs.mkdir(path.join(modules, "agent-workspaces"), { recursive: true });
  await fs.writeFile(path.join(dir, "package.json"), JSON.stringify({ name, version: "1.0.0", type: "module", private: true }));
  await run("tar", ["-xzf", tarball, "-C", path.join(modules, "agent-workspaces"), "--strip-components=1"]);
  for (const dep of [...Object.keys(pkg.dependencies), ...peers]) {
    const link = path.join(modules, dep);
    await fs.mkdir(path.dirname(link), { recursive: true });
    await fs.symlink(await fs.realpath(path.join(ROOT, "node_modules", dep)), link);
  }
  return dir;
}

async function node(cwd: string, code: string): Promise<string> {
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", code], { cwd, timeout: 60_000 });
  return stdout.trim();
}

describe("packed tarball", () => {
  beforeAll(async () => {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-pack-"));
    await run("npm", ["run", "-s", "build"], { cwd: ROOT, timeout: 240_000 });
    const { stdout } = await run("npm", ["pack", "--silent", "--pack-destination", tmp], { cwd: ROOT, timeout: 120_000 });
    tarball = path.join(tmp, stdout.trim().split("\n").pop()!);
  }, 400_000);
  afterAll(() => fs.rm(tmp, { recursive: true, force: true }));

  it("declares dockerode an optional peer, not a dependency", () => {
    expect(pkg.dependencies.dockerode).toBeUndefined();
    expect(pkg.peerDependencies.dockerode).toBeDefined();
    expect(pkg.peerDependenciesMeta.dockerode?.optional).toBe(true);
  });

  it("imports every entry point with the optional peers installed, and Docker gets its client", async () => {
    const dir = await scratch("with-peer", Object.keys(pkg.peerDependencies));
    const entries = Object.keys(pkg.exports).filter((k) => k !== "./package.json").map((k) => (k === "." ? "agent-workspaces" : `agent-workspaces/${k.slice(2)}`));
    const out = await node(dir, `for (const e of ${JSON.stringify(entries)}) { const m = await import(e); if (!Object.keys(m).length) throw new Error(e + " exports nothing"); }
      const { DockerDriver } = await import("agent-workspaces/docker");
      const d = new DockerDriver({ socketPath: "/nonexistent.sock" });
      console.log(typeof d.docker.ping);`);
    expect(out).toBe("function");
  });

  it("without the peer, Local works and Docker says which package to install", async () => {
    const dir = await scratch("without-peer", []);
    const out = await node(dir, `const { LocalWorkspace } = await import("agent-workspaces/local");
      const root = await import("agent-workspaces");
      const { DockerDriver } = await import("agent-workspaces/docker");
      let message = "no error";
      try { new DockerDriver({}); } catch (e) { message = e.code + ": " + e.message; }
      console.log(JSON.stringify({ local: typeof LocalWorkspace, rootLocal: typeof root.LocalWorkspace, message }));`);
    const r = JSON.parse(out) as { local: string; rootLocal: string; message: string };
    expect(r.local).toBe("function");
    expect(r.rootLocal).toBe("function");
    expect(r.message).toContain("unavailable:");
    expect(r.message).toContain("npm install dockerode");
  });
});
