// Public API of agent-workspaces. Names follow ../ARCHITECTURE.md and are a contract.

// Errors, logging, contracts
export * from "./errors.js";
export * from "./logger.js";
export type * from "./sandbox.js";
export * from "./paths.js";
export * from "./fleet.js";
export * from "./backends/registry.js";

// Workspace
export { Workspace, WorkspaceOptionsSchema, type WorkspaceOptions, type Scope } from "./workspace/workspace.js";
export * from "./workspace/mcp-spec.js";
export type { McpClientHandle, McpTool, McpToolResult } from "./workspace/mcp.js";
export type { Skill, SkillArchiveOptions } from "./workspace/skills.js";
export type { Message, ToolResult, DataBlock, TextBlock, ContentBlock } from "./workspace/offload.js";
export type { WorkspaceTool } from "./workspace/tools/index.js";
export { renderInstructions } from "./workspace/instructions.js";

// Backends
export { LocalSandbox } from "./backends/local/sandbox.js";
export { LocalWorkspace, LocalWorkspaceOptionsSchema, type LocalWorkspaceOptions } from "./backends/local/workspace.js";
export { BubblewrapWorkspace, type BubblewrapWorkspaceOptions } from "./backends/bubblewrap/workspace.js";
export { DockerWorkspace, type DockerWorkspaceOptions } from "./backends/docker/workspace.js";
export { DockerDriver } from "./backends/docker/driver.js";
export type { PruneImagesOptions, PruneImagesResult } from "./backends/docker/image.js";
export { BubblewrapWorkspaceManager, BubblewrapWorkspaceManagerOptionsSchema, type BubblewrapWorkspaceManagerOptions } from "./backends/bubblewrap/manager.js";
export { DockerWorkspaceManager, DockerWorkspaceManagerOptionsSchema, type DockerWorkspaceManagerOptions } from "./backends/docker/manager.js";

// Runtime manager
export * from "./manager/index.js";
