import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, CommanderError, InvalidArgumentError as UsageError, Option } from "commander";
import type { BackendCommand } from "../contract/module.js";
import { backendCommands } from "../backends/load.js";
import { CONNECTION_FLAGS, LIMIT_FLAGS, parsePort, serveCommand, type ServeCommandOptions, tokenCreateCommand, tokenListCommand } from "./serve.js";
import { tokenRevokeCommand } from "./serve.js";
import { stackCommand, type StackCommand, type StackCommandOptions } from "./stack-commands.js";
import { execCommand, gcCommand, statusCommand } from "./workspaces.js";

/** The package's version: the nearest package.json above this file (sdk/cli/ in the repo, dist/sdk/cli/ installed). */
function packageVersion(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); dir !== dirname(dir); dir = dirname(dir)) {
    const file = join(dir, "package.json");
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string };
    if (pkg.name === "agent-workspaces" && pkg.version) return pkg.version;
  }
  return "unknown";
}

const DESCRIPTION = "Provision agent workspaces with Pulumi (no language host needed) and serve them over HTTP.";
const NOTES = `
Stack state: $PULUMI_BACKEND_URL, else Pulumi.yaml's backend.url, else <project>/.agentws/state
(the same for every command). Progress goes to stderr; markdown, JSON and outputs to stdout.
Every command has its own help: agentws <command> --help.
`;

const camel = (flag: string) => flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

/** Repeatable options collect their values in order (`--target a --target b`). */
const collect = (value: string, previous: string[] = []) => [...previous, value];

/** `--port` through the same check as AGENTWS_PORT, as a usage error (one line, exit 1). */
function portArg(value: string): number {
  try {
    return parsePort(value);
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message.replace(/^--port: /, "") : String(e));
  }
}

function positiveSeconds(value: string): number {
  const n = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || !(n > 0)) throw new UsageError("must be a number of seconds above 0");
  return n;
}

const examples = (lines: string[]) => `\nExamples:\n${lines.map((l) => `  $ ${l}`).join("\n")}\n`;

/**
 * `agentws`: the CLI. Commander parses and validates every command's options and writes each
 * command's help; a command's own failure is one line on stderr and a non-zero exit, never a stack.
 * Returns the exit code (the bin sets it), so tests can run it in-process.
 */
