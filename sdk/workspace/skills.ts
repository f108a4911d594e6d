// Size: the skill store and its partition reconciliation share one lock and cache; a split would be
// store / partition / host-skill.
import { randomBytes } from "node:crypto";
import fsSync, { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { InvalidArgumentError, NotFoundError, TooLargeError, isWorkspaceError } from "../errors.js";
import type { Logger } from "../logger.js";
import { isPlainName } from "../paths.js";
import type { DirEntry, FileInfo, Sandbox } from "../sandbox.js";
import { DEFAULT_MAX_EXTRACTED_BYTES, extractArchive, inputLimitFor, spoolInput, type ArchiveFormat } from "./archive.js";
import { MAX_SKILL_MD_BYTES, parseSkillMarkdown, type FrontMatterResult, type SkillManifest } from "./frontmatter.js";
import { readCapped } from "./capped-read.js";
import { INDEX_FILE, emptyIndex, SEED_PARTITION, freeSkillName, parseIndex, partitionName, sanitizeSkillDirName } from "./skill-index.js";
import { serializeIndex, skillHash, type SkillIndex } from "./skill-index.js";

/** A skill as an agent sees it. */
export interface Skill {
  /** Agent-facing name: the front-matter name, with " (1)", " (2)"… when another skill has it. */
  name: string;
  description: string;
  /** Skill folder as the agent sees it: `<workdir>/skills/<partition>/<dir>`. */
  dir: string;
  /** SKILL.md body after the front matter, trimmed. */
  markdown: string;
  /** SKILL.md modification time, epoch milliseconds. */
  updatedAt: number;
}

export interface SkillArchiveOptions {
  format: ArchiveFormat;
  /** Preferred folder name (a plain name); default the sanitised front-matter name. */
  dirName?: string;
  /** Without dirName: name the folder after the archive's top-level skill folder, when the skill sits in one. */
  keepFolderName?: boolean;
  /** Refuse archives whose content is larger. Default 500 MiB. */
  maxExtractedBytes?: number;
  agentId?: string;
}

const SKILLS = "skills";
const SKILL_FILE = "SKILL.md";
const LEGACY_INDEX = ".skills";
/** A listing reads at most this many characters of SKILL.md in total; later skills are left out with a warning. */
export const MAX_LISTED_SKILL_CHARS = 64 * 1024 * 1024;
/**
 * The most bytes of a partition's `.index` the host reads. An entry is about 150 bytes, so this holds
 * tens of thousands of skills; a bigger file (an agent can truncate it to 5 GiB) is treated as corrupt:
 * rebuilt from the skill folders, which hold every stored skill, and rewritten.
 */
export const MAX_SKILL_INDEX_BYTES = 8 * 1024 * 1024;
/** The most bytes of one file a file-by-file partition copy carries through the host; bigger files are left out with a warning. */
export const MAX_COPIED_SKILL_FILE_BYTES = 64 * 1024 * 1024;
/** A host SKILL.md up to this size is read synchronously (bounded, no thread-pool hop). */
const SYNC_READ_LIMIT = 256 * 1024;

interface NewSkillPlan {
  added: true;
  dir: string;
  name: string;
  manifest: SkillManifest;
  realDir: string;
}
type SkillPlan = { added: false; dir: string } | NewSkillPlan;

/**
 * One writer per partition and sandbox handle. Keyed by the handle (not by workdir, which is
 * "/workspace" for every container) so unrelated workspaces never wait for each other.
 */
const locksBySandbox = new WeakMap<Sandbox, Map<string, Promise<void>>>();

/**
 * Skills in `skills/<partition>/<dir>/SKILL.md`, one partition per agent ("default" for none),
 * each with an `.index` (content-hash dedup, name-clash suffixes) kept exactly like the
 * reference's LocalWorkspace, but over the Sandbox interface so every backend keeps it.
 * A partition starts as a copy of `skills/.seed`, made on first use and published by an
 * atomic rename so concurrent first uses end with one copy.
 *
 * Reconciliation (a folder added or removed behind the index's back) is decided by comparing the
 * partition listing with the index, not by `skills_dir_mtime`: index writes are atomic renames
 * that themselves change the folder mtime. The field is still written for compatibility.
 */
export class SkillStore {
  readonly #sandbox: Sandbox;
  readonly #logger: Logger;
  /** Partitions known to exist; per store, so a re-initialized workspace checks again. */
  readonly #equipped = new Set<string>();

  constructor(sandbox: Sandbox, logger: Logger) {
    this.#sandbox = sandbox;
    this.#logger = logger;
  }

  /** Creates `skills/`, migrates the pre-partition layout, and seeds `skill_paths` into `.seed` (deduplicated). */
  async initialize(skillPaths: string[]): Promise<void> {
    await this.#sandbox.mkdir(SKILLS);
    await this.#migrateLegacyLayout();
    const seedRel = `${SKILLS}/${SEED_PARTITION}`;
    await this.#sandbox.mkdir(seedRel);
    if (skillPaths.length === 0) return;
    await this.#withLock(SEED_PARTITION, async () => {
      const { index, corrupt } = await this.#loadIndex(seedRel);
      const { changed: reconciled, onDisk } = await this.#reconcile(seedRel, index);
      let changed = reconciled || corrupt;
      // Read and validate all folders at once, decide names one by one (order matters), then copy in parallel.
      const reads = await Promise.all(
        skillPaths.map((raw) =>
          readHostSkill(hostPath(raw)).then(
            (skill) => ({ raw, skill }),
            (error: unknown) => ({ raw, error }),
          ),
        ),
      );
      const plans: Array<NewSkillPlan & { raw: string }> = [];
      for (const read of reads) {
        if ("error" in read) {
          // The reference skips unusable seed paths with a warning rather than failing initialize.
          this.#logger.warn("skipping invalid seed skill", { path: read.raw, error: (read.error as Error)?.message ?? String(read.error) });
          continue;
        }
        const plan = planSkill(read.skill, index, onDisk);
        if (plan.added) plans.push({ ...plan, raw: read.raw });
      }
      await forEachLimited(plans, 16, async (plan) => {
        try {
          await this.#copy(plan, seedRel);
          changed = true;
        } catch (e) {
          index.entries.delete(plan.dir);
          this.#logger.warn("could not copy seed skill", { path: plan.raw, error: (e as Error).message });
        }
      });
      if (changed) await this.#saveIndex(seedRel, index);
    });
  }

  async list(agentId?: string): Promise<Skill[]> {
    const partition = partitionName(agentId);
    await this.#equip(partition);
    const rel = `${SKILLS}/${partition}`;
    const index = await this.#withLock(partition, async () => {
      const { index: idx, corrupt } = await this.#loadIndex(rel);
      if ((await this.#reconcile(rel, idx)).changed || corrupt) await this.#saveIndex(rel, idx);
      return idx;
    });
    // Each SKILL.md is capped, and so is their sum: an agent can plant thousands of 1 MiB files.
    const entries = [...index.entries];
    const loaded: Array<Skill | undefined> = new Array(entries.length);
    let chars = 0;
    let skipped = 0;
    await forEachLimited(
      entries.map((e, i) => [i, e] as const),
      32,
      async ([i, [dir, entry]]) => {
        const file = `${rel}/${dir}/${SKILL_FILE}`;
        if (chars > MAX_LISTED_SKILL_CHARS) return void skipped++;
        const [text, info] = await Promise.all([this.#readSkillText(file), this.#sandbox.stat(file)]);
        if (text === undefined || !info) return;
        chars += text.length;
        if (chars > MAX_LISTED_SKILL_CHARS) return void skipped++;
        const parsed = parseCached(text);
        if (!parsed.ok) {
          this.#logger.warn("skipping skill with an invalid SKILL.md", { file, problem: parsed.problem });
          return;
        }
        loaded[i] = this.#skill(rel, dir, entry.skillName, parsed.manifest, info.mtimeMs);
      },
    );
    if (skipped > 0)
      this.#logger.warn("skills left out of the listing: their SKILL.md files together exceed the listing limit", {
        partition,
        skipped,
        limitChars: MAX_LISTED_SKILL_CHARS,
      });
    return loaded.filter((s): s is Skill => s !== undefined);
  }

  /**
   * Copies a host skill folder into the partition. Returns the new skill, or undefined when a
   * skill with the same SKILL.md content is already there (nothing is copied then).
   */
  async add(hostSkillPath: string, agentId?: string): Promise<Skill | undefined> {
    if (typeof hostSkillPath !== "string" || hostSkillPath === "") throw new InvalidArgumentError("must be a non-empty host path", { field: "skillPath" });
    const partition = partitionName(agentId);
    return this.#addFolder(hostPath(hostSkillPath), partition);
  }

  /**
   * Installs a zip / tar / tar.gz skill: unpacked on the host into a temporary folder (checked
   * before anything is written), its root found (the archive root or its one top-level folder;
   * several skill folders or files beside the folder are refused), then installed like add(). A
   * failed install leaves nothing behind.
   */
  async addArchive(data: Uint8Array | AsyncIterable<Uint8Array>, options: SkillArchiveOptions): Promise<Skill | undefined> {
    const { format, dirName, agentId } = options ?? ({} as SkillArchiveOptions);
    if (format !== "zip" && format !== "tar" && format !== "tar.gz")
      throw new InvalidArgumentError(`'${String(format)}' is not supported; use "zip", "tar" or "tar.gz"`, { field: "format" });
    if (dirName !== undefined && (!isPlainName(dirName) || sanitizeSkillDirName(dirName) === ""))
      throw new InvalidArgumentError(`'${String(dirName)}' must be a plain folder name without path separators`, { field: "dirName" });
    const limit = options.maxExtractedBytes ?? DEFAULT_MAX_EXTRACTED_BYTES;
    if (!Number.isSafeInteger(limit) || limit <= 0) throw new InvalidArgumentError("must be a positive integer", { field: "maxExtractedBytes" });
    const partition = partitionName(agentId);

    const work = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-skill-"));
    try {
      const archive = path.join(work, "archive");
      const out = path.join(work, "out");
      await fs.mkdir(out);
      await spoolInput(data, archive, inputLimitFor(limit));
      await extractArchive(archive, format, out, limit);
      await fs.rm(archive, { force: true });
      const root = await findSkillRoot(out);
      const label = root === out ? "the archive root" : `the archive folder '${path.basename(root)}'`;
      const folder = dirName ?? (options.keepFolderName && root !== out ? path.basename(root) : undefined);
      return await this.#addFolder(root, partition, { label, dirName: folder });
    } finally {
      await fs.rm(work, { recursive: true, force: true });
    }
  }

  /** Removes a skill by its agent-facing name. False (and a warning) when there is none. */
  async remove(name: string, agentId?: string): Promise<boolean> {
    const partition = partitionName(agentId);
    await this.#equip(partition);
    const rel = `${SKILLS}/${partition}`;
    return this.#withLock(partition, async () => {
      const { index, corrupt } = await this.#loadIndex(rel);
      const changed = (await this.#reconcile(rel, index)).changed || corrupt;
      const dir = [...index.entries].find(([, e]) => e.skillName === name)?.[0];
      if (dir === undefined) {
        if (changed) await this.#saveIndex(rel, index);
        this.#logger.warn("skill not found; nothing removed", { name, partition, available: [...index.entries.values()].map((e) => e.skillName) });
        return false;
      }
      await this.#sandbox.remove(`${rel}/${dir}`);
      index.entries.delete(dir);
      await this.#saveIndex(rel, index);
      return true;
    });
  }

  /** Deletes the agent's partition; it is copied from the seed again on next use. */
  async purgeAgent(agentId: string): Promise<void> {
    if (!agentId) return;
    const partition = partitionName(agentId);
    await this.#withLock(partition, async () => {
      await this.#sandbox.remove(`${SKILLS}/${partition}`);
      this.#equipped.delete(partition);
    });
  }

  /** Deletes `skills/` entirely; seeds are not re-applied until the next initialize(). */
  async reset(): Promise<void> {
    await this.#sandbox.remove(SKILLS);
    this.#equipped.clear();
  }

  // ------------------------------------------------------------------ internals

  async #addFolder(hostDir: string, partition: string, opts: { label?: string; dirName?: string | undefined } = {}): Promise<Skill | undefined> {
    // Validate on the host first: an invalid skill touches nothing in the workspace.
    const skill = await readHostSkill(hostDir, opts.label);
    await this.#equip(partition);
    const rel = `${SKILLS}/${partition}`;
    return this.#withLock(partition, async () => {
      const { index, corrupt } = await this.#loadIndex(rel);
      const { changed, onDisk, missing } = await this.#reconcile(rel, index);
      const reconciled = changed || corrupt;
      // The partition folder is almost always there (equipped above): create it only when it is not.
      if (missing) await this.#sandbox.mkdir(rel);
      const result = await this.#install(skill, rel, index, onDisk, opts.dirName);
      if (!result.added) {
        if (reconciled) await this.#saveIndex(rel, index);
        this.#logger.debug("skill already installed (same SKILL.md content)", { path: hostDir, partition, dir: result.dir });
        return undefined;
      }
      await this.#saveIndex(rel, index);
      const info = await this.#sandbox.stat(`${rel}/${result.dir}/${SKILL_FILE}`);
      return this.#skill(rel, result.dir, result.name, result.manifest, info?.mtimeMs ?? Date.now());
    });
  }

  /** Dedups by hash, names, copies via a hidden staging folder, and records in `index`. */
  async #install(skill: HostSkill, rel: string, index: SkillIndex, onDisk: Set<string>, dirName?: string): Promise<SkillPlan> {
    const plan = planSkill(skill, index, onDisk, dirName);
    if (!plan.added) return plan;
    try {
      await this.#copy(plan, rel);
    } catch (e) {
      index.entries.delete(plan.dir);
      throw e;
    }
    return plan;
  }

  /** Copies to a hidden staging folder, then publishes it with one rename: a failure leaves nothing. */
  async #copy(plan: NewSkillPlan, rel: string): Promise<void> {
    const staging = `${rel}/.adding-${randomBytes(6).toString("hex")}`;
    try {
      await this.#sandbox.copyIn(plan.realDir, staging);
      await this.#sandbox.rename(staging, `${rel}/${plan.dir}`);
    } catch (e) {
      await this.#sandbox.remove(staging).catch(() => undefined);
      throw e;
    }
  }

  /** Brings the index in line with the folders on disk. Also returns every name present in the folder. */
  async #reconcile(rel: string, index: SkillIndex): Promise<{ changed: boolean; onDisk: Set<string>; missing: boolean }> {
    let entries: DirEntry[];
    let missing = false;
    try {
      // Names and types are all this needs: one readdir where the sandbox offers it, not a stat per entry.
      entries = this.#sandbox.readDirTyped ? await this.#sandbox.readDirTyped(rel) : await this.#sandbox.list(rel);
    } catch (e) {
      if (!isWorkspaceError(e, "not_found")) throw e;
      entries = [];
      missing = true;
    }
    const dirs = new Set(entries.filter((e) => e.type === "dir" && !e.name.startsWith(".")).map((e) => e.name));
    let changed = false;
    for (const dir of [...index.entries.keys()])
      if (!dirs.has(dir)) {
        index.entries.delete(dir);
        changed = true;
      }
    const fresh = [...dirs].filter((d) => !index.entries.has(d)).sort();
    for (const dir of fresh) {
      const text = await this.#readSkillText(`${rel}/${dir}/${SKILL_FILE}`);
      if (text === undefined) continue;
      const parsed = parseCached(text);
      if (!parsed.ok) {
        this.#logger.warn("ignoring a skill folder with an invalid SKILL.md", {
          dir: `${rel}/${dir}`,
          file: `${rel}/${dir}/${SKILL_FILE}`,
          problem: parsed.problem,
        });
        continue;
      }
      const hash = skillHash(text);
      if ([...index.entries.values()].some((e) => e.hash === hash)) continue;
      const name = freeSkillName(parsed.manifest.name, new Set([...index.entries.values()].map((e) => e.skillName)));
      index.entries.set(dir, { hash, skillName: name });
      changed = true;
    }
    return { changed, onDisk: new Set(entries.map((e) => e.name)), missing };
  }

  /** The partition's index; `corrupt` when it was over MAX_SKILL_INDEX_BYTES and so read as empty (the caller rewrites it). */
  async #loadIndex(rel: string): Promise<{ index: SkillIndex; corrupt: boolean }> {
    const file = `${rel}/${INDEX_FILE}`;
    try {
      return { index: parseIndex(await this.#readText(file)), corrupt: false };
    } catch (e) {
      if (!isWorkspaceError(e, "too_large")) throw e;
      this.#logger.warn("skill index over its size cap: treated as corrupt and rebuilt from the skill folders", {
        file,
        capBytes: MAX_SKILL_INDEX_BYTES,
        error: (e as Error).message,
      });
      return { index: emptyIndex(), corrupt: true };
    }
  }

  async #saveIndex(rel: string, index: SkillIndex): Promise<void> {
    const info = await this.#sandbox.stat(rel);
    index.mtime = (info?.mtimeMs ?? 0) / 1000;
    await this.#sandbox.writeFile(`${rel}/${INDEX_FILE}`, serializeIndex(index));
  }

  /**
   * A SKILL.md in the workspace, read up to MAX_SKILL_MD_BYTES. An agent can plant anything there:
   * an over-cap file is reported and skipped (undefined), never read whole or let fail the listing.
   */
  async #readSkillText(rel: string): Promise<string | undefined> {
    try {
      return (await readCapped(this.#sandbox, rel, MAX_SKILL_MD_BYTES)).toString("utf8");
    } catch (e) {
      if (isWorkspaceError(e, "too_large")) {
        this.#logger.warn("skipping skill with an invalid SKILL.md", { file: rel, problem: `is over the ${MAX_SKILL_MD_BYTES}-byte limit for a SKILL.md` });
        return undefined;
      }
      if (isWorkspaceError(e, "not_found") || isWorkspaceError(e, "invalid_argument")) return undefined;
      throw e;
    }
  }

  /** An index file, capped: too_large goes to the caller. */
  async #readText(rel: string): Promise<string | undefined> {
    try {
      return (await readCapped(this.#sandbox, rel, MAX_SKILL_INDEX_BYTES)).toString("utf8");
    } catch (e) {
      if (isWorkspaceError(e, "not_found") || isWorkspaceError(e, "invalid_argument")) return undefined;
      throw e;
    }
  }

  /** Makes sure the partition exists, copying the seed on first use (atomic publish, race-safe). */
  async #equip(partition: string): Promise<void> {
    if (this.#equipped.has(partition)) return;
    const rel = `${SKILLS}/${partition}`;
    // Under the partition lock, concurrent first uses in this process make one copy; the rename
    // keeps other processes (another service replica) safe too.
    await this.#withLock(partition, async () => {
      if (this.#equipped.has(partition) || (await this.#sandbox.stat(rel))) return;
      const staging = `${SKILLS}/.equipping-${randomBytes(6).toString("hex")}`;
      try {
        const seed = `${SKILLS}/${SEED_PARTITION}`;
        // One call on sandboxes that can copy a tree themselves (a host folder), else file by file.
        if (this.#sandbox.copyTree) await this.#sandbox.copyTree(seed, staging, { exclude: isStagingLeftover });
        else await this.#copyTree(seed, staging);
        await this.#sandbox.rename(staging, rel);
      } catch (e) {
        await this.#sandbox.remove(staging).catch(() => undefined);
        // Losing the race to another process is fine; anything else is not.
        if (!(await this.#sandbox.stat(rel))) throw e;
      }
    });
    this.#equipped.add(partition);
  }

  /** Copies a workspace folder to a new place through the Sandbox interface; links are skipped. */
  async #copyTree(from: string, to: string): Promise<void> {
    await this.#sandbox.mkdir(to);
    let entries: FileInfo[];
    try {
      entries = await this.#sandbox.list(from);
    } catch (e) {
      if (isWorkspaceError(e, "not_found")) return;
      throw e;
    }
    const wanted = entries.filter((e) => !isStagingLeftover(e.name));
    await Promise.all(
      wanted.map(async (e) => {
        if (e.type === "dir") await this.#copyTree(`${from}/${e.name}`, `${to}/${e.name}`);
        else if (e.type === "file") {
          let data: Buffer;
          try {
            data = await readCapped(this.#sandbox, `${from}/${e.name}`, MAX_COPIED_SKILL_FILE_BYTES);
          } catch (err) {
            if (!isWorkspaceError(err, "too_large")) throw err;
            this.#logger.warn("file left out of the partition copy: over the size cap", { file: `${from}/${e.name}`, capBytes: MAX_COPIED_SKILL_FILE_BYTES });
            return;
          }
          await this.#sandbox.writeFile(`${to}/${e.name}`, data);
        }
      }),
    );
  }

  /** Pre-partition layout: skill folders and `.skills` directly in skills/ move into skills/.seed. */
  async #migrateLegacyLayout(): Promise<void> {
    try {
      const entries = await this.#sandbox.list(SKILLS);
      const moves: Array<[string, string]> = [];
      for (const e of entries) {
        if (e.name === SEED_PARTITION) continue;
        if (e.name === LEGACY_INDEX && e.type === "file") moves.push([e.name, INDEX_FILE]);
        else if (e.type === "dir" && (await this.#sandbox.stat(`${SKILLS}/${e.name}/${SKILL_FILE}`))?.type === "file") moves.push([e.name, e.name]);
      }
      if (moves.length === 0) return;
      await this.#sandbox.mkdir(`${SKILLS}/${SEED_PARTITION}`);
      let moved = 0;
      for (const [from, to] of moves) {
        try {
          await this.#sandbox.rename(`${SKILLS}/${from}`, `${SKILLS}/${SEED_PARTITION}/${to}`);
          moved++;
        } catch (e) {
          this.#logger.warn("could not migrate a legacy skill entry", { entry: from, error: (e as Error).message });
        }
      }
      this.#logger.info("migrated legacy skills into skills/.seed", { count: moved });
    } catch (e) {
      this.#logger.warn("legacy skill migration failed", { error: (e as Error).message });
    }
  }

  async #withLock<T>(partition: string, fn: () => Promise<T>): Promise<T> {
    let locks = locksBySandbox.get(this.#sandbox);
    if (!locks) locksBySandbox.set(this.#sandbox, (locks = new Map()));
    const key = partition;
    const previous = locks.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => mine);
    locks.set(key, tail);
    await previous;
    try {
      return await fn();
    } finally {
      release();
      if (locks.get(key) === tail) locks.delete(key);
    }
  }

  #skill(rel: string, dir: string, name: string, manifest: SkillManifest, mtimeMs: number): Skill {
    return {
      name,
      description: manifest.description,
      dir: path.posix.join(this.#sandbox.workdir, rel, dir),
      markdown: manifest.markdown,
      updatedAt: mtimeMs,
    };
  }
}

/**
 * Dedups by content hash, then picks the agent-facing name and the folder, reserving both in
 * `index` and `onDisk`. Names on disk that the index does not know count as taken (reference fault 31).
 */
function planSkill(skill: HostSkill, index: SkillIndex, onDisk: Set<string>, dirName?: string): SkillPlan {
  const hash = skillHash(skill.text);
  for (const [dir, entry] of index.entries) if (entry.hash === hash) return { added: false, dir };
  const name = freeSkillName(skill.manifest.name, new Set([...index.entries.values()].map((e) => e.skillName)));
  const base = sanitizeSkillDirName(dirName ?? skill.manifest.name) || "skill";
  // The reference's suffixes: `<dirName>-1` for a name the caller gave, `<sanitised name>_1` otherwise.
  const separator = dirName !== undefined ? "-" : "_";
  let dir = base;
  for (let i = 1; index.entries.has(dir) || onDisk.has(dir); i++) dir = `${base}${separator}${i}`;
  index.entries.set(dir, { hash, skillName: name });
  onDisk.add(dir);
  return { added: true, dir, name, manifest: skill.manifest, realDir: skill.realDir };
}

/**
 * SKILL.md parses by text. Front matter is YAML, whose parser costs far more than reading the file,
 * and every listing parses every skill again; the result depends on the text alone, so a small
 * LRU keyed by the text answers repeats. Results are shared: nothing here mutates them.
 */
const PARSE_CACHE_ENTRIES = 512;
const PARSE_CACHE_CHARS = 4 * 1024 * 1024;
const parseCache = new Map<string, FrontMatterResult>();
let parseCacheChars = 0;

function parseCached(text: string): FrontMatterResult {
  if (text.length > PARSE_CACHE_CHARS / 64) return parseSkillMarkdown(text);
  let parsed = parseCache.get(text);
  if (parsed) {
    // Move to the young end.
    parseCache.delete(text);
  } else {
    parsed = parseSkillMarkdown(text);
    parseCacheChars += text.length;
    while (parseCache.size >= PARSE_CACHE_ENTRIES || parseCacheChars > PARSE_CACHE_CHARS) {
      const oldest = parseCache.keys().next().value!;
      parseCache.delete(oldest);
      parseCacheChars -= oldest.length;
    }
  }
  parseCache.set(text, parsed);
  return parsed;
}

/** Hidden names other than the index are staging leftovers of an interrupted install: never copied into a partition. */
function isStagingLeftover(name: string): boolean {
  return name.startsWith(".") && name !== INDEX_FILE;
}

/** Runs `fn` over `items` with at most `limit` in flight. */
async function forEachLimited<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** `~` expanded, made absolute. */
function hostPath(p: string): string {
  const expanded = p === "~" ? os.homedir() : p.startsWith("~/") ? path.join(os.homedir(), p.slice(2)) : p;
  return path.resolve(expanded);
}

/**
 * Reads and validates `<dir>/SKILL.md` on the host. Errors name the file and the missing field.
 * `label` describes an archive folder instead of a host path (the temp path means nothing to callers).
 */
interface HostSkill {
  text: string;
  manifest: SkillManifest;
  realDir: string;
}

async function readHostSkill(dir: string, label?: string): Promise<HostSkill> {
  const field = label ? "archive" : "skillPath";
  const where = label ? `in ${label}` : `at '${dir}'`;
  const invalid = (why: string) => new InvalidArgumentError(`invalid skill ${where}: ${why}`, { field });
  // Host metadata calls are synchronous: each is a few µs, against tens for a thread-pool round trip.
  let realDir: string;
  try {
    realDir = fsSync.realpathSync.native(dir);
  } catch {
    throw new NotFoundError(`skill folder '${dir}' not found`, { field });
  }
  if (!fsSync.statSync(realDir).isDirectory()) throw invalid("not a folder");
  const file = path.join(realDir, SKILL_FILE);
  const shown = label ? SKILL_FILE : file;
  let info: fsSync.Stats | undefined;
  try {
    info = fsSync.lstatSync(file, { throwIfNoEntry: false });
  } catch {
    info = undefined;
  }
  if (!info) throw invalid(`${shown} not found (a skill is a folder with a SKILL.md whose front matter has 'name' and 'description')`);
  if (info.isSymbolicLink()) throw invalid(`${shown} is a symlink; put the real file in the skill folder`);
  if (!info.isFile()) throw invalid(`${shown} is not a regular file`);
  if (info.size > MAX_SKILL_MD_BYTES)
    throw new TooLargeError(`invalid skill ${where}: ${shown} is ${info.size} bytes, over the ${MAX_SKILL_MD_BYTES}-byte limit for a SKILL.md`, { field });
  const text = info.size <= SYNC_READ_LIMIT ? fsSync.readFileSync(file, "utf8") : await fs.readFile(file, "utf8");
  const parsed = parseCached(text);
  if (!parsed.ok) throw invalid(`${shown} ${parsed.problem}`);
  return { text, manifest: parsed.manifest, realDir };
}

/** Zip tools' metadata beside an archive's content; never part of a skill. */
const ARCHIVE_METADATA = new Set(["__MACOSX", ".DS_Store"]);

/**
 * The archive's skill folder: the extraction folder itself when it holds SKILL.md, else its one
 * top-level folder. Whatever the install would leave out is refused, never dropped: several
 * top-level folders (one skill per archive) or anything beside the skill folder.
 */
async function findSkillRoot(out: string): Promise<string> {
  const isFile = async (p: string) => (await fs.lstat(p).catch(() => null))?.isFile() ?? false;
  if (await isFile(path.join(out, SKILL_FILE))) return out;
  const top = (await fs.readdir(out, { withFileTypes: true })).filter((d) => !ARCHIVE_METADATA.has(d.name));
  const skills: string[] = [];
  for (const d of top) if (d.isDirectory() && (await isFile(path.join(out, d.name, SKILL_FILE)))) skills.push(d.name);
  const shown = (names: string[]) =>
    names
      .sort()
      .slice(0, 5)
      .map((n) => `'${n.slice(0, 100)}'`)
      .join(", ") + (names.length > 5 ? ", ..." : "");
  if (skills.length === 0)
    throw new InvalidArgumentError("contains no SKILL.md (expected at the archive root or in its one top-level folder)", { field: "archive" });
  if (skills.length > 1)
    throw new InvalidArgumentError(`holds ${skills.length} skill folders (${shown(skills)}); upload one skill per archive`, { field: "archive" });
  const beside = top.filter((d) => d.name !== skills[0]).map((d) => d.name);
  if (beside.length > 0)
    throw new InvalidArgumentError(
      `holds ${shown(beside)} beside the skill folder '${skills[0]!.slice(0, 100)}'; put everything inside the skill folder (or SKILL.md at the archive root)`,
      { field: "archive" },
    );
  return path.join(out, skills[0]!);
}
