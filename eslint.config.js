import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "bench/tmp/", "node_modules/", ".cache/", ".agentws/", "**/fixtures/**/*.cjs"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: "readonly", console: "readonly", Buffer: "readonly", setTimeout: "readonly", clearTimeout: "readonly", setInterval: "readonly", clearInterval: "readonly", URL: "readonly", AbortController: "readonly", AbortSignal: "readonly", TextEncoder: "readonly", TextDecoder: "readonly", fetch: "readonly", performance: "readonly", queueMicrotask: "readonly", setImmediate: "readonly", structuredClone: "readonly" } },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
      "@typescript-eslint/no-non-null-assertion": "off",
      "@typescript-eslint/no-explicit-any": "error",
      "no-console": "error",
    },
  },
  // Scripts, benches, examples and the CLI talk to a terminal.
  { files: ["bench/**", "scripts/**", "examples/**", "sdk/cli/**", "bin/**", "test/**", "stacks/**"], rules: { "no-console": "off" } },
);
