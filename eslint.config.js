import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "bench/tmp/", "node_modules/", ".cache/", ".agentws/", "**/fixtures/**/*.cjs"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: "readonly",
        console: "readonly",
        Buffer: "readonly",
        setTimeout: "readonly",
        clearTimeout: "readonly",
        setInterval: "readonly",
        clearInterval: "readonly",
        URL: "readonly",
        AbortController: "readonly",
        AbortSignal: "readonly",
        TextEncoder: "readonly",
        TextDecoder: "readonly",
        fetch: "readonly",
        performance: "readonly",
        queueMicrotask: "readonly",
        setImmediate: "readonly",
        structuredClone: "readonly",
      },
    },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
      "@typescript-eslint/no-non-null-assertion": "off",
      "@typescript-eslint/no-explicit-any": "error",
      "no-console": "error",
    },
  },
  // Library errors are the closed family in sdk/errors.ts (issue 28): a subclass per code, never a raw code or a bare Error.
  {
    files: ["sdk/**/*.ts", "providers/**/*.ts", "stacks/**/*.ts"],
    ignores: ["sdk/errors.ts"],
    rules: {
      "no-restricted-syntax": [
        "error",
        {
          selector: "NewExpression[callee.name='WorkspaceError']",
          message:
            "Use the subclass for the code (new InvalidArgumentError(message, { field }), NotFoundError, ConflictError, ... from sdk/errors.ts), or errorForCode(code, message, options) for a code known only at run time.",
        },
        {
          selector: "NewExpression[callee.name='Error']",
          message:
            "Throw a typed error from sdk/errors.ts (InvalidArgumentError, InternalError for an impossible state, UnavailableError, ...). If a plain Error must stay (it stands for a foreign library's error), add `// eslint-disable-next-line no-restricted-syntax -- <reason>`.",
        },
        {
          selector: "CallExpression[callee.name='Error']",
          message: "Throw a typed error from sdk/errors.ts, not Error(...).",
        },
      ],
    },
  },
  // Scripts, benches, examples and the CLI talk to a terminal.
  { files: ["bench/**", "scripts/**", "examples/**", "sdk/cli/**", "bin/**", "test/**", "stacks/**"], rules: { "no-console": "off" } },
);
