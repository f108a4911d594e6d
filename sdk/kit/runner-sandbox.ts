/**
 * The Sandbox of every backend that runs the in-sandbox runner, with the choice between the runner and
 * the plain fallback (an image without python3) made ONCE per handle: the first operation probes, and
 * from then on every method goes to the side chosen, with no per-method branch in a backend. A backend
 * says only how its runner starts (`probe`, `lease`) and how plain commands and files travel
 * (`plain()`: a PlainTransport, whose optional `capabilities` are native accelerators); the runner side
 * (RunnerFiles, runnerExec, spawnThroughRunner) and the plain side's generic fallbacks are written here.
 */
import { InvalidArgumentError } from "../errors.js";
import { checkRelativePath } from "../paths.js";
import { rangeOfWholeRead, type DirEntry, type ExecOptions, type ExecResult, type FileInfo, type ListPage } from "../sandbox.js";
import { type ListPageOptions, type Sandbox, type SandboxProcess, type SpawnOptions, type WalkTreeOptions, type WalkTreeResult } from "../sandbox.js";
import { pageOfEntries, walkTreeByList } from "../util/listing.js";
import { RunnerFiles, runnerExec, spawnThroughRunner, type RunnerClient, type RunnerLease } from "./runner/index.js";
import { copyTreeFileByFile } from "./shell-files.js";

/** The file operations every plain transport carries itself. */
export type PlainFiles = Pick<Sandbox, "readFile" | "writeFile" | "appendFile" | "list" | "stat" | "remove" | "mkdir" | "rename">;

/** Optional fast paths a plain transport may have natively (each falls back to the generic way built on PlainFiles). */
export type PlainCapabilities = Partial<Pick<Required<Sandbox>, "readRange" | "listPage" | "walkTree" | "readDirTyped" | "copyTree" | "createFile">>;

/** How commands, processes and files travel when the sandbox cannot run the runner (no python3). */
export interface PlainTransport {
  /** argv is not empty and `options.cwd` has passed checkRelativePath. */
  exec(argv: string[], options: ExecOptions): Promise<ExecResult>;
  /** One process of its own, in the checked workspace-relative `cwd`; may throw (no stdio processes on this backend). */
  spawn(argv: string[], cwd: string, options: SpawnOptions): SandboxProcess | Promise<SandboxProcess>;
  /** A host file or tree into the workspace at `to` (which must not exist). */
  copyIn(hostPath: string, to: string): Promise<void>;
  files: PlainFiles;
  capabilities?: PlainCapabilities;
}

/** Which side a handle's calls go to: "unknown" until the first call has found out. */
export type RunnerMode = "unknown" | "runner" | "plain";

type Side = PlainFiles & Required<PlainCapabilities> & Pick<Sandbox, "copyIn">;

const EMPTY_COMMAND: ExecResult = { exitCode: 127, stdout: Buffer.alloc(0), stderr: Buffer.from("empty command"), timedOut: false, truncated: false };

export abstract class RunnerSandbox implements Sandbox {
  abstract readonly kind: string;
  abstract readonly workdir: string;
  abstract readonly persistent: boolean;
  /** The runner's file operations: every path resolved inside the sandbox, descriptor-relative. */
  protected readonly runnerFiles: RunnerFiles = new RunnerFiles(() => this.lease("call"));
  #mode: RunnerMode = "unknown";
  #probing: Promise<boolean> | undefined;
  #plain: { transport: PlainTransport; side: Side } | undefined;

  /**
   * Starts (or finds) the runner and waits for its hello: true when it answered, false when the sandbox
   * cannot run one (no python3; the backend says so once in its log). A throw leaves the choice open:
   * the backend refused (paused, gone), and the next call probes again. Called once per handle.
   */
  protected abstract probe(): Promise<boolean>;
  /** The live runner for one call, or for a spawned process (`use` "spawn": it may live as long as the handle). */
  protected abstract lease(use: "call" | "spawn"): Promise<RunnerLease>;
  /** How plain commands and files travel; asked once, on the first plain call. */
  protected abstract plain(): PlainTransport;

