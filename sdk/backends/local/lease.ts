import path from "node:path";
import { FileLeases } from "../../kit/lease.js";

/**
 * Local replicas' leases: files under `<basedir>/.agentws/leases` (not a workspace folder: ids
 * start with a letter or digit). A single-folder spec (`path`) keeps them beside that folder.
 * Local folders never pause, so these only tell the manager whether another replica is active.
 */
export function localLeases(basedir: string, singleFolder: string | undefined): FileLeases {
  const root = singleFolder
    ? path.join(path.dirname(singleFolder), `.agentws-leases-${path.basename(singleFolder)}`)
    : path.join(basedir, ".agentws", "leases");
  return new FileLeases(root);
}
