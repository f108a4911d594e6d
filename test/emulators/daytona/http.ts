import type { IncomingMessage, ServerResponse } from "node:http";

/** An error answer as Daytona's API gives it: `{ statusCode, message, error }`. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export interface Reply {
  status?: number;
  json?: unknown;
  raw?: Buffer;
  contentType?: string;
  headers?: Record<string, string>;
}

const MAX_JSON = 8 * 1024 * 1024;

/** The request body as JSON (bounded); `{}` when empty. */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > MAX_JSON) throw new HttpError(413, "request body too large");
    chunks.push(c);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (!text.trim()) return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new HttpError(400, "request body is not JSON");
  }
}

export function send(res: ServerResponse, reply: Reply): void {
  const status = reply.status ?? 200;
  for (const [k, v] of Object.entries(reply.headers ?? {})) res.setHeader(k, v);
  if (reply.raw) {
    res.writeHead(status, { "content-type": reply.contentType ?? "application/octet-stream", "content-length": reply.raw.length });
    res.end(reply.raw);
    return;
  }
  if (reply.json === undefined) {
    res.writeHead(status);
    res.end();
    return;
  }
  const body = Buffer.from(JSON.stringify(reply.json));
  res.writeHead(status, { "content-type": "application/json", "content-length": body.length });
  res.end(body);
}

export function sendError(res: ServerResponse, e: unknown): void {
  const err = e instanceof HttpError ? e : new HttpError(500, e instanceof Error ? e.message : String(e));
  const names: Record<number, string> = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    429: "Too Many Requests",
    503: "Service Unavailable",
  };
  if (res.headersSent) return void res.destroy();
  send(res, { status: err.status, headers: err.headers, json: { statusCode: err.status, message: err.message, error: names[err.status] ?? "Error" } });
}
