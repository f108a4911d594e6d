import { z } from "zod";
import { withChangePolicy } from "../../contract/schema.js";

/** Options of the Local backend (a host folder per workspace). */
export const LocalBackendSchema = withChangePolicy(
  z.strictObject({
    kind: z.literal("local"),
    /** Host folder holding one sub-folder per workspace id. */
    basedir: z.string().min(1).optional(),
    /** Exact host folder for this one workspace (overrides basedir). */
    path: z.string().min(1).optional(),
  }),
  {
    noun: "folder",
    // The folder is the workspace: another folder is another workspace, created before the old one goes.
    fields: { basedir: "replace", path: "replace" },
    hostPaths: ["basedir", "path"],
    dataFields: ["basedir", "path"],
    dataHome: (s, ws) => s.path ?? `${s.basedir ?? "(default basedir)"}/${ws.workspaceId}`,
    // Its record sits beside the folder.
    objectHome: (s, ws) => s.path ?? `${s.basedir ?? "(default basedir)"}/${ws.workspaceId}`,
  },
);

export type LocalBackendSpec = z.infer<typeof LocalBackendSchema>;
