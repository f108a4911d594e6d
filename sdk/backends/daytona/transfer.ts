import { randomBytes } from "node:crypto";
import http from "node:http";
import https from "node:https";
import type { Sandbox as DaytonaSdkSandbox } from "@daytonaio/sdk";
import type { RemoteFiles } from "../../kit/runner/index.js";
import { ExecFailedError, TimeoutError, UnavailableError } from "../../errors.js";

/** Kept-alive connections to the toolbox, shared by every sandbox of this process (idle ones do not hold it open). */
const AGENTS = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };

/**
 * The toolbox's file transfer routes (`/files/bulk-upload`, `/files/bulk-download`, the SDK's own calls
 * and headers) as the runner's RemoteFiles: the host sends and takes raw bytes at the runner's descriptor
 * links. One request each, the multipart body framed and parsed here as whole buffers (the SDK's
 * form-data and per-part stream parser cost a few milliseconds a call); where the SDK's configuration is
 * not the one this knows, its own `fs.uploadFile` / `fs.downloadFile`.
 */
export function toolboxFiles(sb: DaytonaSdkSandbox, timeoutS: number, fellBack?: (e: unknown) => void): RemoteFiles {
  const direct = directRoutes(sb, timeoutS * 1000);
  return {
    upload: direct ? direct.upload : (path, data) => sb.fs.uploadFile(Buffer.from(data.buffer, data.byteOffset, data.byteLength), path, timeoutS),
    download: direct ? direct.download : (path) => sb.fs.downloadFile(path, timeoutS),
    ...(fellBack ? { fellBack } : {}),
    // The daemon's upload is MkdirAll, os.Create and io.Copy: a pipe's end takes it as a file would.
    streams: true,
  };
}

function directRoutes(sb: DaytonaSdkSandbox, timeoutMs: number): Pick<RemoteFiles, "upload" | "download"> | undefined {
  // The same configuration the SDK's file calls read, at call time (a sandbox moved to a new proxy updates it).
  const config = () => (sb.fs as unknown as { clientConfig?: { basePath?: unknown; baseOptions?: { headers?: unknown } } }).clientConfig;
  const usable = () => {
    const c = config();
    const base = c?.basePath;
    const headers = c?.baseOptions?.headers;
    if (typeof base !== "string" || !/^https?:\/\//.test(base) || typeof headers !== "object" || headers === null || !("Authorization" in headers))
      return undefined;
    return { base, headers: headers as Record<string, string> };
  };
  if (!usable()) return undefined;
  const post = async (route: string, type: string, body: Buffer[]) => {
    const c = usable();
    if (!c) throw new UnavailableError("the toolbox's configuration changed");
    return request(`${c.base}${route}`, { ...c.headers, "Content-Type": type }, body, timeoutMs);
  };
  return {
    async upload(path, data) {
      const boundary = `agentws${randomBytes(12).toString("hex")}`;
      const name = path.replace(/["\r\n]/g, "_");
      const head = Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="files[0].path"\r\n\r\n${path}\r\n` +
          `--${boundary}\r\nContent-Disposition: form-data; name="files[0].file"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
      );
      const r = await post("/files/bulk-upload", `multipart/form-data; boundary=${boundary}`, [
        head,
        Buffer.from(data.buffer, data.byteOffset, data.byteLength),
        Buffer.from(`\r\n--${boundary}--\r\n`),
      ]);
      if (r.status < 200 || r.status >= 300) throw new ExecFailedError(`toolbox upload answered ${r.status}: ${r.body.subarray(0, 300).toString()}`);
    },
    async download(path) {
      const r = await post("/files/bulk-download", "application/json", [Buffer.from(JSON.stringify({ paths: [path] }))]);
      if (r.status < 200 || r.status >= 300) throw new ExecFailedError(`toolbox download answered ${r.status}: ${r.body.subarray(0, 300).toString()}`);
      return onePart(r.type, r.body);
    },
  };
}

/** The one part of a bulk-download answer: its bytes, or its error part's text thrown. */
export function onePart(type: string, body: Buffer): Buffer {
  const m = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(type);
  const boundary = m?.[1] ?? m?.[2];
  if (!/^multipart\//i.test(type) || !boundary) throw new ExecFailedError(`toolbox download answered ${type || "no content type"}, not multipart`);
  const open = body.indexOf(`--${boundary}\r\n`);
  const headEnd = open < 0 ? -1 : body.indexOf("\r\n\r\n", open);
  // The closing delimiter is searched from the end: the file's own bytes may hold anything, the boundary too.
  const close = body.lastIndexOf(`\r\n--${boundary}--`);
  if (open < 0 || headEnd < 0 || close < headEnd + 4) throw new ExecFailedError("toolbox download: a malformed multipart answer");
  const head = body.subarray(open, headEnd).toString("latin1");
  const data = body.subarray(headEnd + 4, close);
  if (!/name="file"/i.test(head)) throw new ExecFailedError(`toolbox download failed: ${data.subarray(0, 300).toString()}`);
  return data;
}

function request(url: string, headers: Record<string, string>, body: Buffer[], timeoutMs: number): Promise<{ status: number; type: string; body: Buffer }> {
  const secure = url.startsWith("https:");
  const length = body.reduce((n, b) => n + b.length, 0);
  return new Promise((resolve, reject) => {
    const req = (secure ? https : http).request(
      url,
      { method: "POST", agent: secure ? AGENTS.https : AGENTS.http, headers: { ...headers, "Content-Length": String(length) } },
      (res) => {
        const chunks: Buffer[] = [];
        let n = 0;
        res.on("data", (c: Buffer) => {
          chunks.push(c);
          n += c.length;
        });
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            type: String(res.headers["content-type"] ?? ""),
            body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, n),
          }),
        );
        res.on("error", reject);
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new TimeoutError(`toolbox file transfer timed out after ${timeoutMs} ms`)));
    req.on("error", reject);
    for (const b of body) req.write(b);
    req.end();
  });
}
