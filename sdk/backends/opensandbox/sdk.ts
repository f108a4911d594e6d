import { requirePeer, type PeerImporter } from "../../util/peer.js";

type OpenSandboxModule = typeof import("@alibaba-group/opensandbox");

/**
 * @alibaba-group/opensandbox, an optional peer dependency, loaded on first use: importing this
 * backend (or the CLI) never needs it, and a missing install is an error naming the package.
 */
export const loadOpenSandbox = (importer?: PeerImporter): OpenSandboxModule =>
  requirePeer<OpenSandboxModule>("@alibaba-group/opensandbox", "the opensandbox backend", importer);
