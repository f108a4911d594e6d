import { Problem } from "../schemas.js";

const problem = (description: string) => ({ description, content: { "application/problem+json": { schema: Problem } } });

/** The error responses every workspace route can give, for the OpenAPI document. */
export const WORKSPACE_PROBLEMS = {
  400: problem("Bad input (the field or path is named)"),
  401: problem("Missing or unknown bearer token"),
  404: problem("No such session of yours, or no such file"),
  409: problem("Conflict (e.g. a name already used)"),
  429: problem("Too many requests, or a quota reached (opening a workspace); see Retry-After"),
};

export const json = <T>(schema: T, description: string) => ({ description, content: { "application/json": { schema } } });

/** Runs `op`, giving up after `ms` with an error (the operation itself keeps its own bounds). */
export function within<T>(ms: number, op: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([op, timeout]).finally(() => clearTimeout(timer));
}
