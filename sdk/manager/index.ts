// Public surface of the runtime manager (re-exported by sdk/index.ts).
export { IsolationPolicy, ISOLATION_POLICIES, assignWorkspaceId, sessionWorkspaceId, newWorkspaceId, blake2bHex, checkWorkspaceId } from "./ids.js";
export { type WorkspaceOwner } from "./ids.js";
export type { ManagerEvent, ManagerEventListener, ProvisionEvent, PauseEvent, EvictEvent, EvictReason, PoolEvent, ErrorEvent } from "./events.js";
export { parseFleetOutputs, readStackOutputs, type StackSelector } from "./fleet-source.js";
export { PrewarmSchema, type PrewarmOptions, type PoolStats } from "./pool.js";
export { WorkspaceManager, ManagerOptionsSchema, type ManagedWorkspace, type ManagedIdentity, type WorkspaceFactory } from "./manager.js";
export { type BackendProfile, type ManagerOptions, type WorkspaceManagerInit, type ManagerStats, type SweepResult } from "./manager.js";
export { LeaseKeeper, type Leases, type LeasedWorkspace, type LeaseKeeperStats } from "./lease.js";
