import { z } from "zod";
import { CpusSchema, EnvSchema, MaxProcessesSchema, MemoryBytesSchema, withChangePolicy } from "../../contract/schema.js";

/** Options of the Docker backend (a container per workspace). */
export const DockerBackendSchema = withChangePolicy(
  z.strictObject({
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
    user: z
      .string()
      .regex(/^\d+(:\d+)?$/, "user must be 'uid' or 'uid:gid' (numbers)")
      .optional(),
    /**
     * Mount the image read-only (default true), with sized tmpfs at /tmp, /var/tmp, /run and /root: the
     * agent cannot replace the interpreter (or /etc/ld.so.preload, or a library) the next runner starts
     * from. false weakens that boundary (an agent that replaces python3 and kills its runner becomes the
     * next one); it lets tools write into the image's folders (apt, pip without --user), lost on re-create.
     */
    readOnlyRootfs: z.boolean().default(true),
  }),
  {
    noun: "container",
    // A container's image, env, mounts, network, user and labels (tags) are fixed at creation: a change
    // re-creates it over the same bind mount (the image built first). Caps apply to the running container.
    fields: {
      basedir: "replace",
      socketPath: "replace",
      baseImage: "recreate",
      nodeVersion: "recreate",
      pythonPackages: "recreate",
      npmPackages: "recreate",
      caCertificates: "recreate",
      env: "recreate",
      network: "recreate",
      readOnlyPaths: "recreate",
      user: "recreate",
      readOnlyRootfs: "recreate",
      maxProcesses: "update",
      memoryBytes: "update",
      cpus: "update",
    },
    tags: "recreate",
    hostPaths: ["basedir", "readOnlyPaths", "caCertificates"],
    // The folder, and the engine whose container may still use it.
    dataFields: ["basedir", "socketPath"],
    // Files live in <basedir>/<id>; an ephemeral container (no basedir) holds them itself.
    dataHome: (s, ws) => (s.basedir === undefined ? undefined : `${s.basedir}/${ws.workspaceId}`),
    // One container name per id and engine: a replacement on the same engine deletes the old first.
    objectHome: (s, ws) => `${s.socketPath ?? "(default engine)"}\0${ws.workspaceId}`,
  },
);

export type DockerBackendSpec = z.infer<typeof DockerBackendSchema>;
