import type { BackendSpecInput } from "./spec.js";
import type { Driver } from "./driver.js";

/**
 * The one place that maps a backend kind to its folder. Drivers load lazily so a user of the
 * Local backend never loads dockerode, and Pulumi provider methods capture nothing.
 */
export async function loadDriver(spec: BackendSpecInput): Promise<Driver> {
  switch (spec.kind) {
    case "local":
      return new (await import("./local/driver.js")).LocalDriver(spec);
    case "bubblewrap":
      return new (await import("./bubblewrap/driver.js")).BubblewrapDriver(spec);
    case "docker":
      return new (await import("./docker/driver.js")).DockerDriver(spec);
  }
}

export * from "./spec.js";
export * from "./driver.js";
