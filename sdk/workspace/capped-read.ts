import { TooLargeError } from "../errors.js";
import type { Sandbox } from "../sandbox.js";

/**
 * Every file the host reads out of a workspace was possibly written by the agent: it is read with a
 * byte cap, passed to the sandbox (which stops reading there) and checked again on the bytes that
 * came back, since a sandbox (or its runner) is not trusted to have honoured it.
 */
export async function readCapped(sandbox: Pick<Sandbox, "readFile">, rel: string, maxBytes: number): Promise<Buffer> {
  const data = await sandbox.readFile(rel, { maxBytes });
  if (data.length > maxBytes) throw new TooLargeError(`${rel} is over the ${maxBytes}-byte cap (the sandbox returned ${data.length} bytes)`, { field: "path" });
  return data;
}
