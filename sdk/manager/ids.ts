import { randomFillSync } from "node:crypto";
import { InvalidArgumentError } from "../errors.js";
import { WORKSPACE_ID_PATTERN } from "../contract/schema.js";
import { blake2bHex } from "../util/blake2b.js";
import { checkIdentityId, isNonBlank } from "../util/identity-id.js";

export { blake2bHex, checkIdentityId, isNonBlank };

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

/**
 * uuid4 hex ids, minted 256 at a time: random bytes from the CSPRNG (as `randomUUID` itself pools
 * its entropy), version and variant bits set, hex-encoded in one call; each id is then a
 * 32-character copy out of that text. Every random byte is used once.
 */
const IDS_PER_BATCH = 256;
const rawIds = Buffer.alloc(16 * IDS_PER_BATCH);
const hexIds = Buffer.alloc(32 * IDS_PER_BATCH);
let nextId = IDS_PER_BATCH;

/** A fresh random id: uuid4 hex, 32 chars (the reference's `_generate_id`). */
export function newWorkspaceId(): string {
  if (nextId === IDS_PER_BATCH) {
    randomFillSync(rawIds);
    for (let at = 0; at < rawIds.length; at += 16) {
      // RFC 4122 version 4 and variant bits, as uuid4 sets them.
      rawIds[at + 6] = (rawIds[at + 6]! & 0x0f) | 0x40;
      rawIds[at + 8] = (rawIds[at + 8]! & 0x3f) | 0x80;
    }
    hexIds.write(rawIds.toString("hex"), "latin1");
    nextId = 0;
  }
  const at = 32 * nextId++;
  return hexIds.toString("latin1", at, at + 32);
}

/**
 * Derived ids by owner, so a hot caller hashes once: BLAKE2b costs about a microsecond, a lookup
 * tens of nanoseconds. Keyed by user, then agent, to avoid building the joined string. Bounded:
 * past MEMO_LIMIT entries the memo starts over (a miss only costs a hash again).
 */
const MEMO_LIMIT = 50_000;
// Inner tables are prototype-less objects (any agent id, "__proto__" included, is a plain key):
// a little faster than a Map for the handful of agents per user.
const perAgentMemo = new Map<string, Record<string, string>>();
const perUserMemo = new Map<string, string>();
let memoSize = 0;

/** Counts one new entry; true when the memo was emptied to make room. */
function remember(): boolean {
  if (++memoSize <= MEMO_LIMIT) return false;
  perAgentMemo.clear();
  perUserMemo.clear();
  memoSize = 1;
  return true;
}

/**
 * The reference's `assign_workspace_id`, byte for byte: PER_AGENT hashes "<user>::<agent>",
 * PER_USER hashes "user::<user>", PER_SESSION mints a fresh id (the caller stores it with its
 * session). Pure apart from that mint.
 *
 * Only the ids a policy uses are required, as in the reference: the session is ignored under
 * PER_AGENT and PER_USER (an empty one, the reference's "legacy scope", is fine), the agent under
 * PER_USER. One deliberate refusal: a userId containing "::" or ending in ":" would make
 * "<user>::<agent>" ambiguous (user "a", agent "::b" and user "a:", agent ":b" hash alike), i.e.
 * two users could land in one workspace.
 */
export function assignWorkspaceId(owner: WorkspaceOwner, isolation: IsolationPolicy = IsolationPolicy.PER_AGENT): string {
  // A memo hit skips checkOwner: only owners that passed it (the check depends on nothing else) are memoised.
  switch (isolation) {
    case IsolationPolicy.PER_AGENT: {
      const { userId, agentId } = owner;
      let byAgent = perAgentMemo.get(userId);
      // A non-string agent id must reach checkOwner, not match the memo under its string form.
      let id = typeof agentId === "string" ? byAgent?.[agentId] : undefined;
      if (id !== undefined) return id;
      checkOwner(owner, isolation);
      id = blake2bHex(`${userId}::${agentId}`, 8);
      if (remember()) byAgent = undefined;
      if (!byAgent) perAgentMemo.set(userId, (byAgent = Object.create(null) as Record<string, string>));
      byAgent[agentId] = id;
      return id;
    }
    case IsolationPolicy.PER_USER: {
      let id = perUserMemo.get(owner.userId);
      if (id !== undefined) return id;
      checkOwner(owner, isolation);
      id = blake2bHex(`user::${owner.userId}`, 8);
      remember();
      perUserMemo.set(owner.userId, id);
      return id;
    }
    case IsolationPolicy.PER_SESSION:
      checkOwner(owner, isolation);
      return newWorkspaceId();
    default:
      checkOwner(owner, isolation);
      throw new InvalidArgumentError(`must be one of ${ISOLATION_POLICIES.join(", ")}, got '${String(isolation)}'`, { field: "isolation" });
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
  if (owner.sessionId === undefined)
    throw new InvalidArgumentError("is required under the per_session policy when no workspaceId is given", { field: "sessionId" });
  return blake2bHex(`session::${owner.userId}::${owner.agentId}::${owner.sessionId}`, 8);
}

/** Checks the ids the policy uses: the agent unless PER_USER, a given session only under PER_SESSION. */
function checkOwner(owner: WorkspaceOwner, isolation: IsolationPolicy): void {
  if (!ISOLATION_POLICIES.includes(isolation))
    throw new InvalidArgumentError(`must be one of ${ISOLATION_POLICIES.join(", ")}, got '${String(isolation)}'`, { field: "isolation" });
  checkIdentityId(owner.userId, "userId");
  if (isolation !== IsolationPolicy.PER_USER) checkIdentityId(owner.agentId, "agentId");
  if (isolation === IsolationPolicy.PER_SESSION && owner.sessionId !== undefined) checkIdentityId(owner.sessionId, "sessionId");
  if (owner.userId.includes("::") || owner.userId.endsWith(":"))
    throw new InvalidArgumentError("must not contain '::' or end with ':' (it would make workspace ids of different users collide)", { field: "userId" });
}

/** Throws InvalidArgumentError unless `id` is a safe workspace id (it names folders and backend objects). */
export function checkWorkspaceId(id: unknown, field = "workspaceId"): string {
  if (typeof id !== "string" || !WORKSPACE_ID_PATTERN.test(id))
    throw new InvalidArgumentError("must be 1-63 chars of [A-Za-z0-9_.-], starting with a letter or digit", { field });
  return id;
}
