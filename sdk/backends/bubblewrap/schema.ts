import { z } from "zod";
import { CpusSchema, EnvSchema, MaxProcessesSchema, MemoryBytesSchema, withChangePolicy } from "../../contract/schema.js";

/** Options of the Bubblewrap backend (a host folder mounted into a bwrap sandbox). */
export const BubblewrapBackendSchema = withChangePolicy(
  z.strictObject({
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
  }),
  {
    noun: "sandbox folder",
    // Every command is a fresh bwrap over the same folder: all but the folder apply in place
    // (packages are reinstalled, network, env, mounts and caps read at the next command).
    fields: {
      basedir: "replace",
      network: "update",
      env: "update",
      readOnlyPaths: "update",
      pythonPackages: "update",
      npmPackages: "update",
      maxProcesses: "update",
      memoryBytes: "update",
      cpus: "update",
    },
    hostPaths: ["basedir", "readOnlyPaths"],
    // Folder <basedir>/<h(user)>/<h(id)>; an ephemeral one (no basedir) goes with its record.
    dataFields: ["basedir"],
    dataHome: (s, ws) => (s.basedir === undefined ? undefined : `${s.basedir}\0${ws.userId ?? ""}\0${ws.workspaceId}`),
    objectHome: (s, ws) => `${s.basedir ?? "(ephemeral)"}\0${ws.workspaceId}`,
  },
);

export type BubblewrapBackendSpec = z.infer<typeof BubblewrapBackendSchema>;
