import { z } from "zod";
import { EnvSchema } from "../../contract/schema.js";

/** Options of the OpenSandbox backend (a sandbox per workspace on an OpenSandbox server). */
export const OpenSandboxBackendSchema = z.strictObject({
  kind: z.literal("opensandbox"),
  /** The server, "host:port" or a URL; default OPEN_SANDBOX_DOMAIN, else localhost:8080. */
  domain: z.string().min(1).optional(),
  /** Scheme for the server and execd when `domain` has none. */
  protocol: z.enum(["http", "https"]).default("http"),
  /** The server's API key (sent as OPEN-SANDBOX-API-KEY); default OPEN_SANDBOX_API_KEY. A secret: never logged or stored in plain text. */
  apiKey: z.string().min(1).optional(),
  /** Sandbox image; it needs /bin/sh and python3 (the in-sandbox helper that runs spawned processes). */
  image: z.string().min(1).default("python:3.11-slim"),
  /**
   * Keep-alive: the server removes a sandbox this many seconds after its last renewal; the handle
   * renews it while the workspace is in use. null: never expires (the server must allow it).
   */
  timeoutSeconds: z
    .number()
    .int()
    .min(60)
    .max(86_400 * 30)
    .nullable()
    .default(3600),
  /** Per-request timeout towards the server and execd. */
  requestTimeoutSeconds: z.number().positive().max(3600).default(60),
  /** Route execd (and the helper) through the server instead of the sandbox's published ports. */
  useServerProxy: z.boolean().default(false),
  env: EnvSchema.optional(),
  /** Python packages pip-installs at create (into the image's python3). */
  extraPip: z
    .array(
      z
        .string()
        .min(1)
        .regex(/^[^\s'"\\]+$/, "one requirement per entry, without spaces or quotes"),
    )
    .optional(),
  /**
   * A folder on the server's Docker host: `<basedir>/<workspaceId>` is bind-mounted at /workspace,
   * so files outlive the sandbox (a destroyed sandbox is recreated over them). Omit: files live in
   * the sandbox only. Also scopes listing: drivers with another basedir never see these sandboxes.
   */
  basedir: z.string().startsWith("/").optional(),
  /** Extra metadata stamped on every sandbox (Kubernetes label syntax). */
  metadata: z.record(z.string().min(1).max(63), z.string().max(63)).optional(),
});

export type OpenSandboxBackendSpec = z.infer<typeof OpenSandboxBackendSchema>;
