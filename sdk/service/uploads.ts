import { createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Transform, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import busboy from "busboy";
import { InvalidArgumentError, TooLargeError } from "../errors.js";

/**
 * The parser's and each file stream's high-water mark. With the request read under backpressure,
 * an upload in flight holds a few of these (socket, parser, file stream, write stream): well
 * under 1 MiB, whatever its size.
 */
const CHUNK = 64 * 1024;

export interface SpooledFile {
  /** The part's form field name. */
  field: string;
  /** The part's filename parameter ("" if none): caller-controlled, for format sniffing only. */
  filename: string;
  /** Where its bytes are, inside the form's private temp folder. */
  path: string;
  size: number;
}

/** A multipart body on disk. Disposing it removes its temp folder; every outcome must dispose it. */
export interface SpooledForm extends AsyncDisposable {
  fields: Map<string, string[]>;
  /** File parts in the order they arrived. */
  files: SpooledFile[];
}

export interface SpoolLimits {
  /** Bytes of the whole body, multipart framing included. */
  maxBytes: number;
  /** Bytes of one file part, by field name; a file part under any other name is refused. */
  maxPartBytes: Record<string, number>;
  maxFiles: number;
  /** Bytes of one text field. */
  maxFieldBytes: number;
}

/**
 * Streams a multipart/form-data body into a fresh private temp folder, one file per file part,
 * counting bytes as they arrive: over a limit is a TooLargeError at once (the rest is not read).
 * The body is read with backpressure (paused while the parser or the disk is behind), so memory
 * does not grow with the upload's size. On any failure, a client that went away included, the temp
 * folder is removed before this rejects.
 */
export async function spoolMultipart(body: Readable, contentType: string, limits: SpoolLimits): Promise<SpooledForm> {
  let parser: ReturnType<typeof busboy>;
  try {
    parser = busboy({
      headers: { "content-type": contentType },
      highWaterMark: CHUNK,
      fileHwm: CHUNK,
      defParamCharset: "utf8",
      limits: { fieldSize: limits.maxFieldBytes, fields: 16, files: limits.maxFiles, parts: limits.maxFiles + 16, headerPairs: 16 },
    });
  } catch (e) {
    throw new InvalidArgumentError(`is not a readable multipart body: ${e instanceof Error ? e.message : String(e)}`, { field: "body" });
  }
  // A client that went away while the upload waited for its turn: its stream will say nothing more.
  if (body.destroyed || body.readableEnded) throw new InvalidArgumentError("was not received completely: the client went away", { field: "body" });
  const dir = await mkdtemp(path.join(os.tmpdir(), "agentws-upload-"));
  const form: SpooledForm = { fields: new Map(), files: [], [Symbol.asyncDispose]: () => rm(dir, { recursive: true, force: true }) };
  const writes: Promise<void>[] = [];
  let failed: unknown;
  let total = 0;

  const done = new Promise<void>((ok, fail) => {
    const stop = (e: unknown) => {
      if (failed !== undefined) return;
      failed = e;
      // The body is left paused, not destroyed: the 413 or 400 still reaches the client, and the
      // HTTP server drains (briefly) or closes the connection after answering.
      body.off("data", onData);
      body.pause();
      body.unpipe();
      parser.destroy();
      fail(e);
    };
    const onData = (chunk: Buffer) => {
      total += chunk.length;
      if (total > limits.maxBytes) return stop(new TooLargeError(`the request body is over the limit of ${limits.maxBytes} bytes`));
      if (!parser.write(chunk)) body.pause();
    };
    parser.on("drain", () => failed === undefined && body.resume());
    body.on("data", onData);
    body.once("end", () => parser.end());
    body.once("error", (e) => stop(new InvalidArgumentError(`was not received completely: ${e.message}`, { field: "body" })));
    body.once("close", () => {
      if (!body.readableEnded) stop(new InvalidArgumentError("was not received completely: the client went away", { field: "body" }));
    });
    parser.on("error", (e) =>
      stop(e instanceof TooLargeError ? e : new InvalidArgumentError(`is not a readable multipart body: ${e.message}`, { field: "body" })),
    );
    parser.on("filesLimit", () => stop(new TooLargeError(`an upload holds at most ${limits.maxFiles} file parts`)));
    parser.on("partsLimit", () => stop(new TooLargeError(`an upload holds at most ${limits.maxFiles + 16} parts`)));
    parser.on("fieldsLimit", () => stop(new TooLargeError("an upload holds at most 16 text fields")));
    parser.on("field", (name, value, info) => {
      if (info.valueTruncated) return stop(new TooLargeError(`a text field is over the limit of ${limits.maxFieldBytes} bytes`));
      form.fields.set(name, [...(form.fields.get(name) ?? []), value]);
    });
    parser.on("file", (name, stream, info) => {
      const max = limits.maxPartBytes[name];
      if (max === undefined) {
        stream.on("error", () => undefined).resume();
        return stop(new InvalidArgumentError(`has an unexpected file part; expected ${Object.keys(limits.maxPartBytes).join(", ")}`, { field: "body" }));
      }
      const file: SpooledFile = { field: name, filename: info.filename ?? "", path: path.join(dir, `part-${form.files.length}`), size: 0 };
      form.files.push(file);
      const meter = new Transform({
        transform(chunk: Buffer, _encoding, callback) {
          file.size += chunk.length;
          if (file.size > max) callback(new TooLargeError(`a '${name}' part is over the limit of ${max} bytes`));
          else callback(null, chunk);
        },
      });
      const write = pipeline(stream, meter, createWriteStream(file.path, { flags: "wx", mode: 0o600, highWaterMark: CHUNK }));
      writes.push(
        write.catch((e: unknown) =>
          stop(
            e instanceof TooLargeError
              ? e
              : new InvalidArgumentError(`a part could not be stored: ${e instanceof Error ? e.message : String(e)}`, { field: "body" }),
          ),
        ),
      );
    });
    parser.once("close", () => {
      if (failed === undefined) ok();
    });
    body.resume();
  });

  try {
    await done;
    await Promise.all(writes);
    if (failed !== undefined) throw failed;
    return form;
  } catch (e) {
    await Promise.allSettled(writes);
    await form[Symbol.asyncDispose]();
    throw e;
  }
}
