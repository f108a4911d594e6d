#!/usr/bin/env node
// Runs the compiled CLI from dist/, or the TypeScript source through tsx when dist/ is missing.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const compiled = join(root, "dist", "sdk", "cli", "main.js");
let mod;
if (existsSync(compiled)) mod = await import(pathToFileURL(compiled).href);
else {
  const { register } = await import("tsx/esm/api");
  register();
  mod = await import(pathToFileURL(join(root, "sdk", "cli", "main.ts")).href);
}
process.exitCode = await mod.main(process.argv.slice(2));
