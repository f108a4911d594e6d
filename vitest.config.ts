import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 300_000,
    // Real engines (dockerd, bwrap, pulumi, the cluster, the emulators) are shared; most of the long
    // files wait on them rather than on the CPU, so three files at a time on 2 cores.
    maxWorkers: 3,
    reporters: ["default"],
  },
});
