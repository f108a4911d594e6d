/**
 * Child process of glob-redos.test.ts: runs the adversarial Glob and Grep calls in a workspace
 * given as argv[2] and prints their results as one JSON line. It runs apart so that a call which
 * blocks the event loop (a backtracking matcher) can be stopped by the parent's hang guard.
 */
import { LocalSandbox } from "../../sdk/kit/host-sandbox.js";
import { createBuiltinTools } from "../../sdk/workspace/tools/index.js";

const [, , root, callsJson] = process.argv;
const tools = new Map(createBuiltinTools(new LocalSandbox(root!), { track: (fn) => fn(), grepEngine: "scan" }).map((t) => [t.name, t]));
const calls = JSON.parse(callsJson!) as Array<[string, unknown]>;
const results: unknown[] = [];
for (const [name, input] of calls) {
  try {
    results.push(await tools.get(name)!.execute(input));
  } catch (e) {
    results.push({ thrown: (e as Error).message });
  }
}
process.stdout.write(`${JSON.stringify(results)}\n`);
