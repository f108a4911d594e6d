import { z } from "zod";
import { EnvSchema } from "../../contract/schema.js";

/** Minutes, as Daytona counts its lifecycle intervals. */
const Minutes = z.number().int().min(0).max(525_600);

/**
 * Options of the Daytona backend (a Daytona sandbox per workspace, through `@daytonaio/sdk`).
 * `apiKey` is a secret-bearing field: a Pulumi secret in state, masked in previews, never in logs,
 * errors or descriptions. Without it the SDK's own DAYTONA_API_KEY is used.
 */
export const DaytonaBackendSchema = z.strictObject({
  kind: z.literal("daytona"),
  /** API key (secret); default the DAYTONA_API_KEY environment variable. */
  apiKey: z.string().min(1).optional(),
  /** API endpoint; default DAYTONA_API_URL, else https://app.daytona.io/api. */
  apiUrl: z.url({ protocol: /^https?$/ }).optional(),
  /** Region / runner target; default DAYTONA_TARGET, else the organization's default. */
  target: z.string().min(1).optional(),
  /** Seconds one lifecycle call (create, start, stop) may take before it fails with `timeout`. */
  timeoutSeconds: z.number().int().min(1).max(3600).default(300),
  /** Snapshot the sandbox is created from (default: the organization's default snapshot). */
  snapshot: z.string().min(1).optional(),
  /** A base image instead of a snapshot (Daytona builds it); exclusive with `snapshot` (checked by the driver). */
  image: z.string().min(1).optional(),
  /** Environment of the sandbox (values are secret-bearing, as on every backend). */
  env: EnvSchema.optional(),
  /** Minutes without activity before Daytona stops the sandbox; 0 never (a leaked one then runs forever). */
  autoStopInterval: Minutes.default(15),
  /** Minutes stopped before Daytona archives the sandbox (its files go to object storage; a start restores them). */
  autoArchiveInterval: Minutes.optional(),
  /** Python packages installed with pip into the sandbox once, right after it is created. */
  extraPip: z
    .array(
      z
        .string()
        .min(1)
        .regex(/^[^\s'"\\]+$/, "one pip requirement without spaces or quotes"),
    )
    .optional(),
  /** OS user the sandbox runs as (default the snapshot's). */
  user: z
    .string()
    .regex(/^[a-z_][a-z0-9_-]{0,31}$/)
    .optional(),
});

export type DaytonaBackendSpec = z.infer<typeof DaytonaBackendSchema>;
