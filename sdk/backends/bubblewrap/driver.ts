// Size: a bwrap workspace's whole lifecycle on the host (hashed folders, index records with the identity
// labels, owner claims, per-workspace package installs run in bwrap), one driver like the other kinds'.
import { spawn as spawnChild } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ConflictError, NotFoundError, UnavailableError, fromZodError, InternalError, ProvisionFailedError } from "../../errors.js";
import { matchesSelector, type BackendDescription, type DestroyOptions, type Driver, type DriverContext } from "../../contract/driver.js";
import { type ListSelector, type ManagedBy, type WorkspaceIdentity } from "../../contract/driver.js";
import { recordNames } from "../../kit/list.js";
import { HostRecordStore, ownerConflict, readClaim, readJsonFile, recordClaim } from "../../kit/owner-store.js";
import { WORKSPACE_ID_PATTERN, parseWorkspaceId } from "../../contract/schema.js";
import { BubblewrapBackendSchema, type BubblewrapBackendSpec } from "./schema.js";
import type { FileLeases } from "../../kit/lease.js";
import { bubblewrapLeases } from "./lease.js";
import { BubblewrapSandbox, BWRAP_ENV_MOUNT, BWRAP_WORKDIR } from "./sandbox.js";
import { assertInside, ephemeralBasedir, hashedName, mkdirPrivate } from "./paths.js";
import { BWRAP_HOST_ENV, resolveBwrap } from "./launch.js";

/** What the driver records per workspace (the "backend object" of a host-folder backend). */
interface IndexRecord {
  workspaceId: string;
  userId?: string | undefined;
  agentId?: string | undefined;
  managedBy: ManagedBy;
  tags: Record<string, string>;
  /** Folder relative to basedir: <h(user)>/<h(workspace)>. */
  folder: string;
  createdAt: string;
}

let probe: Promise<void> | undefined;

/**
 * Bubblewrap lifecycle: a per-workspace host folder under `basedir` (named from hashed ids, 0700,
 * checked not to escape basedir) plus an index record carrying the identity labels. There is no
 * long-lived process to pause: pause and resume are no-ops, and every exec is a fresh bwrap.
 */
export class BubblewrapDriver implements Driver {
  readonly kind = "bubblewrap";
  readonly spec: BubblewrapBackendSpec;
  readonly persistent: boolean;
  readonly #basedir: string;
  readonly leases: FileLeases;

