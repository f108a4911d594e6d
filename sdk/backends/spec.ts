import { z } from "zod";
import { fromZodError } from "../errors.js";

/**
 * Backend options, one zod schema per backend kind: the single source of truth for
 * workspace constructors, manager options, Pulumi inputs and HTTP bodies.
 * Each backend folder owns its schema; this file only joins them.
 */
export const WORKSPACE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
export const WorkspaceIdSchema = z
  .string()
  .regex(WORKSPACE_ID_PATTERN, "workspace id must be 1-63 chars of [A-Za-z0-9_.-], starting with a letter or digit");

/** The id, checked by WorkspaceIdSchema; an InvalidArgumentError naming `workspaceId` otherwise. */
export function parseWorkspaceId(id: string): string {
  const r = WorkspaceIdSchema.safeParse(id);
  if (!r.success) throw fromZodError("workspaceId", r.error);
  return r.data;
}

const EnvSchema = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "env names must be shell identifiers"), z.string());

/**
 * Resource caps, under the same names on every backend that can enforce them. They bound the
 * whole workspace (every process of its sandbox together), not one command.
 */
export const DEFAULT_MAX_PROCESSES = 512;
export const DEFAULT_MEMORY_BYTES = 2 * 1024 ** 3;
export const DEFAULT_CPUS = 2;
/** Tasks alive at once: processes and threads (a Node.js MCP server alone holds about a dozen). */
const MaxProcessesSchema = z.number().int().min(16).max(4_194_304).default(DEFAULT_MAX_PROCESSES);
/** Memory in bytes (swap included: it cannot stretch the cap); an allocation past it fails or the allocator is killed. */
const MemoryBytesSchema = z.number().int().min(64 * 1024 ** 2).max(2 ** 50).default(DEFAULT_MEMORY_BYTES);
/** CPU time as a number of cores (a CFS quota: 1.5 = one and a half cores' worth per period). */
const CpusSchema = z.number().min(0.01).max(1024).default(DEFAULT_CPUS);

export const LocalBackendSchema = z.strictObject({
  kind: z.literal("local"),
  /** Host folder holding one sub-folder per workspace id. */
  basedir: z.string().min(1).optional(),
  /** Exact host folder for this one workspace (overrides basedir). */
  path: z.string().min(1).optional(),
});

export const BubblewrapBackendSchema = z.strictObject({
  kind: z.literal("bubblewrap"),
  /** Host folder holding per-workspace folders (named by hashed ids, mode 0700). Omit for an ephemeral workspace. */
  basedir: z.string().min(1).optional(),
  /** "none" cuts the network (default); "host" shares the host's network namespace. */
  network: z.enum(["none", "host"]).default("none"),
  env: EnvSchema.optional(),
  /** Extra read-only host paths visible inside the sandbox, e.g. a toolchain prefix. */
  readOnlyPaths: z.array(z.string().startsWith("/")).optional(),
  /** Extra Python packages (pip specifiers), installed once per workspace with the host's python3, reinstalled when the list changes. */
  pythonPackages: z.array(z.string().min(1)).optional(),
  /** Extra npm packages, installed once per workspace with the host's npm, reinstalled when the list changes. */
  npmPackages: z.array(z.string().min(1)).optional(),
  /** Cap on the sandbox's tasks, enforced with a pids cgroup per sandbox where the service may make one (else one warning). */
  maxProcesses: MaxProcessesSchema,
  /** Cap on the sandbox's memory (tmpfs and page cache included), with a memory cgroup per sandbox where the service may make one. */
  memoryBytes: MemoryBytesSchema,
  /** Cap on CPU time in cores, with a cpu cgroup per sandbox where the service may make one. */
  cpus: CpusSchema,
});

export const DockerBackendSchema = z.strictObject({
  kind: z.literal("docker"),
  /** Host folder holding per-workspace folders bind-mounted at /workspace. Omit for an ephemeral container. */
  basedir: z.string().min(1).optional(),
  /** Base image the workspace image is built FROM (must exist locally or be pullable). */
  baseImage: z.string().min(1).default("agentws-base:bookworm"),
  /** Node major version expected in the image for npx-based MCP servers (recorded in the image hash). */
  nodeVersion: z.string().regex(/^\d+$/).optional(),
  pythonPackages: z.array(z.string().min(1)).optional(),
  npmPackages: z.array(z.string().min(1)).optional(),
  env: EnvSchema.optional(),
  /**
   * "none" (default): loopback only. "internet": a network of the workspace's own (other workspaces
   * are not on it) with outbound access, where the engine host's own addresses and link-local /
   * metadata addresses are refused by firewall rules this process installs (needs root on the engine's
   * host). "bridge": Docker's shared default bridge, an explicit opt-in: every "bridge" workspace
   * reaches every other one and the host's services.
   */
  network: z.enum(["none", "internet", "bridge"]).default("none"),
  /** Cap on the container's tasks (processes and threads): the engine's pids limit. */
  maxProcesses: MaxProcessesSchema,
  /** Cap on the container's memory; swap is capped at the same figure, so it cannot stretch it. */
  memoryBytes: MemoryBytesSchema,
  /** Cap on CPU time in cores (a CFS quota). */
  cpus: CpusSchema,
  /** Docker engine socket; default DOCKER_HOST or /var/run/docker.sock. */
  socketPath: z.string().min(1).optional(),
  /** Host paths bind-mounted read-only at the same path inside the container, e.g. a toolchain or a repo. */
  readOnlyPaths: z.array(z.string().startsWith("/")).optional(),
  /** Host PEM file added to the image's trust store (registries behind a TLS-inspecting proxy); its content is part of the image hash. */
  caCertificates: z.string().startsWith("/").optional(),
  /** "uid:gid" container processes run as. Default: the caller's own ids when it is not root (bind-mounted files stay the caller's), else root. */
  user: z.string().regex(/^\d+(:\d+)?$/, "user must be 'uid' or 'uid:gid' (numbers)").optional(),
});

export const BackendSpecSchema = z.discriminatedUnion("kind", [LocalBackendSchema, BubblewrapBackendSchema, DockerBackendSchema]);

export type LocalBackendSpec = z.infer<typeof LocalBackendSchema>;
export type BubblewrapBackendSpec = z.infer<typeof BubblewrapBackendSchema>;
export type DockerBackendSpec = z.infer<typeof DockerBackendSchema>;
export type BackendSpec = z.infer<typeof BackendSpecSchema>;
export type BackendKind = BackendSpec["kind"];
export type BackendSpecInput = z.input<typeof BackendSpecSchema>;
