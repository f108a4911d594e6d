/** Multipart skill uploads produced lazily (never whole in memory), for upload tests. */

const enc = new TextEncoder();
const FILL = new Uint8Array(1 << 20).fill(0x61);

export const skillMd = (name: string) => `---\nname: ${name}\ndescription: uploaded ${name}\n---\nBody of ${name}.\n`;

/** A ustar header for a regular file. */
export function tarHeader(name: string, size: number): Uint8Array {
  const h = new Uint8Array(512);
  const put = (s: string, at: number) => h.set(enc.encode(s), at);
  put(name, 0);
  put("0000644\0", 100);
  put("0000000\0", 108);
  put("0000000\0", 116);
  put(`${size.toString(8).padStart(11, "0")}\0`, 124);
  put("00000000000\0", 136);
  put("        ", 148);
  put("0", 156);
  put("ustar\0", 257);
  put("00", 263);
  const sum = h.reduce((a, b) => a + b, 0);
  put(`${sum.toString(8).padStart(6, "0")}\0 `, 148);
  return h;
}

const pad = (n: number) => new Uint8Array((512 - (n % 512)) % 512);

/** `bytes` of filler, in 1 MiB chunks of one shared buffer. */
export async function* filler(bytes: number): AsyncGenerator<Uint8Array> {
  for (let left = bytes; left > 0; left -= FILL.length) yield left >= FILL.length ? FILL : FILL.subarray(0, left);
}

/** A tar of `<folder>/SKILL.md` and `<folder>/big.bin` (`bigBytes` of filler), generated as it is read. */
export async function* skillTar(folder: string, bigBytes: number): AsyncGenerator<Uint8Array> {
  const md = enc.encode(skillMd(folder));
  yield tarHeader(`${folder}/SKILL.md`, md.length);
  yield md;
  yield pad(md.length);
  yield tarHeader(`${folder}/big.bin`, bigBytes);
  yield* filler(bigBytes);
  yield pad(bigBytes);
  yield new Uint8Array(1024);
}

export interface Part {
  name: string;
  filename?: string;
  body: string | AsyncIterable<Uint8Array>;
}

/** A multipart/form-data body over `parts`, each part's bytes pulled only when the body is read. */
export function multipart(parts: Part[]): { contentType: string; body: AsyncGenerator<Uint8Array> } {
  const boundary = `----agentws${Math.random().toString(16).slice(2)}`;
  async function* body(): AsyncGenerator<Uint8Array> {
    for (const p of parts) {
      const disposition = `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ""}`;
      yield enc.encode(
        `--${boundary}\r\nContent-Disposition: ${disposition}\r\n${p.filename !== undefined ? "Content-Type: application/octet-stream\r\n" : ""}\r\n`,
      );
      if (typeof p.body === "string") yield enc.encode(p.body);
      else yield* p.body;
      yield enc.encode("\r\n");
    }
    yield enc.encode(`--${boundary}--\r\n`);
  }
  return { contentType: `multipart/form-data; boundary=${boundary}`, body: body() };
}

/** A web stream over an async generator, pulled one chunk at a time (for fetch's `duplex: "half"` bodies). */
export function webStream(source: AsyncGenerator<Uint8Array>, onChunk?: (bytes: number) => void): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const next = await source.next();
        if (next.done) controller.close();
        else {
          onChunk?.(next.value.length);
          controller.enqueue(next.value);
        }
      },
      async cancel() {
        await source.return(undefined);
      },
    },
    { highWaterMark: 0 },
  );
}
