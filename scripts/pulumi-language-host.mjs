#!/usr/bin/env node
// A minimal `pulumi-language-nodejs` for CLIs built from Go modules, where the real Node language
// host cannot be built (the Go proxy refuses its module). It serves Pulumi's LanguageRuntime gRPC
// service with the Automation API's in-process LanguageServer from the project's @pulumi/pulumi,
// running Pulumi.yaml's `main` (compiled JS; its default export may be a function returning the
// stack outputs). No dependency installs, no TypeScript, no plugins: enough for `pulumi up`,
// `preview`, `refresh` and `destroy` of programs like this project's stacks. A real Pulumi
// install brings its own host and never uses this one.
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";

const VERSION = "0.1.0-agentws";

// The engine address is the one positional argument; Go-style flags (-root=x, -tracing x) are ignored.
const FLAGS_WITH_VALUE = new Set(["-root", "--root", "-tracing", "--tracing", "-binary", "--binary", "-nodeargs", "--nodeargs"]);
const positionals = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a.startsWith("-")) {
    if (!a.includes("=") && FLAGS_WITH_VALUE.has(a)) i++;
    continue;
  }
  positionals.push(a);
}
const engineAddress = positionals[positionals.length - 1] || "";

function fail(message) {
  process.stderr.write(`pulumi-language-nodejs (agent-workspaces): ${message}\n`);
  process.exit(1);
}

let pulumiDir;
try {
  pulumiDir = path.dirname(createRequire(path.join(process.cwd(), "noop.js")).resolve("@pulumi/pulumi/package.json"));
} catch {
  fail(`@pulumi/pulumi is not installed under ${process.cwd()}; run \`npm ci\` in the project`);
}
const preq = createRequire(path.join(pulumiDir, "index.js"));
const grpc = preq("@grpc/grpc-js");
const langrpc = preq("./proto/language_grpc_pb");
const langproto = preq("./proto/language_pb");
const plugproto = preq("./proto/plugin_pb");
const { LanguageServer } = preq("./automation/server");

/** Pulumi.yaml `main` may be a file or a folder (then its package.json main, else index.js). */
function resolveMain(programDir, entryPoint) {
  let p = path.resolve(programDir, entryPoint || ".");
  if (fs.existsSync(p) && fs.statSync(p).isDirectory()) {
    const pkg = path.join(p, "package.json");
    const main = fs.existsSync(pkg) ? JSON.parse(fs.readFileSync(pkg, "utf8")).main : undefined;
    p = path.resolve(p, main || "index.js");
  }
  if (!fs.existsSync(p)) throw new Error(`program ${p} not found (Pulumi.yaml main); build it first (npm run build)`);
  if (/\.(ts|mts|cts)$/.test(p))
    throw new Error(`program ${p} is TypeScript; this minimal host runs compiled JS only (point Pulumi.yaml main at the build output)`);
  return p;
}

class Host extends LanguageServer {
  constructor() {
    super(undefined);
  }

  run(call, callback) {
    const req = call.request;
    const info = req.getInfo();
    const pwd = req.getPwd() || process.cwd();
    const programDir = (info && info.getProgramDirectory()) || pwd;
    const entryPoint = (info && info.getEntryPoint()) || req.getProgram() || ".";
    let main;
    try {
      main = resolveMain(programDir, entryPoint);
    } catch (e) {
      const resp = new langproto.RunResponse();
      resp.setError(e.message);
      return callback(undefined, resp);
    }
    // Like Pulumi's own getPwdMain: a program given as a file runs from the project root (so paths
    // in stack config are project-relative); a program folder runs from that folder.
    const root = info && info.getRootDirectory();
    const mainIsFolder = fs.existsSync(path.resolve(programDir, entryPoint)) && fs.statSync(path.resolve(programDir, entryPoint)).isDirectory();
    process.chdir(!mainIsFolder && root ? root : pwd);
    this.program = async () => {
      const mod = await import(pathToFileURL(main).href);
      if (typeof mod.default === "function") return await mod.default();
      const { default: _ignored, ...named } = mod;
      return named;
    };
    // LanguageServer reads the engine address from the request's args (inline mode); here it came on argv.
    const request = Object.create(req);
    request.getArgsList = () => [engineAddress];
    return super.run({ request }, callback);
  }

  handshake(_call, callback) {
    callback(undefined, new langproto.LanguageHandshakeResponse());
  }

  getRequiredPackages(_call, callback) {
    const resp = new langproto.GetRequiredPackagesResponse();
    resp.setPackagesList([]);
    callback(undefined, resp);
  }

  getPluginInfo(_call, callback) {
    const resp = new plugproto.PluginInfo();
    resp.setVersion(VERSION);
    callback(undefined, resp);
  }

  about(_call, callback) {
    const resp = new langproto.AboutResponse();
    resp.setExecutable(process.execPath);
    resp.setVersion(process.version);
    callback(undefined, resp);
  }

  getProgramDependencies(_call, callback) {
    const resp = new langproto.GetProgramDependenciesResponse();
    resp.setDependenciesList([]);
    callback(undefined, resp);
  }

  installDependencies(call) {
    // Dependencies are the project's own business (`npm ci`); nothing to stream.
    call.end();
  }
}

const server = new grpc.Server({ "grpc.max_receive_message_length": 400 * 1024 * 1024 });
server.addService(langrpc.LanguageRuntimeService, new Host());
server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) fail(err.message);
  process.stdout.write(`${port}\n`);
});
