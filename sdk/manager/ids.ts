import { randomUUID } from "node:crypto";
import { blake2b } from "@noble/hashes/blake2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";
import { InvalidArgumentError } from "../errors.js";
import { WORKSPACE_ID_PATTERN } from "../backends/spec.js";

/** Which callers share one workspace. String values match the reference. */
export const IsolationPolicy = {
  PER_AGENT: "per_agent",
  PER_SESSION: "per_session",
  PER_USER: "per_user",
} as const;
export type IsolationPolicy = (typeof IsolationPolicy)[keyof typeof IsolationPolicy];
export const ISOLATION_POLICIES: readonly IsolationPolicy[] = Object.values(IsolationPolicy);

export interface WorkspaceOwner {
  userId: string;
  agentId: string;
  sessionId?: string | undefined;
}

/** Unkeyed BLAKE2b with a `bytes`-long digest (a BLAKE2b parameter, not a truncation), as lowercase hex. */
export function blake2bHex(text: string, bytes: number): string {
  return bytesToHex(blake2b(utf8ToBytes(text), { dkLen: bytes }));
}

/** A fresh random id: uuid4 hex, 32 chars (the reference's `_generate_id`). */
export function newWorkspaceId(): string {
  return randomUUID().replaceAll("-", "");
}

/**
 * The reference's `assign_workspace_id`, byte for byte: PER_AGENT hashes "<user>::<agent>",
 * PER_USER hashes "user::<user>", PER_SESSION mints a fresh id (the caller stores it with its
 * session). Pure apart from that mint.
 *
 * One deliberate refusal: a userId containing "::" or ending in ":" would make "<user>::<agent>"
 * ambiguous (user "a", agent "::b" and user "a:", agent ":b" hash alike), i.e. two users could
 * land in one workspace.
 */
export function assignWorkspaceId(owner: WorkspaceOwner, isolation: IsolationPolicy = IsolationPolicy.PER_AGENT): string {
  checkOwner(owner, isolation);
  switch (isolation) {
    case IsolationPolicy.PER_AGENT:
      return blake2bHex(`${owner.userId}::${owner.agentId}`, 8);
    case IsolationPolicy.PER_USER:
      return blake2bHex(`user::${owner.userId}`, 8);
    case IsolationPolicy.PER_SESSION:
      return newWorkspaceId();
  }
}

/**
 * The id `getWorkspace` uses under PER_SESSION when the caller passes no workspace id.
 * The reference mints a fresh id on every such call, so each call built another workspace and the
 * session's files were orphaned; hashing the session keeps one workspace per session, across
 * restarts too. The "session::" prefix keeps it apart from the PER_AGENT and PER_USER inputs.
 */
export function sessionWorkspaceId(owner: WorkspaceOwner): string {
  checkOwner(owner, IsolationPolicy.PER_SESSION);
  if (!owner.sessionId) throw new InvalidArgumentError("sessionId", "is required under the per_session policy when no workspaceId is given");
  return blake2bHex(`session::${owner.userId}::${owner.agentId}::${owner.sessionId}`, 8);
}

function checkOwner(owner: WorkspaceOwner, isolation: IsolationPolicy): void {
  if (!ISOLATION_POLICIES.includes(isolation))
    throw new InvalidArgumentError("isolation", `must be one of ${ISOLATION_POLICIES.join(", ")}, got '${String(isolation)}'`);
  if (typeof owner.userId !== "string") throw new InvalidArgumentError("userId", "must be a string");
  if (typeof owner.agentId !== "string") throw new InvalidArgumentError("agentId", "must be a string");
  if (owner.userId.includes("::") || owner.userId.endsWith(":"))
    throw new InvalidArgumentError("userId", "must not contain '::' or end with ':' (it would make workspace ids of different users collide)");
}

/** Throws InvalidArgumentError unless `id` is a safe workspace id (it names folders and backend objects). */
export function checkWorkspaceId(id: unknown, field = "workspaceId"): string {
  if (typeof id !== "string" || !WORKSPACE_ID_PATTERN.test(id))
    throw new InvalidArgumentError(field, "must be 1-63 chars of [A-Za-z0-9_.-], starting with a letter or digit");
  return id;
}
