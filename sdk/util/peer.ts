import { createRequire } from "node:module";
import { UnavailableError } from "../errors.js";

/** How a peer package is loaded; replaceable so a test can make it fail as a missing install does. */
export type PeerImporter = (name: string) => unknown;

const defaultImporter: PeerImporter = (name) => createRequire(import.meta.url)(name);

/**
 * Loads an optional peer dependency (dockerode for Docker, ...); `usedBy` names what needs it ("the docker backend"). A missing package
 * is an error that names it and the command that installs it; any other load failure propagates.
 * The error is not retryable: nothing changes until someone installs the package.
 */
export function requirePeer<T>(name: string, usedBy: string, importer: PeerImporter = defaultImporter): T {
  try {
    return importer(name) as T;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException | undefined)?.code;
    const missing = (code === "MODULE_NOT_FOUND" || code === "ERR_MODULE_NOT_FOUND") && e instanceof Error && e.message.includes(`'${name}'`);
    if (!missing) throw e;
    throw new UnavailableError(`${usedBy} needs the package '${name}', which is not installed; run \`npm install ${name}\``, {
      cause: e,
      retryable: false,
      details: { package: name },
    });
  }
}
