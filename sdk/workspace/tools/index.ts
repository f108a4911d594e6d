import type { Sandbox } from "../../sandbox.js";
import type { Track, WorkspaceTool } from "./common.js";
import { editTool } from "./edit.js";
import { globTool } from "./glob.js";
import { grepTool, type GrepEngine } from "./grep.js";
import { readTool } from "./read.js";
import { bashTool } from "./shell.js";
import { writeTool } from "./write.js";

export type { ToolResult, Track, WorkspaceTool } from "./common.js";
export type { GrepEngine } from "./grep.js";

export interface BuiltinToolsOptions {
  /** Every execution runs through this (activity tracking, in-flight count). */
  track: Track;
  /** Grep implementation: ripgrep when the sandbox has it ("auto", the default), or force one. */
  grepEngine?: GrepEngine;
}

/** The six built-in tools, in the reference's order: Bash, Edit, Glob, Grep, Read, Write. */
export function createBuiltinTools(sandbox: Sandbox, options: BuiltinToolsOptions): WorkspaceTool[] {
  const ctx = { sandbox, track: options.track };
  return [bashTool(ctx), editTool(ctx), globTool(ctx), grepTool(ctx, options.grepEngine ?? "auto"), readTool(ctx), writeTool(ctx)];
}
