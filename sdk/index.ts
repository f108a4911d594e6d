// Public API of agent-workspaces (the package root). Every name is listed on purpose: no `export *`,
// so a helper added to a module does not become public by accident. api/agent-workspaces.api.md
// records this surface; `npm run api:update` rewrites it after a deliberate change.

// Errors and logging
export { WorkspaceError, InvalidArgumentError, PathEscapeError, NotFoundError, ConflictError, UnavailableError, TimeoutError } from "./errors.js";
export { TooLargeError, ClosedError, ExecFailedError, ProvisionFailedError, McpError, RateLimitedError, UnauthenticatedError } from "./errors.js";
export { ForbiddenError, UnsupportedError, InternalError, parseRetryAfter, isWorkspaceError, fromZodError, errorForCode } from "./errors.js";
export { type WorkspaceErrorCode, type WorkspaceErrorOptions, type InvalidArgumentOptions } from "./errors.js";
export { silentLogger, consoleLogger, type Logger, type ProgressEvent, type ProgressListener } from "./logger.js";
export type { Sandbox, ExecOptions, ExecResult, SpawnOptions, SandboxProcess, DirEntry, FileInfo, ListPage, ListPageOptions } from "./sandbox.js";
export type { TreeEntry, WalkTreeOptions, WalkTreeResult } from "./sandbox.js";
export { DEFAULT_LIST_PAGE, MAX_LIST_PAGE, treePath } from "./sandbox.js";
export { listDirectoryPage, walkDirectoryTree } from "./util/listing.js";

export { HTTP_STATUS, MCP_ERROR_CODE, toHttpStatus, toProblem, toMcpError, retryAfterHeader, type Problem } from "./errors-http.js";

// Fleet (the stack-output schema shared by providers and manager)
export { WorkspaceSpecSchema, FleetEntrySchema, FleetOutputsSchema, FLEET_OUTPUT_NAME, SECRET_MASK, SecretRefSchema } from "./contract/fleet.js";
export { secretFieldPaths, maskSecretFields, type WorkspaceSpec, type WorkspaceSpecInput, type FleetEntry } from "./contract/fleet.js";
export { type FleetOutputs, type SecretRef, type SecretPath } from "./contract/fleet.js";

// Backends: the contract, the registry, the option union
export { BackendSpecSchema, WorkspaceIdSchema, parseWorkspaceId, DEFAULT_MAX_PROCESSES, DEFAULT_MEMORY_BYTES } from "./contract/registry.js";
export { DEFAULT_CPUS, type BackendSpec, type BackendKind, type BackendSpecInput } from "./contract/registry.js";
export { LABELS, ensureBackend, type ManagedBy, type WorkspaceIdentity, type BackendState, type BackendDescription } from "./contract/driver.js";
export { type DriverContext, type DestroyOptions, type Driver, type EnsureOutcome } from "./contract/driver.js";
export { BACKEND_KINDS } from "./contract/registry.js";
export { loadBackend, loadDriver } from "./backends/load.js";
export type { BackendModule, BackendDefaults, BackendCommand, CommandIo } from "./contract/module.js";

// Workspace
export { Workspace, WorkspaceOptionsSchema, type WorkspaceOptions, type Scope } from "./workspace/workspace.js";
export { MCP_NAME_PATTERN, StdioTransportSchema, HttpTransportSchema, McpServerSpecSchema, isStateful } from "./workspace/mcp-spec.js";
export { type McpServerSpec, type McpClientJson } from "./workspace/mcp-spec.js";
export type { McpClientHandle, McpTool, McpToolResult } from "./workspace/mcp.js";
export type { Skill, SkillArchiveOptions } from "./workspace/skills.js";
export type { Message, ToolResult, DataBlock, TextBlock, ContentBlock } from "./workspace/offload.js";
export type { WorkspaceTool } from "./workspace/tools/index.js";
export { renderInstructions } from "./workspace/instructions.js";
export { EgressPolicySchema, type EgressPolicy } from "./util/egress.js";

// The backends that need no optional package, kept on the root for existing users. Every backend
// has its own entry point (agent-workspaces/local, /bubblewrap, /docker, ...); Docker and Daytona
// live only there, so the root's types never reference an optional peer (dockerode, @daytonaio/sdk).
export { LocalSandbox, LocalWorkspace, LocalWorkspaceOptionsSchema, type LocalWorkspaceOptions } from "./backends/local/index.js";
export { LocalWorkspaceManager, LocalWorkspaceManagerOptionsSchema, type LocalWorkspaceManagerOptions } from "./backends/local/index.js";
export { BubblewrapWorkspace, type BubblewrapWorkspaceOptions } from "./backends/bubblewrap/index.js";
export { BubblewrapWorkspaceManager, BubblewrapWorkspaceManagerOptionsSchema, type BubblewrapWorkspaceManagerOptions } from "./backends/bubblewrap/index.js";

// Runtime manager
export { IsolationPolicy, ISOLATION_POLICIES, assignWorkspaceId, sessionWorkspaceId, newWorkspaceId, blake2bHex } from "./manager/index.js";
export { checkWorkspaceId, type WorkspaceOwner, type ManagerEvent, type ManagerEventListener, type ProvisionEvent } from "./manager/index.js";
export { type PauseEvent, type EvictEvent, type EvictReason, type PoolEvent, type ErrorEvent, parseFleetOutputs } from "./manager/index.js";
export { readStackOutputs, type StackSelector, PrewarmSchema, type PrewarmOptions, type PoolStats, WorkspaceManager } from "./manager/index.js";
export { ManagerOptionsSchema, type ManagedWorkspace, type ManagedIdentity, type WorkspaceFactory, type BackendProfile } from "./manager/index.js";
export { type ManagerOptions, type WorkspaceManagerInit, type ManagerStats, type SweepResult, LeaseKeeper, type Leases } from "./manager/index.js";
export { type LeasedWorkspace, type LeaseKeeperStats } from "./manager/index.js";
