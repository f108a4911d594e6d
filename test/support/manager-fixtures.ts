import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import type { EnsureOutcome } from "../../sdk/contract/driver.js";
import { LocalSandbox } from "../../sdk/kit/host-sandbox.js";
import type { ManagedIdentity, ManagedWorkspace } from "../../sdk/manager/index.js";

/**
 * A small ManagedWorkspace over a real host folder (LocalSandbox), for testing the manager
 * without the full Workspace facade. Hooks let a test hold initialize() or close() open.
 */
export class FolderWorkspace implements ManagedWorkspace {
  readonly workspaceId: string;
  readonly identity: ManagedIdentity;
  readonly sandbox: LocalSandbox;
  #inFlight = 0;
  #last = Date.now();
  alive = false;
  closed = false;
  initializeCalls = 0;
  /** Like a pausing backend: "resumed" when the folder was there already, else "created". */
  ensureOutcome: EnsureOutcome | undefined;

  constructor(
    identity: ManagedIdentity,
    root: string,
    readonly hooks: { beforeInitialize?: () => Promise<void>; beforeClose?: () => Promise<void> } = {},
  ) {
    this.identity = identity;
    this.workspaceId = identity.workspaceId;
    this.sandbox = new LocalSandbox(root);
  }

  get inFlight(): number {
    return this.#inFlight;
  }
  get lastActivityAt(): number {
    return this.#last;
  }
  touch(): void {
    this.#last = Date.now();
  }
  async initialize(): Promise<void> {
    this.initializeCalls++;
    await this.hooks.beforeInitialize?.();
    const existed = await fs.stat(this.sandbox.workdir).then(
      () => true,
      () => false,
    );
    await this.sandbox.mkdir("");
    this.ensureOutcome = existed ? "resumed" : "created";
    this.alive = true;
  }
  async close(): Promise<void> {
    await this.hooks.beforeClose?.();
    this.alive = false;
    this.closed = true;
  }

  /** Runs an operation the way Workspace.track does: busy while it runs, activity at both ends. */
  async track<T>(fn: () => Promise<T>): Promise<T> {
    if (!this.alive) throw new Error(`workspace ${this.workspaceId} is closed`);
    this.#inFlight++;
    this.#last = Date.now();
    try {
      return await fn();
    } finally {
      this.#inFlight--;
      this.#last = Date.now();
    }
  }

  writeFile(rel: string, data: string | Uint8Array): Promise<void> {
    return this.track(() => this.sandbox.writeFile(rel, data));
  }
}

/** sha256 of every file under root, keyed by relative path. */
export async function checksums(root: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  async function walk(dir: string): Promise<void> {
    for (const e of await fs.readdir(dir, { withFileTypes: true })) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) await walk(full);
      else if (e.isFile())
        out[path.relative(root, full)] = createHash("sha256")
          .update(await fs.readFile(full))
          .digest("hex");
    }
  }
  await walk(root);
  return out;
}

export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
