import { createRequire } from "node:module";
import { UnavailableError } from "../errors.js";

/** How a peer package is loaded; replaceable so a test can make it fail as a missing install does. */
export type PeerImporter = (name: string) => unknown;

const defaultImporter: PeerImporter = (name) => createRequire(import.meta.url)(name);

/**
 * Loads an optional peer dependency of one backend (dockerode for Docker, ...). A missing package
 * is an error that names it and the command that installs it; any other load failure propagates.
 * The error is not retryable: nothing changes until someone installs the package.
 */
export function requirePeer<T>(name: string, backend: string, importer: PeerImporter = defaultImporter): T {
  try {
    return importer(name) as T;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException | undefined)?.code;
    const missing = (code === "MODULE_NOT_FOUND" || code === "ERR_MODULE_NOT_FOUND") && e instanceof Error && e.message.includes(`'${name}'`);
    if (!missing) throw e;
    throw new UnavailableError(`the ${backend} backend needs the package '${name}', which is not installed; run \`npm install ${name}\``, {
      cause: e,
      retryable: false,
      details: { package: name },
    });
  }
}
