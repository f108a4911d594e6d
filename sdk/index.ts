// Public API of agent-workspaces (the package root). Every name is listed on purpose: no `export *`,
// so a helper added to a module does not become public by accident. api/agent-workspaces.api.md
// records this surface; `npm run api:update` rewrites it after a deliberate change.

// Errors and logging
export {
  WorkspaceError,
  InvalidArgumentError,
  PathEscapeError,
  NotFoundError,
  ConflictError,
  UnavailableError,
  TimeoutError,
  TooLargeError,
  ClosedError,
  ExecFailedError,
  ProvisionFailedError,
  McpError,
  RateLimitedError,
  UnauthenticatedError,
  ForbiddenError,
  UnsupportedError,
  InternalError,
  parseRetryAfter,
  isWorkspaceError,
  fromZodError,
  errorForCode,
  type WorkspaceErrorCode,
  type WorkspaceErrorOptions,
  type InvalidArgumentOptions,
} from "./errors.js";
export { silentLogger, consoleLogger, type Logger, type ProgressEvent, type ProgressListener } from "./logger.js";
export type {
  Sandbox,
  ExecOptions,
  ExecResult,
  SpawnOptions,
  SandboxProcess,
  DirEntry,
  FileInfo,
  ListPage,
  ListPageOptions,
  TreeEntry,
  WalkTreeOptions,
  WalkTreeResult,
} from "./sandbox.js";
export { DEFAULT_LIST_PAGE, MAX_LIST_PAGE, treePath } from "./sandbox.js";
export { listDirectoryPage, walkDirectoryTree } from "./util/listing.js";

export { HTTP_STATUS, MCP_ERROR_CODE, toHttpStatus, toProblem, toMcpError, retryAfterHeader, type Problem } from "./errors-http.js";

// Fleet (the stack-output schema shared by providers and manager)
export {
  WorkspaceSpecSchema,
  FleetEntrySchema,
  FleetOutputsSchema,
  FLEET_OUTPUT_NAME,
  SECRET_MASK,
  SecretRefSchema,
  secretFieldPaths,
  maskSecretFields,
  type WorkspaceSpec,
  type WorkspaceSpecInput,
  type FleetEntry,
  type FleetOutputs,
  type SecretRef,
  type SecretPath,
} from "./contract/fleet.js";

// Backends: the contract, the registry, the option union
export {
  BackendSpecSchema,
  WorkspaceIdSchema,
  parseWorkspaceId,
  DEFAULT_MAX_PROCESSES,
  DEFAULT_MEMORY_BYTES,
  DEFAULT_CPUS,
  type BackendSpec,
  type BackendKind,
  type BackendSpecInput,
} from "./contract/registry.js";
export {
  LABELS,
  ensureBackend,
  type ManagedBy,
  type WorkspaceIdentity,
  type BackendState,
  type BackendDescription,
  type DriverContext,
  type DestroyOptions,
  type Driver,
  type EnsureOutcome,
} from "./contract/driver.js";
export { BACKEND_KINDS } from "./contract/registry.js";
export { loadBackend, loadDriver } from "./backends/load.js";
export type { BackendModule, BackendDefaults, BackendCommand, CommandIo } from "./contract/module.js";

// Workspace
export { Workspace, WorkspaceOptionsSchema, type WorkspaceOptions, type Scope } from "./workspace/workspace.js";
export {
  MCP_NAME_PATTERN,
  StdioTransportSchema,
  HttpTransportSchema,
  McpServerSpecSchema,
  isStateful,
  type McpServerSpec,
  type McpClientJson,
} from "./workspace/mcp-spec.js";
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
export {
  IsolationPolicy,
  ISOLATION_POLICIES,
  assignWorkspaceId,
  sessionWorkspaceId,
  newWorkspaceId,
  blake2bHex,
  checkWorkspaceId,
  type WorkspaceOwner,
  type ManagerEvent,
  type ManagerEventListener,
  type ProvisionEvent,
  type PauseEvent,
  type EvictEvent,
  type EvictReason,
  type PoolEvent,
  type ErrorEvent,
  parseFleetOutputs,
  readStackOutputs,
  type StackSelector,
  PrewarmSchema,
  type PrewarmOptions,
  type PoolStats,
  WorkspaceManager,
  ManagerOptionsSchema,
  type ManagedWorkspace,
  type ManagedIdentity,
  type WorkspaceFactory,
  type BackendProfile,
  type ManagerOptions,
  type WorkspaceManagerInit,
  type ManagerStats,
  type SweepResult,
  LeaseKeeper,
  type Leases,
  type LeasedWorkspace,
  type LeaseKeeperStats,
} from "./manager/index.js";
