import { execFile } from "node:child_process";
import { promises as fs, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
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
    const entries = Object.keys(pkg.exports)
      .filter((k) => k !== "./package.json")
      .map((k) => (k === "." ? "agent-workspaces" : `agent-workspaces/${k.slice(2)}`));
    const out = await node(
      dir,
      `for (const e of ${JSON.stringify(entries)}) { const m = await import(e); if (!Object.keys(m).length) throw new Error(e + " exports nothing"); }
      const { DockerDriver } = await import("agent-workspaces/docker");
      const d = new DockerDriver({ socketPath: "/nonexistent.sock" });
      console.log(typeof d.docker.ping);`,
    );
    expect(out).toBe("function");
  });

  it("runs the adapter examples as written, from the installed package", async () => {
    const dir = await scratch("examples", Object.keys(pkg.peerDependencies));
    await fs.cp(path.join(ROOT, "examples"), path.join(dir, "examples"), { recursive: true });
    // tsx from this checkout runs the TypeScript; every import resolves from the app's node_modules.
    const tsx = pathToFileURL(path.join(ROOT, "node_modules", "tsx", "dist", "esm", "index.mjs")).href;
    for (const [file, answer] of [
      ["ai-sdk-agent.ts", "answer: Listed the skills and the workspace."],
      ["openai-agents-agent.ts", "answer: Loaded the skill and looked around."],
    ] as const) {
      const { OPENAI_API_KEY: _key, ...env } = process.env;
      const { stdout } = await run(process.execPath, ["--import", tsx, path.join("examples", file)], { cwd: dir, timeout: 120_000, env });
      expect({ file, answered: stdout.includes(answer) }).toEqual({ file, answered: true });
    }
  }, 300_000);

  it("without the peer, Local works and Docker says which package to install", async () => {
    const dir = await scratch("without-peer", []);
    const out = await node(
      dir,
      `const { LocalWorkspace } = await import("agent-workspaces/local");
      const root = await import("agent-workspaces");
      const { DockerDriver } = await import("agent-workspaces/docker");
      let message = "no error";
      try { new DockerDriver({}); } catch (e) { message = e.code + ": " + e.message; }
      console.log(JSON.stringify({ local: typeof LocalWorkspace, rootLocal: typeof root.LocalWorkspace, message }));`,
    );
    const r = JSON.parse(out) as { local: string; rootLocal: string; message: string };
    expect(r.local).toBe("function");
    expect(r.rootLocal).toBe("function");
    expect(r.message).toContain("unavailable:");
    expect(r.message).toContain("npm install dockerode");
  });

  describe("installed into an empty app with npm, no optional peers", () => {
    let app: string;
    const cli = (args: string[]) =>
      run("npx", ["--no-install", "agentws", ...args], { cwd: app, timeout: 60_000, env: { ...process.env, NO_COLOR: "1" } }).then(
        (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
        (e: { code?: number; stdout?: string; stderr?: string }) => ({ code: e.code ?? -1, out: e.stdout ?? "", err: e.stderr ?? "" }),
      );

    beforeAll(async () => {
      app = path.join(tmp, "installed");
      await fs.mkdir(app, { recursive: true });
      await fs.writeFile(path.join(app, "package.json"), JSON.stringify({ name: "installed", version: "1.0.0", type: "module", private: true }));
      // A real install (from npm's cache when it has every package): optional peers are not installed.
      await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", tarball], { cwd: app, timeout: 300_000 });
    }, 320_000);

    it("installs none of the optional peers", async () => {
      for (const peer of Object.keys(pkg.peerDependencies)) await expect(fs.stat(path.join(app, "node_modules", peer))).rejects.toThrow();
    });

    it("runs `agentws --help`, `--version` and every subcommand's --help", async () => {
      const help = await cli(["--help"]);
      expect(help.err).toBe("");
      expect(help.code).toBe(0);
      expect(help.out).toContain("Usage");
      const version = await cli(["--version"]);
      expect(version).toMatchObject({
        code: 0,
        out: `${(JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { version: string }).version}\n`,
      });
      // The "Commands:" section: one command per line, two spaces in.
      const section = help.out.split(/^Commands:\n/m)[1]!.split(/\n\n/)[0]!;
      const commands = [...section.matchAll(/^ {2}([a-z][a-z-]+)\b/gm)].map((m) => m[1]!).filter((c) => c !== "help");
      expect(commands).toEqual(
        expect.arrayContaining(["up", "preview", "refresh", "destroy", "outputs", "gc", "serve", "token", "status", "exec", "prune-images"]),
      );
      for (const command of commands) {
        const r = await cli([command, "--help"]);
        expect({ command, code: r.code, err: r.err }).toEqual({ command, code: 0, err: "" });
        expect(r.out).toContain(`agentws ${command}`);
      }
    });

    it("answers an unknown flag with one line naming it", async () => {
      const r = await cli(["status", "--no-such-flag"]);
      expect(r.code).not.toBe(0);
      expect(r.err).toContain("--no-such-flag");
      expect(r.err.trim().split("\n").length).toBeLessThanOrEqual(2);
      expect(r.err).not.toMatch(/\n\s+at /);
    });

    it("runs `agentws status` and names the package a skipped backend needs", async () => {
      const r = await cli(["status", "--json"]);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.out)).toBeInstanceOf(Array);
      expect(r.err).toContain("npm install dockerode");
    });

    it("imports every entry point; each backend and adapter that needs a package names it", async () => {
      const entries = Object.keys(pkg.exports)
        .filter((k) => k !== "./package.json")
        .map((k) => (k === "." ? "agent-workspaces" : `agent-workspaces/${k.slice(2)}`));
      const out = await node(
        app,
        `const loaded = {};
        for (const e of ${JSON.stringify(entries)}) loaded[e] = Object.keys(await import(e)).length;
        const { loadDriver } = await import("agent-workspaces");
        const specs = { docker: { kind: "docker" }, kubernetes: { kind: "kubernetes", image: "debian" }, opensandbox: { kind: "opensandbox", domain: "127.0.0.1:1" }, daytona: { kind: "daytona", apiKey: "k" }, e2b: { kind: "e2b", apiKey: "k" } };
        const missing = {};
        for (const [kind, spec] of Object.entries(specs)) {
          try { await (await loadDriver(spec)).list(); missing[kind] = "no error"; } catch (e) { missing[kind] = e.code + ": " + e.message; }
        }
        const { LocalWorkspace } = await import("agent-workspaces/local");
        const ws = new LocalWorkspace({ workdir: ${JSON.stringify(path.join(tmp, "adapter-ws"))} });
        await ws.initialize();
        for (const [entry, fn] of [["ai-sdk", "workspaceToolSet"], ["openai-agents", "workspaceTools"]]) {
          try { await (await import("agent-workspaces/" + entry))[fn](ws, { sessionId: "s1" }); missing[entry] = "no error"; } catch (e) { missing[entry] = e.code + ": " + e.message; }
        }
        await ws.close();
        console.log(JSON.stringify({ loaded, missing }));`,
      );
      const r = JSON.parse(out.split("\n").pop()!) as { loaded: Record<string, number>; missing: Record<string, string> };
      for (const [entry, count] of Object.entries(r.loaded)) expect({ entry, exports: count > 0 }).toEqual({ entry, exports: true });
      const expected: Record<string, string> = {
        docker: "dockerode",
        kubernetes: "@kubernetes/client-node",
        opensandbox: "@alibaba-group/opensandbox",
        daytona: "@daytonaio/sdk",
        e2b: "e2b",
        "ai-sdk": "ai",
        "openai-agents": "@openai/agents",
      };
      for (const [what, peer] of Object.entries(expected))
        expect({ what, message: r.missing[what] }).toEqual({ what, message: expect.stringContaining(`npm install ${peer}\``) });
    });

    it("type-checks a root-only import with skipLibCheck false", async () => {
      // The app's own TypeScript and Node types, as an app would have them.
      for (const dep of ["typescript", "@types/node"]) {
        await fs.mkdir(path.dirname(path.join(app, "node_modules", dep)), { recursive: true });
        await fs.symlink(await fs.realpath(path.join(ROOT, "node_modules", dep)), path.join(app, "node_modules", dep)).catch(() => undefined);
      }
      await fs.writeFile(
        path.join(app, "tsconfig.json"),
        JSON.stringify({
          compilerOptions: {
            target: "ES2022",
            module: "NodeNext",
            moduleResolution: "NodeNext",
            strict: true,
            skipLibCheck: false,
            noEmit: true,
            types: ["node"],
          },
          files: ["app.ts"],
        }),
      );
      await fs.writeFile(
        path.join(app, "app.ts"),
        `import { LocalWorkspace, WorkspaceError, type Workspace } from "agent-workspaces";\nconst ws: Workspace = new LocalWorkspace({ workdir: "/tmp/x" });\nconsole.log(ws, WorkspaceError);\n`,
      );
      const r = await run(process.execPath, [path.join(app, "node_modules", "typescript", "bin", "tsc"), "-p", app], { cwd: app, timeout: 120_000 }).then(
        () => "",
        (e: { stdout?: string }) => e.stdout ?? "failed",
      );
      expect(r).toBe("");
    }, 130_000);
  });
});
