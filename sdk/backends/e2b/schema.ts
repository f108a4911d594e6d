import { z } from "zod";
import { EnvSchema } from "../../contract/schema.js";

/**
 * Options of the E2B backend (one E2B sandbox per workspace). The API key is a credential: it is
 * a Pulumi secret in state (see secretFieldPaths), never logged, never in an error or a description.
 */
export const E2BBackendSchema = z.strictObject({
  kind: z.literal("e2b"),
  /** Template (or snapshot) new sandboxes start from. */
  template: z.string().min(1).default("base"),
  /** E2B API key; default the E2B_API_KEY environment variable. */
  apiKey: z.string().min(1).optional(),
  /** E2B domain (self-hosted E2B); default E2B_DOMAIN or e2b.app. */
  domain: z.string().min(1).optional(),
  /** Control-plane URL, overriding the one derived from `domain` (a self-hosted or proxied API). */
  apiUrl: z.string().url().optional(),
  /** envd URL every sandbox is reached at, routed by the E2b-Sandbox-Id header (a proxy in front of E2B's sandboxes). */
  sandboxUrl: z.string().url().optional(),
  /** The sandbox's keep-alive in seconds: renewed while the workspace is in use; past it E2B pauses the sandbox. */
  timeoutSeconds: z.number().int().min(10).max(86_400).default(300),
  /** Environment of every command in the sandbox (values are secret in Pulumi state). */
  env: EnvSchema.optional(),
  /** Extra sandbox metadata; it never overrides the identity keys this SDK stamps. */
  sandboxMetadata: z.record(z.string().min(1), z.string()).optional(),
  /** Python packages pip-installs in a new sandbox (once, when it is created). */
  extraPip: z
    .array(
      z
        .string()
        .min(1)
        .regex(/^[^\s;&|`$<>]+$/, "a package spec, no shell characters"),
    )
    .optional(),
});

export type E2BBackendSpec = z.infer<typeof E2BBackendSchema>;
