import { configDefaults, defineConfig } from "vitest/config";

// One run, four projects (`vitest run` runs them all, as one pool; `--project <name>` picks one):
//   unit       pure tests: no engine, no network, nothing set up beyond `npm ci` (seconds)
//   emulators  the cloud backends through their real SDKs against local emulators (need the Docker engine)
//   live       the cloud backends against the real services (skipped without their credentials)
//   engines    everything else: real engines (local processes, bubblewrap, dockerd, the Kubernetes cluster,
//              OpenSandbox, Pulumi, PostgreSQL, the Python reference)
const UNIT = ["test/unit/**/*.test.ts"];
const EMULATORS = ["test/emulators/**/*.test.ts", "test/backends/e2b/**/*.test.ts"];
const LIVE = ["test/live/**/*.test.ts"];
// (A project's include is its own: the root sets none, since `extends` would add it to every project's.)

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 300_000,
    // Real engines (dockerd, bwrap, pulumi, the cluster, the emulators) are shared; most of the long
    // files wait on them rather than on the CPU, so three files at a time on 2 cores. Every project
    // inherits this one number, so `vitest run` keeps a single pool of three across all of them.
    maxWorkers: 3,
    reporters: ["default"],
    projects: [
      { extends: true, test: { name: "unit", include: UNIT } },
      { extends: true, test: { name: "emulators", include: EMULATORS } },
      { extends: true, test: { name: "live", include: LIVE } },
      { extends: true, test: { name: "engines", include: ["test/**/*.test.ts"], exclude: [...configDefaults.exclude, ...UNIT, ...EMULATORS, ...LIVE] } },
    ],
  },
});
