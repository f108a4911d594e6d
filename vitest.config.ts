import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 300_000,
    // Real engines (dockerd, bwrap, pulumi) are shared; keep file-level parallelism modest on 2 cores.
    maxWorkers: 2,
    reporters: ["default"],
  },
});