  /** Runs as every operation starts (a keep-alive, a closed handle's refusal). */
  protected enter(): void {}
  /** Wraps every runner file call; `idempotent` when repeating it changes nothing (a read, a listing). */
  protected guard<T>(call: () => Promise<T>, _idempotent: boolean): Promise<T> {
    return call();
  }
  /** Looks at a command's result through the runner (a backend may turn a runner lost under it into its own error). */
  protected checkRunnerExec(_r: ExecResult, _client: RunnerClient): void {}
  /** What a command with an empty argv gives (exit 127, like a shell). */
  protected emptyCommand(): ExecResult {
    return { ...EMPTY_COMMAND };
  }

  /** Whether calls go through the runner ("plain" after a sandbox without python3 refused it). */
  get runnerMode(): RunnerMode {
    return this.#mode;
  }

  /** Settles the choice from outside a probe (a runner adopted, a plain-only handle, a gateway found gone). */
  protected decide(mode: "runner" | "plain"): void {
    this.#mode = mode;
  }

  /** Whether this handle's calls go through the runner; the first call finds out, concurrent first calls share one probe. */
  protected useRunner(): boolean | Promise<boolean> {
    if (this.#mode !== "unknown") return this.#mode === "runner";
    this.#probing ??= this.probe()
      .then((runner) => {
        this.#mode = runner ? "runner" : "plain";
        return runner;
      })
      .finally(() => (this.#probing = undefined));
    return this.#probing;
  }

  async exec(argv: string[], options: ExecOptions = {}): Promise<ExecResult> {
    if (argv.length === 0) return this.emptyCommand();
    checkRelativePath(options.cwd ?? "", "cwd");
    this.enter();
    if (!(await this.useRunner())) return this.#transport().exec(argv, options);
    const lease = await this.lease("call");
    try {
      const r = await runnerExec(lease.client, argv, options, {});
      this.checkRunnerExec(r, lease.client);
      return r;
    } finally {
      lease.release?.();
    }
  }

  /**
   * Through the runner: the process's stdio streams over the runner's channel (no transport of its own),
   * its cwd resolved inside the sandbox; it dies with the runner at close(). On the plain side, the
   * transport's own process.
   */
  spawn(argv: string[], options: SpawnOptions = {}): SandboxProcess {
    if (argv.length === 0) throw new InvalidArgumentError("spawn: argv must not be empty", { field: "argv", fieldPrefix: false });
    const rel = checkRelativePath(options.cwd ?? "", "cwd");
    this.enter();
    const open = async (): Promise<RunnerLease | SandboxProcess> =>
      (await this.useRunner()) ? this.lease("spawn") : this.#transport().spawn(argv, rel, options);
    return spawnThroughRunner(open(), { argv, cwd: rel, env: { ...options.env } });
  }

  readFile(rel: string, options?: { maxBytes?: number }): Promise<Buffer> {
    return this.#call((s) => s.readFile(rel, options), true);
  }
  writeFile(rel: string, data: Uint8Array | string, options?: { mode?: number; exclusive?: boolean }): Promise<void> {
    return this.#call((s) => s.writeFile(rel, data, options), false);
  }
  appendFile(rel: string, data: Uint8Array | string): Promise<void> {
    return this.#call((s) => s.appendFile(rel, data), false);
  }
  list(rel: string): Promise<FileInfo[]> {
    return this.#call((s) => s.list(rel), true);
  }
  stat(rel: string): Promise<FileInfo | null> {
    return this.#call((s) => s.stat(rel), true);
  }
  remove(rel: string): Promise<void> {
    return this.#call((s) => s.remove(rel), true);
  }
  mkdir(rel: string): Promise<void> {
    return this.#call((s) => s.mkdir(rel), true);
  }
  rename(from: string, to: string): Promise<void> {
    return this.#call((s) => s.rename(from, to), false);
  }
  copyIn(hostPath: string, to: string): Promise<void> {
    return this.#call((s) => s.copyIn(hostPath, to), false);
  }
  /** A piece of a file of any size: read from its offset by the runner (plain: natively, else cut from a capped whole read). */
  readRange(rel: string, offset: number, length: number): Promise<Buffer> {
    return this.#call((s) => s.readRange(rel, offset, length), true);
  }
  /** One page of a folder: cut inside the sandbox by the runner (plain: from a full listing). */
  listPage(rel: string, options?: ListPageOptions): Promise<ListPage> {
    return this.#call((s) => s.listPage(rel, options), true);
  }
  /** The tree below a folder: one runner call (plain: a listing per folder). */
  walkTree(rel: string, options: WalkTreeOptions): Promise<WalkTreeResult> {
    return this.#call((s) => s.walkTree(rel, options), true);
  }
  /** Names and types of a folder's entries in one runner call (a list without the per-entry stat). */
  readDirTyped(rel: string): Promise<DirEntry[]> {
    return this.#call((s) => s.readDirTyped(rel), true);
  }
  /** Copies a workspace folder in one runner call (plain: file by file). */
  copyTree(from: string, to: string, options?: { exclude?: (name: string) => boolean }): Promise<void> {
    return this.#call((s) => s.copyTree(from, to, options), false);
  }
  /** Exclusive create without writeFile's temp file, in one runner call (plain: an exclusive writeFile). */
  createFile(rel: string, data: Uint8Array | string): Promise<void> {
    return this.#call((s) => s.createFile(rel, data), false);
  }

  abstract close(): Promise<void>;

  /** One file operation on the side chosen (the runner's through `guard`). */
  async #call<T>(op: (side: Side) => Promise<T>, idempotent: boolean): Promise<T> {
    this.enter();
    const runner = this.#mode === "unknown" ? await this.useRunner() : this.#mode === "runner";
    return runner ? this.guard(() => op(this.runnerFiles), idempotent) : op(this.#plainSide());
  }

  #transport(): PlainTransport {
    this.#plainSide();
    return this.#plain!.transport;
  }

  /** The plain side, once: the transport's files, its native capabilities, the generic fallbacks for the rest. */
  #plainSide(): Side {
    if (this.#plain) return this.#plain.side;
    const t = this.plain();
    const f = t.files;
    const c = t.capabilities ?? {};
    // Fallbacks go through this handle's own methods, as a caller's would.
    const side: Side = {
      readFile: (rel, o) => f.readFile(rel, o),
      writeFile: (rel, data, o) => f.writeFile(rel, data, o),
      appendFile: (rel, data) => f.appendFile(rel, data),
      list: (rel) => f.list(rel),
      stat: (rel) => f.stat(rel),
      remove: (rel) => f.remove(rel),
      mkdir: (rel) => f.mkdir(rel),
      rename: (from, to) => f.rename(from, to),
      copyIn: (hostPath, to) => t.copyIn(hostPath, to),
      readRange: c.readRange?.bind(c) ?? ((rel, offset, length) => rangeOfWholeRead(this, rel, offset, length)),
      listPage: c.listPage?.bind(c) ?? (async (rel, o) => pageOfEntries(await this.list(rel), o)),
      walkTree: c.walkTree?.bind(c) ?? ((rel, o) => walkTreeByList(this, rel, o)),
      readDirTyped: c.readDirTyped?.bind(c) ?? (async (rel) => (await this.list(rel)).map((e) => ({ name: e.name, type: e.type }))),
      copyTree: c.copyTree?.bind(c) ?? ((from, to, o) => copyTreeFileByFile(this, from, to, o)),
      createFile: c.createFile?.bind(c) ?? ((rel, data) => this.writeFile(rel, data, { exclusive: true })),
    };
    this.#plain = { transport: t, side };
    return side;
  }
}
