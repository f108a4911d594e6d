import { z } from "zod";

/** Options of the Local backend (a host folder per workspace). */
export const LocalBackendSchema = z.strictObject({
  kind: z.literal("local"),
  /** Host folder holding one sub-folder per workspace id. */
  basedir: z.string().min(1).optional(),
  /** Exact host folder for this one workspace (overrides basedir). */
  path: z.string().min(1).optional(),
});

export type LocalBackendSpec = z.infer<typeof LocalBackendSchema>;
