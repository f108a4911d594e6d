import { z } from "zod";
import { CpusSchema, EnvSchema, MaxProcessesSchema, MemoryBytesSchema } from "../shared/schema.js";

/** Options of the Bubblewrap backend (a host folder mounted into a bwrap sandbox). */
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

export type BubblewrapBackendSpec = z.infer<typeof BubblewrapBackendSchema>;