  constructor(spec: Partial<BubblewrapBackendSpec> = {}) {
    const parsed = BubblewrapBackendSchema.safeParse({ kind: "bubblewrap", ...spec });
    if (!parsed.success) throw fromZodError("backend", parsed.error);
    this.spec = parsed.data;
    this.persistent = this.spec.basedir !== undefined;
    this.#basedir = path.resolve(this.spec.basedir ?? ephemeralBasedir());
    this.leases = bubblewrapLeases(this.#basedir);
  }

  get basedir(): string {
    return this.#basedir;
  }

  async create(identity: WorkspaceIdentity, ctx: DriverContext = {}): Promise<BackendDescription> {
    const id = parseWorkspaceId(identity.workspaceId);
    await ensureBwrap();
    const existing = await this.find(id);
    if (existing) return existing;
    await mkdirPrivate(this.#basedir);
    const userDir = path.join(this.#basedir, hashedName(identity.userId ?? ""));
    // Check each level before creating below it: a symlinked user folder must not get a child outside.
    await mkdirPrivate(userDir);
    await assertInside(this.#basedir, userDir, "user folder");
    const folder = `${hashedName(identity.userId ?? "")}/${hashedName(id)}`;
    const host = path.join(this.#basedir, folder);
    await mkdirPrivate(host);
    await assertInside(this.#basedir, host, "workspace folder");
    const record: IndexRecord = {
      workspaceId: id,
      userId: identity.userId,
      agentId: identity.agentId,
      managedBy: identity.managedBy,
      tags: identity.tags ?? {},
      folder,
      createdAt: new Date().toISOString(),
    };
    // Two racing creators write the same record to the same deterministic folder: one workspace.
    await writeAtomic(this.#indexPath(id), JSON.stringify(record, null, 2));
    ctx.logger?.info("bubblewrap workspace folder created", { workspaceId: id, hostPath: host });
    try {
      await this.#ensurePackages(id, ctx);
    } catch (e) {
      // An ephemeral workspace that could not be set up is nobody's: remove its folder and record.
      if (!this.persistent) await this.destroy(id, { deleteData: true }).catch(() => undefined);
      throw e;
    }
    return this.#describe(record);
  }

  async find(workspaceId: string): Promise<BackendDescription | null> {
    const record = await this.#read(parseWorkspaceId(workspaceId));
    if (!record) return null;
    const host = path.join(this.#basedir, record.folder);
    if (!(await fs.stat(host).catch(() => null))?.isDirectory()) return null;
    // The owner recorded at create time, else a warm-pool claim (both beside the sandbox's folder, out of its reach).
    if (record.userId !== undefined) return this.#describe(record);
    const claim = await readClaim(this.#claims, hashedName(record.workspaceId), record.workspaceId);
    return this.#describe(claim ? { ...record, userId: claim.userId, agentId: record.agentId ?? claim.agentId } : record);
  }

  /** Records the owner of an unowned workspace (a warm-pool member handed to a user), once; another owner is a ConflictError. */
  async claimOwner(workspaceId: string, owner: { userId: string; agentId?: string | undefined }): Promise<void> {
    const id = parseWorkspaceId(workspaceId);
    const found = await this.find(id);
    if (!found) throw new NotFoundError(`bubblewrap workspace '${id}' not found`, { field: "workspaceId" });
    if (found.userId !== undefined) {
      if (found.userId !== owner.userId) throw ownerConflict(id);
      return;
    }
    await recordClaim(this.#claims, hashedName(id), id, owner);
  }

  get #claims(): HostRecordStore {
    return new HostRecordStore(path.join(this.#basedir, ".agentws", "claims"));
  }

  async pause(): Promise<void> {
    // Nothing runs between commands; spawned MCP servers are stopped by the workspace on close.
  }

  async resume(): Promise<void> {}

  async destroy(workspaceId: string, options: DestroyOptions = {}): Promise<void> {
    const id = parseWorkspaceId(workspaceId);
    const record = await this.#read(id);
    if (options.leftover) return this.#destroyLeftover(id, record, options);
    await this.#claims.remove(hashedName(id));
    await fs.rm(this.#indexPath(id), { force: true });
    // Without deleteData the folder stays: a later create adopts it (same deterministic name).
    if (record && (options.deleteData || !this.persistent)) {
      const host = path.join(this.#basedir, record.folder);
      if (await fs.lstat(host).catch(() => null)) await assertInside(this.#basedir, host, "workspace folder");
      await fs.rm(host, { recursive: true, force: true });
      await fs.rm(this.#envDir(id), { recursive: true, force: true });
      // The per-user folder, once its last workspace is gone.
      await fs.rmdir(path.dirname(host)).catch(() => undefined);
    }
    // Empty bookkeeping folders go too (recreated on the next create); rmdir never removes content.
    for (const sub of ["index", "claims", "env", "tmp"]) await fs.rmdir(path.join(this.#basedir, ".agentws", sub)).catch(() => undefined);
    await fs.rmdir(path.join(this.#basedir, ".agentws")).catch(() => undefined);
  }

  /**
   * The folder an earlier destroy kept (it removed the index record, left the files): with deleteData,
   * `<basedir>/<h(user)>/<h(id)>` for whichever user folder holds it (ids are unique per basedir) and
   * its env folder go, then empty user and bookkeeping folders. A live index record for the id means
   * a workspace uses it now: a ConflictError, nothing removed (an unreadable one failed in #read).
   */
  async #destroyLeftover(id: string, record: IndexRecord | null, options: DestroyOptions): Promise<void> {
    if (!options.deleteData || !this.persistent) return;
    if (record)
      throw new ConflictError(
        `bubblewrap workspace '${id}' is live again in ${this.#basedir} (record ${this.#indexPath(id)}); its folder ${path.join(this.#basedir, record.folder)} is not deleted`,
        {
          field: "backend.basedir",
          details: { folder: path.join(this.#basedir, record.folder) },
        },
      );
    const users = await fs.readdir(this.#basedir, { withFileTypes: true }).catch(() => []);
    for (const user of users) {
      if (!user.isDirectory() || user.name.startsWith(".")) continue;
      const host = path.join(this.#basedir, user.name, hashedName(id));
      if (!(await fs.lstat(host).catch(() => null))) continue;
      await assertInside(this.#basedir, host, "workspace folder");
      await fs.rm(host, { recursive: true, force: true });
      await fs.rmdir(path.dirname(host)).catch(() => undefined);
    }
    await fs.rm(this.#envDir(id), { recursive: true, force: true });
    await this.#claims.remove(hashedName(id));
    for (const sub of ["index", "claims", "env", "tmp"]) await fs.rmdir(path.join(this.#basedir, ".agentws", sub)).catch(() => undefined);
    await fs.rmdir(path.join(this.#basedir, ".agentws")).catch(() => undefined);
  }

  async updateTags(workspaceId: string, tags: Record<string, string>): Promise<void> {
    const id = parseWorkspaceId(workspaceId);
    const record = await this.#read(id);
    if (!record) throw new NotFoundError(`bubblewrap workspace '${id}' not found`, { field: "workspaceId" });
    await writeAtomic(this.#indexPath(id), JSON.stringify({ ...record, tags }, null, 2));
  }

  async connect(workspaceId: string, ctx: DriverContext = {}): Promise<BubblewrapSandbox> {
    const id = parseWorkspaceId(workspaceId);
    await ensureBwrap();
    const record = await this.#read(id);
    if (!record) throw new NotFoundError(`bubblewrap workspace '${id}' (create it first) not found`, { field: "workspaceId" });
    const host = await assertInside(this.#basedir, path.join(this.#basedir, record.folder), "workspace folder");
    await this.#ensurePackages(id, ctx);
    const envDir = this.#envDir(id);
    const hasEnv = !!(await fs.stat(envDir).catch(() => null));
    // The sandbox's /tmp, one per handle, kept under basedir (0700) so a crashed process leaves nothing in the host's /tmp.
    const tmpRoot = path.join(this.#basedir, ".agentws", "tmp");
    await mkdirPrivate(tmpRoot);
    const hostTmp = await fs.mkdtemp(path.join(tmpRoot, `${hashedName(id).slice(0, 8)}-`));
    await fs.chmod(hostTmp, 0o700);
    try {
      return await BubblewrapSandbox.open({
        hostRoot: host,
        hostTmp,
        ownsTmp: true,
        hostEnvDir: hasEnv ? envDir : undefined,
        network: this.spec.network,
        env: this.spec.env,
        readOnlyPaths: this.spec.readOnlyPaths,
        persistent: this.persistent,
        limits: { maxProcesses: this.spec.maxProcesses, memoryBytes: this.spec.memoryBytes, cpus: this.spec.cpus },
        logger: ctx.logger,
      });
    } catch (e) {
      await fs.rm(hostTmp, { recursive: true, force: true });
      throw e;
    }
  }

  /** Host folder of a workspace (tests, CLI). */
  /** Workspaces with an index record in this driver's basedir. Records are named by hashed ids, so each is read for its id. */
  async list(selector: ListSelector = {}, ctx: DriverContext = {}): Promise<BackendDescription[]> {
    const out: BackendDescription[] = [];
    for (const name of await recordNames(path.join(this.#basedir, ".agentws", "index"))) {
      const json = await readJsonFile(path.join(this.#basedir, ".agentws", "index", `${name}.json`)).catch(() => null);
      const id = (json as { workspaceId?: unknown } | null)?.workspaceId;
      // A record under another id's hash is not one this driver wrote: skip it.
      if (typeof id !== "string" || !WORKSPACE_ID_PATTERN.test(id) || hashedName(id) !== name) continue;
      const found = await this.find(id).catch((e: unknown) => {
        ctx.logger?.warn("skipped an unreadable bubblewrap index record while listing", { workspaceId: id, error: String(e) });
        return null;
      });
      if (found && matchesSelector(found, selector)) out.push(found);
    }
    return out;
  }

  async hostPath(workspaceId: string): Promise<string | null> {
    const record = await this.#read(parseWorkspaceId(workspaceId));
    return record ? path.join(this.#basedir, record.folder) : null;
  }

  #indexPath(id: string): string {
    return path.join(this.#basedir, ".agentws", "index", `${hashedName(id)}.json`);
  }
  #envDir(id: string): string {
    return path.join(this.#basedir, ".agentws", "env", hashedName(id));
  }

  async #read(id: string): Promise<IndexRecord | null> {
    // Only a missing record is "not found": one that cannot be read fails (never re-created over, never unowned).
    let json: unknown;
    try {
      json = await readJsonFile(this.#indexPath(id));
    } catch (e) {
      throw new InternalError(`bubblewrap index record for '${id}' cannot be read (${this.#indexPath(id)}): ${(e as Error).message}`, { cause: e });
    }
    if (json === null) return null;
    try {
      const r = json as IndexRecord;
      if (
        r === null ||
        typeof r !== "object" ||
        r.workspaceId !== id ||
        typeof r.folder !== "string" ||
        (r.userId !== undefined && typeof r.userId !== "string")
      )
        throw new InternalError("identity mismatch");
      return r;
    } catch (e) {
      throw new InternalError(`bubblewrap index record for '${id}' is corrupt (${this.#indexPath(id)}); remove it to re-adopt the folder`, { cause: e });
    }
  }

  #describe(r: IndexRecord): BackendDescription {
    return {
      workspaceId: r.workspaceId,
      kind: this.kind,
      state: "running",
      userId: r.userId,
      agentId: r.agentId,
      managedBy: r.managedBy,
      tags: r.tags ?? {},
      location: { hostPath: path.join(this.#basedir, r.folder), workdir: BWRAP_WORKDIR, network: this.spec.network },
    };
  }

  /**
   * Installs the spec's extra packages into <basedir>/.agentws/env/<h(id)> (mounted read-only at
   * /opt/agentws), once per package list: a stamp holds the hash of the list, so a change reinstalls.
   * The install runs inside bubblewrap with the network shared, whatever the workspace's own setting.
   */
  async #ensurePackages(id: string, ctx: DriverContext): Promise<void> {
    const py = this.spec.pythonPackages ?? [];
    const npm = this.spec.npmPackages ?? [];
    if (py.length === 0 && npm.length === 0) return;
    const envDir = this.#envDir(id);
    const stamp = createHash("sha256").update(JSON.stringify({ py, npm })).digest("hex");
    if ((await fs.readFile(path.join(envDir, ".stamp"), "utf8").catch(() => "")) === stamp) return;
    await mkdirPrivate(path.dirname(envDir));
    const staging = `${envDir}.staging-${randomBytes(4).toString("hex")}`;
    await mkdirPrivate(staging);
    const tmp = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-bwrap-install-"));
    try {
      const steps: string[][] = [];
      if (py.length)
        steps.push(["python3", "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--target", `${BWRAP_ENV_MOUNT}/python`, ...py]);
      if (npm.length) steps.push(["npm", "install", "--no-audit", "--no-fund", "--prefix", `${BWRAP_ENV_MOUNT}/npm`, ...npm]);
      for (const [i, step] of steps.entries()) {
        ctx.onProgress?.({ phase: "packages", message: `installing ${step[0] === "npm" ? "npm" : "Python"} packages`, fraction: i / steps.length });
        const argv = installArgv(staging, tmp, step);
        const res = await run("bwrap", argv, 15 * 60_000, ctx.signal);
        if (res.code !== 0)
          throw new ProvisionFailedError(
            `installing extra packages failed (exit ${res.code}) for: ${step.slice(-(step[0] === "npm" ? npm.length : py.length)).join(" ")}\n${res.output.slice(-2000)}`,
            {
              field: step[0] === "npm" ? "npmPackages" : "pythonPackages",
            },
          );
      }
      await fs.writeFile(path.join(staging, ".stamp"), stamp);
      await fs.rm(envDir, { recursive: true, force: true });
      await fs.rename(staging, envDir);
      ctx.onProgress?.({ phase: "packages", message: "extra packages installed", fraction: 1 });
    } finally {
      await fs.rm(staging, { recursive: true, force: true });
      await fs.rm(tmp, { recursive: true, force: true });
    }
  }
}

async function writeAtomic(file: string, text: string): Promise<void> {
  await mkdirPrivate(path.dirname(file));
  const tmp = `${file}.tmp-${randomBytes(6).toString("hex")}`;
  await fs.writeFile(tmp, text, { mode: 0o600 });
  await fs.rename(tmp, file);
}

function installArgv(envDir: string, tmp: string, step: string[]): string[] {
  const a = ["--die-with-parent", "--new-session", "--unshare-all", "--share-net", "--proc", "/proc", "--dev", "/dev"];
  a.push("--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc");
  for (const p of ["/bin", "/sbin", "/lib", "/lib64"]) a.push("--ro-bind-try", p, p);
  a.push("--bind", envDir, BWRAP_ENV_MOUNT, "--bind", tmp, "/tmp", "--clearenv");
  const env: Record<string, string> = {
    HOME: "/tmp",
    PATH: "/usr/local/bin:/usr/bin:/bin",
    LANG: "C.UTF-8",
    npm_config_cache: "/tmp/npm-cache",
    PIP_CACHE_DIR: "/tmp/pip-cache",
  };
  // Registry settings and CA bundles of the host carry over (a proxy with its own CA, a mirror).
  for (const k of [
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_CERT",
    "SSL_CERT_FILE",
    "NODE_EXTRA_CA_CERTS",
    "npm_config_registry",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
  ])
    if (process.env[k]) env[k] = process.env[k]!;
  for (const [k, v] of Object.entries(env)) a.push("--setenv", k, v);
  a.push("--chdir", "/tmp", "--", ...step);
  return a;
}

function run(cmd: string, argv: string[], timeoutMs: number, signal?: AbortSignal): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    // bwrap's own environment is readable from inside (/proc): never the service's.
    const child = spawnChild(resolveBwrap(cmd), argv, { stdio: ["ignore", "pipe", "pipe"], detached: true, env: { ...BWRAP_HOST_ENV } });
    let output = "";
    const add = (c: Buffer) => {
      output = (output + c.toString()).slice(-8000);
    };
    child.stdout.on("data", add);
    child.stderr.on("data", add);
    const kill = () => {
      try {
        if (child.pid) process.kill(-child.pid, "SIGKILL");
      } catch {
        /* already gone */
      }
    };
    const timer = setTimeout(kill, timeoutMs);
    signal?.addEventListener("abort", kill, { once: true });
    child.once("error", (e) => resolve({ code: 127, output: String(e) }));
    child.once("close", (code) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", kill);
      resolve({ code: code ?? -1, output });
    });
  });
}

/** Smoke probe, once per process: bwrap exists and can create the namespaces it needs. */
export function ensureBwrap(): Promise<void> {
  const once = () => run("bwrap", ["--die-with-parent", "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "true"], 10_000);
  // A mount that vanishes while bwrap remounts the tree (a Kubernetes node's pod netns, say) fails one try:
  // that race is the host's churn, not a missing capability, so it is tried again.
  const tries = async () => {
    for (let i = 1; ; i++) {
      const r = await once();
      if (r.code === 0 || i >= 3 || !/Can't bind mount .*No such file or directory/s.test(r.output)) return r;
    }
  };
  probe ??= tries().then((r) => {
    if (r.code !== 0) {
      probe = undefined;
      throw new UnavailableError(
        r.code === 127
          ? "bubblewrap (bwrap) is not installed; install it (apt-get install bubblewrap, or scripts/setup-sandboxes.sh)"
          : `bubblewrap cannot create its namespaces here (exit ${r.code}): ${r.output.trim().slice(0, 500)}; allow unprivileged user namespaces or run as root`,
      );
    }
  });
  return probe;
}
