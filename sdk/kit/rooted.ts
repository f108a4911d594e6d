import fs, { constants as fsc } from "node:fs";
import { PathEscapeError } from "../errors.js";

/**
 * Race-free path resolution under a host folder, for Linux. Node has no openat(), but opening
 * `/proc/self/fd/<dirfd>/<name>` is openat(dirfd, name): the magic link lands on the very folder
 * the descriptor holds, and O_NOFOLLOW applies to `name`. Every component is opened this way from
 * a descriptor of the root, so a folder swapped for a symlink between two calls (or inside one)
 * can only ever be refused, never followed out of the root.
 *
 * Fast path: a folder is first opened by its full name and kept only when the kernel reports that
 * the opened folder sits at exactly that path (readlink of its descriptor). Only folders are
 * opened by name (O_DIRECTORY: a device or FIFO is refused before its driver sees an open), and
 * nothing is read, written or created through a descriptor before that check.
 *
 * Symlinks inside the root keep working: a link is resolved by walking its target again from the
 * root (or from the link's folder), with ".." taken physically, at most MAX_LINK_HOPS times.
 */
const DIR_FLAGS = fsc.O_RDONLY | fsc.O_DIRECTORY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK;
const FAST_DIR_FLAGS = fsc.O_RDONLY | fsc.O_DIRECTORY | fsc.O_NONBLOCK;
const MAX_LINK_HOPS = 40;
/** mkdir-then-open retries per missing folder when another process removes it in between. */
const MAX_CREATE_RETRIES = 8;

const OUTSIDE = "resolves through a symlink outside the workspace";
const DANGLING = "goes through a dangling symlink";

/** The path that opens `name` inside the folder `fd` holds (or the folder itself). */
export function fdPath(fd: number, name?: string): string {
  return name === undefined ? `/proc/self/fd/${fd}` : `/proc/self/fd/${fd}/${name}`;
}

export function errnoOf(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException)?.code;
}

/** A folder descriptor (the caller closes it) and the folder's physical path below the root. */
export interface OpenedDir {
  fd: number;
  rel: string;
}

interface Step {
  name: string;
  /** Comes from a symlink's target: missing means a dangling link. */
  fromLink: boolean;
}

interface Hops {
  n: number;
}

export class RootedPaths {
  /** `root` is a real path (no symlinks); `aliases` are other spellings of it absolute links may use. */
  constructor(
    readonly root: string,
    private readonly aliases: readonly string[],
  ) {}

  openRoot(): number {
    return fs.openSync(this.root, DIR_FLAGS);
  }

  /**
   * The folder `rel` (checked workspace-relative path), symlinks inside the root followed. With
   * `create`, missing folders are made (mkdir -p). Errno errors (ENOENT, ENOTDIR) come back raw.
   */
  openDir(rel: string, shown: string, create = false): OpenedDir {
    return this.#dir(rel, shown, create, true, { n: 0 });
  }

  /** The parent folder of `rel` (not the root) and the final name in it, which is not followed. */
  parent(rel: string, shown: string, create = false): { dir: OpenedDir; name: string } {
    const { dir, name } = split(rel);
    return { dir: this.openDir(dir, shown, create), name };
  }

  /**
   * Opens `rel` for reading with `flags` (plus O_NOFOLLOW), following symlinks that stay inside
   * the root. A path naming a folder through "." or ".." gives that folder's descriptor.
   */
  open(rel: string, flags: number, shown: string): { fd: number; rel: string } {
    const hops: Hops = { n: 0 };
    let target = rel;
    let plain = true;
    let finalFromLink = false;
    for (;;) {
      const { dir, name } = split(target);
      if (name === "" || name === "." || name === "..") return this.#dir(target, shown, false, plain, hops, finalFromLink);
      const parent = this.#dir(dir, shown, false, plain, hops, finalFromLink);
      try {
        return { fd: fs.openSync(fdPath(parent.fd, name), flags | fsc.O_NOFOLLOW), rel: join(parent.rel, name) };
      } catch (e) {
        const code = errnoOf(e);
        if (code === "ELOOP" || (code === "ENOTDIR" && (flags & fsc.O_DIRECTORY) !== 0)) {
          const link = readLink(fdPath(parent.fd, name));
          if (link === null) throw e;
          if (++hops.n > MAX_LINK_HOPS) throw new PathEscapeError(`path '${shown}' goes through too many symlinks`, { cause: e });
          if (link.startsWith("/")) {
            const inner = this.#inside(link);
            if (inner === null) throw new PathEscapeError(`path '${shown}' ${OUTSIDE}`);
            target = inner;
          } else target = join(parent.rel, link);
          plain = false;
          finalFromLink = true;
          continue;
        }
        if (code === "ENOENT" && finalFromLink) throw new PathEscapeError(`path '${shown}' ${DANGLING}`, { cause: e });
        throw e;
      } finally {
        fs.closeSync(parent.fd);
      }
    }
  }

