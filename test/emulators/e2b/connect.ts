import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * The Connect protocol as the e2b SDK speaks it to envd (connect-web, JSON codec): unary calls are a
 * JSON body in and out; server-streaming calls are envelopes `[flags u8][length u32 BE][json]`, the
 * last one flagged 0x02 carrying `{}` or `{"error":{code,message}}`.
 */
export const MAX_BODY = 512 * 1024 * 1024;

/** Connect error codes and the HTTP status a unary call answers them with. */
const STATUS: Record<string, number> = {
  invalid_argument: 400,
  not_found: 404,
  already_exists: 409,
  permission_denied: 403,
  unauthenticated: 401,
  failed_precondition: 400,
  deadline_exceeded: 408,
  unavailable: 503,
  internal: 500,
  unknown: 500,
};

export class RpcError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** The request body, bounded (a request past MAX_BODY is refused, never buffered whole). */
export async function readBody(req: IncomingMessage, max = MAX_BODY): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    n += c.length;
    if (n > max) throw new RpcError("resource_exhausted", `request body over ${max} bytes`);
    chunks.push(c);
  }
  return Buffer.concat(chunks, n);
}

/** The JSON message of a unary request, or of the single envelope of a streaming one. */
export function decodeRequest(body: Buffer, streaming: boolean): Record<string, unknown> {
  let json = body;
  if (streaming) {
    if (body.length < 5) throw new RpcError("invalid_argument", "missing request envelope");
    const len = body.readUInt32BE(1);
    json = body.subarray(5, 5 + len);
  }
  const text = json.toString("utf8");
  return text ? (JSON.parse(text) as Record<string, unknown>) : {};
}

export function envelope(flags: number, message: unknown): Buffer {
  const json = Buffer.from(JSON.stringify(message));
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

export function sendUnary(res: ServerResponse, message: unknown): void {
  const body = JSON.stringify(message ?? {});
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

export function sendUnaryError(res: ServerResponse, e: RpcError): void {
  const body = JSON.stringify({ code: e.code, message: e.message });
  res.writeHead(STATUS[e.code] ?? 500, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

/** A server stream: messages go out as envelopes as they come; end() writes the end-of-stream envelope. */
export class ServerStream {
  #ended = false;
  constructor(readonly res: ServerResponse) {
    res.writeHead(200, { "content-type": "application/connect+json" });
  }
  get ended(): boolean {
    return this.#ended || this.res.destroyed;
  }
  send(message: unknown): void {
    if (!this.ended) this.res.write(envelope(0, message));
  }
  end(error?: RpcError): void {
    if (this.ended) return;
    this.#ended = true;
    this.res.end(envelope(2, error ? { error: { code: error.code, message: error.message } } : {}));
  }
}
