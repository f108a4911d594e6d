import { describe } from "vitest";
import { E2BWorkspace } from "../../sdk/backends/e2b/index.js";
import { uniqueId } from "../contract/fixture.js";
import { runContractSuites } from "../support/sandbox-fixtures.js";

/**
 * The workspace contract suites against the real E2B service, when E2B_API_KEY is set (E2B_DOMAIN and
 * E2B_TEMPLATE apply). Every workspace is destroyed with its files by the suites' own teardown or by
 * its timeout: sandboxes are created with a 300 s keep-alive.
 */
const key = process.env.E2B_API_KEY;
if (!key) console.warn("[e2b live] skipped: E2B_API_KEY is not set (set it, and optionally E2B_DOMAIN / E2B_TEMPLATE, to run the contract suites against E2B)");

describe.skipIf(!key)("E2B backend (live)", () => {
  runContractSuites({
    name: "e2b-live",
    async create(opts = {}) {
      return new E2BWorkspace({
        workspaceId: opts.workspaceId ?? uniqueId("e2b-live"),
        teardown: "destroy",
        ...(process.env.E2B_TEMPLATE ? { template: process.env.E2B_TEMPLATE } : {}),
        ...(opts.defaultMcps ? { defaultMcps: opts.defaultMcps } : {}),
        ...(opts.skillPaths ? { skillPaths: opts.skillPaths } : {}),
        ...(opts.egress ? { egress: opts.egress } : {}),
      });
    },
  });
});
