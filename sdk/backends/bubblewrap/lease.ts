import path from "node:path";
import { FileLeases } from "../../kit/lease.js";

/**
 * Bubblewrap replicas' leases: files under `<basedir>/.agentws/leases`, the driver's state folder,
 * which no sandbox mounts (each sandbox sees only its own workspace folder). Replicas share leases
 * exactly when they share the basedir, which is also when they share the workspaces.
 */
export function bubblewrapLeases(basedir: string): FileLeases {
  return new FileLeases(path.join(basedir, ".agentws", "leases"));
}
