import { WORKSPACE, json, problemResponses } from "./openapi-common.js";
import { TimeoutError } from "../../errors.js";

export { json };

/** The error responses every workspace route can give, for the OpenAPI document (see openapi-common.ts). */
export const WORKSPACE_PROBLEMS = problemResponses(...WORKSPACE);

/** Runs `op`, giving up after `ms` with an error (the operation itself keeps its own bounds). */
export function within<T>(ms: number, op: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`${what} did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([op, timeout]).finally(() => clearTimeout(timer));
}