  /** `fromLink`: `rel` is a symlink's target, so a missing component means a dangling link. */
  #dir(rel: string, shown: string, create: boolean, plain: boolean, hops: Hops, fromLink = false): OpenedDir {
    if (rel === "") return { fd: this.openRoot(), rel: "" };
    if (plain) {
      const full = `${this.root}/${rel}`;
      let fd: number | undefined;
      try {
        fd = fs.openSync(full, FAST_DIR_FLAGS);
      } catch {
        fd = undefined;
      }
      if (fd !== undefined) {
        let where: string | undefined;
        try {
          where = fs.readlinkSync(fdPath(fd));
        } catch {
          where = undefined;
        }
        if (where === full) return { fd, rel };
        fs.closeSync(fd);
      }
    }
    return this.#walk(rel, shown, create, hops, fromLink);
  }

  /** One component at a time from a descriptor of the root; ".." pops back to the held parent. */
  #walk(rel: string, shown: string, create: boolean, hops: Hops, fromLink: boolean): OpenedDir {
    const todo: Step[] = steps(rel, fromLink);
    const held: number[] = [];
    const names: string[] = [];
    let fd = this.openRoot();
    let creates = 0;
    try {
      while (todo.length > 0) {
        const step = todo.pop()!;
        if (step.name === "" || step.name === ".") continue;
        if (step.name === "..") {
          if (held.length === 0) throw new PathEscapeError(`path '${shown}' ${OUTSIDE}`);
          fs.closeSync(fd);
          fd = held.pop()!;
          names.pop();
          continue;
        }
        let next: number;
        try {
          next = fs.openSync(fdPath(fd, step.name), DIR_FLAGS);
        } catch (e) {
          const code = errnoOf(e);
          if (code === "ENOTDIR" || code === "ELOOP") {
            const link = readLink(fdPath(fd, step.name));
            if (link === null) throw e;
            if (++hops.n > MAX_LINK_HOPS) throw new PathEscapeError(`path '${shown}' goes through too many symlinks`, { cause: e });
            if (link.startsWith("/")) {
              const inner = this.#inside(link);
              if (inner === null) throw new PathEscapeError(`path '${shown}' ${OUTSIDE}`);
              // An absolute target starts again at the root.
              for (const h of held.splice(0)) fs.closeSync(h);
              names.length = 0;
              const old = fd;
              fd = -1;
              fs.closeSync(old);
              fd = this.openRoot();
              todo.push(...steps(inner, true));
            } else todo.push(...steps(link, true));
            continue;
          }
          if (code === "ENOENT") {
            if (step.fromLink) throw new PathEscapeError(`path '${shown}' ${DANGLING}`, { cause: e });
            if (create && creates++ < MAX_CREATE_RETRIES) {
              try {
                fs.mkdirSync(fdPath(fd, step.name));
              } catch (e2) {
                if (errnoOf(e2) !== "EEXIST") throw e2;
              }
              todo.push(step);
              continue;
            }
          }
          throw e;
        }
        held.push(fd);
        fd = next;
        names.push(step.name);
      }
      const out = { fd, rel: names.join("/") };
      fd = -1;
      return out;
    } finally {
      for (const h of held) fs.closeSync(h);
      if (fd >= 0) fs.closeSync(fd);
    }
  }

  /** The part of an absolute link target below the root, or null when it points elsewhere. */
  #inside(link: string): string | null {
    for (const base of [this.root, ...this.aliases]) {
      if (link === base || link === `${base}/`) return "";
      if (link.startsWith(`${base}/`)) return link.slice(base.length + 1);
    }
    return null;
  }
}

/** Steps of a path, last first (the walk pops them). */
function steps(p: string, fromLink: boolean): Step[] {
  return p
    .split("/")
    .reverse()
    .map((name) => ({ name, fromLink }));
}

function split(rel: string): { dir: string; name: string } {
  const i = rel.lastIndexOf("/");
  return i < 0 ? { dir: "", name: rel } : { dir: rel.slice(0, i), name: rel.slice(i + 1) };
}

function join(dir: string, name: string): string {
  return dir === "" ? name : `${dir}/${name}`;
}

/** The target of a symlink, or null when `p` is not one. */
function readLink(p: string): string | null {
  try {
    return fs.readlinkSync(p);
  } catch {
    return null;
  }
}