export async function main(argv: string[]): Promise<number> {
  let code = 0;
  const run = (name: string, fn: () => Promise<number>) => async () => {
    try {
      code = await fn();
    } catch (e) {
      process.stderr.write(`agentws ${name} failed: ${e instanceof Error ? e.message : String(e)}\n`);
      code = 1;
    }
  };

  const program = new Command("agentws")
    .description(DESCRIPTION)
    .version(packageVersion(), "-V, --version", "print the version")
    .helpOption("-h, --help", "show help")
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({ writeOut: (s) => void process.stdout.write(s), writeErr: (s) => void process.stderr.write(s) });
  program.addHelpText("after", NOTES + examples(["agentws up --stack local", "agentws serve", "agentws token create alice --expires 30d", "agentws status"]));

  const stackOptions = (cmd: Command) =>
    cmd
      .option("-s, --stack <name>", "stack name (default: $AGENTWS_STACK, else local)")
      .option("--cwd <dir>", "the Pulumi project folder (default: the current folder)");
  const stackCmd = (name: StackCommand, description: string, extra: (c: Command) => Command, help: string[]) => {
    const cmd = extra(stackOptions(program.command(name).description(description)));
    cmd.addHelpText("after", examples(help));
    cmd.action((opts: StackCommandOptions) => run(name, () => stackCommand(name, opts))());
  };
  const targets = (c: Command) => c.option("--target <urn>", "limit the operation to this resource (repeatable)", collect);
  const replaces = (c: Command) => c.option("--replace <workspaceId>", "replace this workspace even if unchanged (repeatable)", collect);

  stackCmd(
    "up",
    "provision the stack's fleet (creates the stack if it does not exist; previews first)",
    (c) =>
      replaces(targets(c))
        .option("--skip-preview", "skip the preview that checks inputs before anything changes")
        .option("--refresh", "refresh state from the backends first")
        .option("--allow-data-loss", "apply changes that delete workspace files"),
    ["agentws up", "agentws up --stack dev --replace ws-1"],
  );
  stackCmd(
    "preview",
    "show what `up` would change (text, --diff, or a pull-request comment with --markdown)",
    (c) =>
      replaces(targets(c))
        .option("--diff", "print Pulumi's diff and a summary")
        .option("--markdown", "print a markdown comment for a pull request")
        .option("--out <file>", "write the markdown to this file instead of stdout")
        .option("--from-json <file>", "render a `pulumi preview --json` document ('-': stdin) instead of running one")
        .option("--expect-no-changes", "fail when the preview has changes")
        .option("--refresh", "refresh state from the backends first")
        .option("--allow-data-loss", "plan changes that delete workspace files as allowed"),
    ["agentws preview --markdown --out preview.md", "pulumi preview --json | agentws preview --markdown --from-json -"],
  );
  stackCmd("refresh", "reconcile the stack's state with what the backends hold", (c) => c, ["agentws refresh --stack dev"]);
  stackCmd("destroy", "remove every workspace of the stack (files too with agentws:deleteData)", (c) => c.option("-y, --yes", "confirm"), [
    "agentws destroy --stack dev --yes",
  ]);
  stackCmd("outputs", "print the stack's outputs as JSON (secrets masked)", (c) => c, ["agentws outputs --stack local"]);

  program
    .command("serve")
    .description("serve the stack's fleet over HTTP: sessions, workspace routes, an MCP endpoint per session, /openapi.json, /metrics")
    .option("-s, --stack <name>", "stack whose fleet is served (default: $AGENTWS_STACK, else local; a missing default stack serves no fleet)")
    .option("--no-stack", "serve without reading a stack")
    .option("--cwd <dir>", "the Pulumi project folder (default: the current folder)")
    .option("--backend <kind>", "the backend of runtime workspaces (default: the fleet's, else local)")
    .option("--basedir <dir>", "where runtime workspaces live on host-folder backends")
    .option("--store <file|url>", "session store: a SQLite file or postgres:// URL (default: $AGENTWS_STORE, else ~/.agent-workspaces/service/sessions.db)")
    .option("--tokens <file>", "a token file of hashed bearer tokens, besides the store's")
    .option("-p, --port <port>", "TCP port, 0 for any free one (default: $AGENTWS_PORT, else 8787)", portArg)
    .option("--host <address>", "address to listen on (default: 127.0.0.1)")
    .option("--egress-allow <host|ip|cidr[:port]>", "let the service reach this private address (repeatable; also $AGENTWS_EGRESS_ALLOW)", collect)
    .option("--egress-allow-private", "let the service reach every private address")
    .option("--allowed-host <name>", "a Host name the MCP endpoint accepts besides loopback (repeatable; also $AGENTWS_ALLOWED_HOSTS)", collect)
    .option("--allowed-origin <origin>", "an Origin the MCP endpoint accepts (repeatable; also $AGENTWS_ALLOWED_ORIGINS)", collect)
    .option("--max-connections <n>", "open connections at most; more are closed at once (default 1024)")
    .option("--headers-timeout <seconds>", "a client must send its request headers within this (default 20)")
    .option("--keep-alive-timeout <seconds>", "an idle kept-alive connection is closed after this (default 65)")
    .option("--min-body-rate <bytes-per-second>", "a request body slower than this (over 10 s) is cut (default 16384)")
    .option("--rate-limit <n>", "requests per second of one user (default 100; also $AGENTWS_RATE_LIMIT; 0: off)")
    .option("--rate-burst <n>", "requests one user may send at once above the rate (default 200)")
    .option("--global-rate-limit <n>", "requests per second of all users together (default 2000)")
    .option("--global-rate-burst <n>", "burst of the global rate (default 4000)")
    .option("--max-sessions-per-user <n>", "sessions one user may have stored (default 1000)")
    .option("--max-live-workspaces-per-user <n>", "workspaces one user may have open (default 20)")
    .option("--max-live-workspaces <n>", "workspaces open in all (default 200)")
    .addHelpText(
      "after",
      examples([
        "agentws serve",
        "agentws serve --backend bubblewrap --port 9000",
        "agentws serve --no-stack --store postgres://svc@db/agentws --host 0.0.0.0",
      ]),
    )
    .action((opts: Omit<ServeCommandOptions, "stack"> & { stack?: string | boolean }) =>
      run("serve", () =>
        serveCommand({
          ...opts,
          stack: typeof opts.stack === "string" ? opts.stack : undefined,
          useStack: opts.stack !== false,
          limits: Object.fromEntries(Object.keys(LIMIT_FLAGS).map((f) => [f, (opts as Record<string, unknown>)[camel(f)] as string | undefined])),
          connections: Object.fromEntries(CONNECTION_FLAGS.map((f) => [f, (opts as Record<string, unknown>)[camel(f)] as string | undefined])),
        }),
      )(),
    );

  const token = program
    .command("token")
    .description("bearer tokens in the session store: create (printed once, only its hash is kept), list, revoke")
    .addHelpText(
      "after",
      examples([
        "agentws token create alice --scopes read,write --expires 30d --name laptop",
        "agentws token list alice",
        "agentws token revoke tok_3f9a0c1e5b7d2a46",
      ]),
    );
  const storeOption = (c: Command) => c.option("--store <file|url>", "session store (default: $AGENTWS_STORE, else ~/.agent-workspaces/service/sessions.db)");
  storeOption(
    token
      .command("create", { isDefault: true })
      .description("a new token for a user (`agentws token <userId>` is the same)")
      .argument("<userId>", "the user the token acts as"),
  )
    .option("--scopes <list>", "comma-separated: read, write, admin", "read,write")
    .option("--expires <duration>", "30d, 12h, 90m, 2w, or never", "never")
    .option("--name <name>", "a label shown by `token list`")
    .action((user: string, opts: Parameters<typeof tokenCreateCommand>[1]) => run("token", () => tokenCreateCommand(user, opts))());
  storeOption(token.command("list").description("live tokens as JSON (never a hash)").argument("[userId]", "only this user's")).action(
    (user: string | undefined, opts: Parameters<typeof tokenListCommand>[1]) => run("token", () => tokenListCommand(user, opts))(),
  );
  storeOption(
    token.command("revoke").description("revoke a token: refused from the next request on").argument("<tokenId>", "the token's id (tok_…), from `token list`"),
  ).action((id: string, opts: Parameters<typeof tokenRevokeCommand>[1]) => run("token", () => tokenRevokeCommand(id, opts))());

  const kinds = (c: Command) => c.option("--kind <kind>", "only this backend kind (repeatable; default: every kind that runs here)", collect);
  kinds(program.command("status").description("workspaces on every backend: state, owner, agent, idle time"))
    .option("--basedir <dir>", "the runtime basedir of host-folder backends")
    .option("--json", "print JSON")
    .addHelpText("after", examples(["agentws status", "agentws status --kind docker --json"]))
    .action((opts: Parameters<typeof statusCommand>[0]) => run("status", () => statusCommand(opts))());
  kinds(program.command("exec").description("run a command in a workspace on whichever backend holds it (a paused one is resumed, then paused again)"))
    .argument("<workspaceId>", "the workspace")
    .argument("<command...>", "the command and its arguments, after --")
    .option("--basedir <dir>", "the runtime basedir of host-folder backends")
    .option("--timeout <seconds>", "kill the command after this long (default 600)", positiveSeconds)
    .addHelpText("after", examples(["agentws exec ws-1 -- ls -la", "agentws exec ws-1 --timeout 30 -- python3 -c 'print(1)'"]))
    .action((id: string, command: string[], opts: Parameters<typeof execCommand>[2]) => run("exec", () => execCommand(id, command, opts))());
  kinds(program.command("gc").description("runtime workspaces nobody owns (with --store: also those no session names); a dry run unless --yes"))
    .option("--basedir <dir>", "the runtime basedir of host-folder backends")
    .option("--store <file|url>", "the service's session store")
    .option("-y, --yes", "remove them, with their files")
    .option("--dry-run", "only list them (the default)")
    .addHelpText("after", examples(["agentws gc", "agentws gc --store ~/.agent-workspaces/service/sessions.db --yes"]))
    .action((opts: Parameters<typeof gcCommand>[0]) => run("gc", () => gcCommand(opts))());

  for (const { command } of await backendCommands()) addBackendCommand(program, command, run);

  try {
    await program.parseAsync(argv, { from: "user" });
  } catch (e) {
    // Help, --version and usage errors: commander already wrote them (one line for an error).
    if (e instanceof CommanderError) return e.exitCode === 0 ? 0 : 2;
    throw e;
  }
  return code;
}

/** A backend's command (Docker's prune-images) with its declared options and help. */
function addBackendCommand(program: Command, command: BackendCommand, run: (name: string, fn: () => Promise<number>) => () => Promise<void>): void {
  const cmd = program.command(command.name).description(command.description);
  for (const [name, o] of Object.entries(command.options)) {
    const flags = o.type === "string" ? `--${name} <${(o.value ?? "value").toLowerCase()}>` : `--${name}`;
    cmd.addOption(o.multiple ? new Option(flags, o.help).argParser(collect) : new Option(flags, o.help));
  }
  if (command.examples?.length) cmd.addHelpText("after", examples([...command.examples]));
  cmd.action((opts: Record<string, string | boolean | string[] | undefined>) => {
    // Back to the option names the command declared (commander camel-cases them).
    const values: Record<string, string | boolean | string[] | undefined> = {};
    for (const name of Object.keys(command.options)) values[name] = opts[camel(name)];
    return run(command.name, () =>
      command.run(values, { stdout: (text) => process.stdout.write(text), stderr: (line) => process.stderr.write(`${line}\n`) }),
    )();
  });
}
