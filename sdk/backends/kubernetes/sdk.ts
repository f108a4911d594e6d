import { requirePeer, type PeerImporter } from "../../util/peer.js";

type K8sModule = typeof import("@kubernetes/client-node");

/**
 * @kubernetes/client-node, an optional peer dependency, loaded on first use: importing this
 * backend (or the CLI, which lists every backend's commands) never needs it, and a missing install
 * is an error saying `npm install @kubernetes/client-node`.
 */
export const loadKubernetesClient = (importer?: PeerImporter): K8sModule =>
  requirePeer<K8sModule>("@kubernetes/client-node", "the kubernetes backend", importer);
