import os from "node:os";
import path, { posix } from "node:path";
import { PathEscapeError } from "./errors.js";

/**
 * Checks a caller-supplied workspace-relative path before any I/O and returns it normalised
 * ("" is the workspace root). Rejects absolute paths, `..` segments, backslashes and NUL bytes.
 * Symlinks are resolved later, by the sandbox, against its root.
 */
export function checkRelativePath(path: string, field = "path"): string {
  const at = { field };
  if (typeof path !== "string") throw new PathEscapeError(`path '${String(path)}' (${field}) must be a string`, at);
  if (path.includes("\0")) throw new PathEscapeError(`path '${path.replace(/\0/g, "\\0")}' (${field}) contains a NUL byte`, at);
  if (path.includes("\\")) throw new PathEscapeError(`path '${path}' (${field}) contains a backslash; use '/' separators`, at);
  if (path.startsWith("/")) throw new PathEscapeError(`path '${path}' (${field}) must be relative to the workspace root`, at);
  const segments = path.split("/");
  if (segments.includes("..")) throw new PathEscapeError(`path '${path}' (${field}) must not contain '..'`, at);
  const normal = posix.normalize(path === "" ? "." : path);
  return normal === "." ? "" : normal.replace(/\/+$/, "");
}

/**
 * Maps a path as an agent sees it (absolute under `workdir`, or relative to it) to a
 * workspace-relative path. Anything outside `workdir` is a PathEscapeError.
 */
export function toWorkspacePath(workdir: string, path: string, field = "path"): string {
  if (typeof path === "string" && path.startsWith("/")) {
    const root = workdir.replace(/\/+$/, "") || "/";
    const normal = posix.normalize(path);
    if (normal === root) return "";
    const prefix = root === "/" ? "/" : `${root}/`;
    // The root is not named: on a host backend it is a host path, and this message reaches HTTP callers.
    if (!normal.startsWith(prefix)) throw new PathEscapeError(`path '${path}' (${field}) is outside the workspace`, { field });
    if (path.split("/").includes("..")) throw new PathEscapeError(`path '${path}' (${field}) must not contain '..'`, { field });
    return checkRelativePath(normal.slice(prefix.length), field);
  }
  return checkRelativePath(path, field);
}

/** Joins workspace-relative segments (already checked). */
export function joinRel(...parts: string[]): string {
  return parts.filter((p) => p !== "").join("/");
}

/** A name usable as one path segment: no separators, not `.`/`..`, not empty, no NUL. */
export function isPlainName(name: string): boolean {
  return typeof name === "string" && name !== "" && name !== "." && name !== ".." && !/[\\/\0]/.test(name);
}

/** A host path with `~` or `~/…` expanded to the user's home folder, as a shell would; others unchanged. */
export function expandHome(p: string): string {
  return p === "~" ? os.homedir() : p.startsWith("~/") ? path.join(os.homedir(), p.slice(2)) : p;
}
