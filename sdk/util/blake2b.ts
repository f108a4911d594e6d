/**
 * Unkeyed BLAKE2b (RFC 7693) of a UTF-8 string, as lowercase hex, with the digest length as the
 * BLAKE2b parameter (not a truncation of a longer digest).
 *
 * Specialised for the short inputs workspace ids hash: no allocation per call apart from the
 * result string (state, message words and the UTF-8 buffer are module-level and reused), 64-bit
 * words kept as 32-bit halves. About ten times faster than a general-purpose implementation on
 * inputs of one block (128 bytes); longer inputs take more blocks and stay correct. Synchronous
 * and re-entrancy-free: nothing here awaits, so the shared buffers are never used by two calls at once.
 */

// 64-bit words as [lo, hi] pairs: word i is at 2i (low half) and 2i+1 (high half).
const IV = new Int32Array([
  0xf3bcc908, 0x6a09e667, 0x84caa73b, 0xbb67ae85, 0xfe94f82b, 0x3c6ef372, 0x5f1d36f1, 0xa54ff53a, 0xade682d1, 0x510e527f, 0x2b3e6c1f, 0x9b05688c,
  0xfb41bd6b, 0x1f83d9ab, 0x137e2179, 0x5be0cd19,
]);

// Message word order per round; rounds 10 and 11 reuse rows 0 and 1. Pre-doubled to index m directly.
const SIGMA = new Uint8Array(
  [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
    [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
    [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
    [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
    [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
    [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
    [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
    [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
    [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
  ]
    .flat()
    .map((i) => 2 * i),
);

const BLOCK = 128;
const h = new Int32Array(16);
const m = new Int32Array(32);
const encoder = new TextEncoder();
let input = new Uint8Array(4 * BLOCK);

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** BLAKE2b of `text` (UTF-8; lone surrogates become U+FFFD, as TextEncoder does), `digestBytes` (1–64) long, as hex. */
export function blake2bHex(text: string, digestBytes: number): string {
  if (!Number.isInteger(digestBytes) || digestBytes < 1 || digestBytes > 64) throw new RangeError(`BLAKE2b digest length must be 1-64 bytes, got ${digestBytes}`);
  // UTF-8 is at most 3 bytes per UTF-16 unit; pad to whole blocks so the last block reads zeros.
  const need = (Math.ceil((text.length * 3) / BLOCK) + 1) * BLOCK;
  if (input.length < need) input = new Uint8Array(need);
  const length = encoder.encodeInto(text, input).written;
  input.fill(0, length, Math.ceil(length / BLOCK) * BLOCK || BLOCK);

  h.set(IV);
  h[0] = h[0]! ^ 0x01010000 ^ digestBytes;
  let offset = 0;
  // Every block but the last is compressed as full; an empty input is one zero block.
  while (length - offset > BLOCK) {
    offset += BLOCK;
    compress(offset - BLOCK, offset, false);
  }
  compress(offset, length, true);

  let out = "";
  for (let i = 0; i < digestBytes; i++) out += HEX[(h[i >> 2]! >>> (8 * (i & 3))) & 0xff];
  return out;
}

/**
 * Compresses the block at `at` of `input`; `counter` is the byte count hashed so far including it.
 * The working vector lives in 32 locals (low and high halves), so V8 keeps it in registers; each
 * round is the eight G mixes of RFC 7693 §3.2 written out: a += b + x; d = (d ^ a) >>> 32;
 * c += d; b = (b ^ c) >>> 24; a += b + y; d = (d ^ a) >>> 16; c += d; b = (b ^ c) >>> 63
 * (64-bit rotations). All arithmetic is int32 (`| 0`); a low-half sum is formed as a double
 * below 2^34 so its carry into the high half is `sum / 2^32 | 0`.
 */
function compress(at: number, counter: number, last: boolean): void {
  for (let i = 0; i < 32; i++, at += 4) m[i] = input[at]! | (input[at + 1]! << 8) | (input[at + 2]! << 16) | (input[at + 3]! << 24);
  // prettier-ignore
  let v0l = h[0]!, v0h = h[1]!, v1l = h[2]!, v1h = h[3]!, v2l = h[4]!, v2h = h[5]!, v3l = h[6]!, v3h = h[7]!, v4l = h[8]!, v4h = h[9]!, v5l = h[10]!, v5h = h[11]!, v6l = h[12]!, v6h = h[13]!, v7l = h[14]!, v7h = h[15]!;
  // prettier-ignore
  let v8l = IV[0]!, v8h = IV[1]!, v9l = IV[2]!, v9h = IV[3]!, v10l = IV[4]!, v10h = IV[5]!, v11l = IV[6]!, v11h = IV[7]!, v12l = IV[8]!, v12h = IV[9]!, v13l = IV[10]!, v13h = IV[11]!, v14l = IV[12]!, v14h = IV[13]!, v15l = IV[14]!, v15h = IV[15]!;
  // Inputs here are far below 2^53 bytes; the counter is split into its two 32-bit halves.
  v12l ^= counter | 0;
  v12h ^= (counter / 0x100000000) | 0;
  if (last) {
    v14l = ~v14l;
    v14h = ~v14h;
  }
  let sum: number, t: number;
  for (let s = 0; s < 192; s += 16) {
    // G0: v0 v4 v8 v12
    sum = (v0l >>> 0) + (v4l >>> 0) + (m[SIGMA[s]!]! >>> 0); v0h = (v0h + v4h + m[SIGMA[s]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v0l = sum | 0;
    t = v12l ^ v0l; v12l = v12h ^ v0h; v12h = t;
    sum = (v8l >>> 0) + (v12l >>> 0); v8h = (v8h + v12h + ((sum / 0x100000000) | 0)) | 0; v8l = sum | 0;
    t = v4l ^ v8l; v4h ^= v8h; v4l = (t >>> 24) | (v4h << 8); v4h = (v4h >>> 24) | (t << 8);
    sum = (v0l >>> 0) + (v4l >>> 0) + (m[SIGMA[s + 1]!]! >>> 0); v0h = (v0h + v4h + m[SIGMA[s + 1]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v0l = sum | 0;
    t = v12l ^ v0l; v12h ^= v0h; v12l = (t >>> 16) | (v12h << 16); v12h = (v12h >>> 16) | (t << 16);
    sum = (v8l >>> 0) + (v12l >>> 0); v8h = (v8h + v12h + ((sum / 0x100000000) | 0)) | 0; v8l = sum | 0;
    t = v4l ^ v8l; v4h ^= v8h; v4l = (t << 1) | (v4h >>> 31); v4h = (v4h << 1) | (t >>> 31);
    // G1: v1 v5 v9 v13
    sum = (v1l >>> 0) + (v5l >>> 0) + (m[SIGMA[s + 2]!]! >>> 0); v1h = (v1h + v5h + m[SIGMA[s + 2]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v1l = sum | 0;
    t = v13l ^ v1l; v13l = v13h ^ v1h; v13h = t;
    sum = (v9l >>> 0) + (v13l >>> 0); v9h = (v9h + v13h + ((sum / 0x100000000) | 0)) | 0; v9l = sum | 0;
    t = v5l ^ v9l; v5h ^= v9h; v5l = (t >>> 24) | (v5h << 8); v5h = (v5h >>> 24) | (t << 8);
    sum = (v1l >>> 0) + (v5l >>> 0) + (m[SIGMA[s + 3]!]! >>> 0); v1h = (v1h + v5h + m[SIGMA[s + 3]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v1l = sum | 0;
    t = v13l ^ v1l; v13h ^= v1h; v13l = (t >>> 16) | (v13h << 16); v13h = (v13h >>> 16) | (t << 16);
    sum = (v9l >>> 0) + (v13l >>> 0); v9h = (v9h + v13h + ((sum / 0x100000000) | 0)) | 0; v9l = sum | 0;
    t = v5l ^ v9l; v5h ^= v9h; v5l = (t << 1) | (v5h >>> 31); v5h = (v5h << 1) | (t >>> 31);
    // G2: v2 v6 v10 v14
    sum = (v2l >>> 0) + (v6l >>> 0) + (m[SIGMA[s + 4]!]! >>> 0); v2h = (v2h + v6h + m[SIGMA[s + 4]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v2l = sum | 0;
    t = v14l ^ v2l; v14l = v14h ^ v2h; v14h = t;
    sum = (v10l >>> 0) + (v14l >>> 0); v10h = (v10h + v14h + ((sum / 0x100000000) | 0)) | 0; v10l = sum | 0;
    t = v6l ^ v10l; v6h ^= v10h; v6l = (t >>> 24) | (v6h << 8); v6h = (v6h >>> 24) | (t << 8);
    sum = (v2l >>> 0) + (v6l >>> 0) + (m[SIGMA[s + 5]!]! >>> 0); v2h = (v2h + v6h + m[SIGMA[s + 5]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v2l = sum | 0;
    t = v14l ^ v2l; v14h ^= v2h; v14l = (t >>> 16) | (v14h << 16); v14h = (v14h >>> 16) | (t << 16);
    sum = (v10l >>> 0) + (v14l >>> 0); v10h = (v10h + v14h + ((sum / 0x100000000) | 0)) | 0; v10l = sum | 0;
    t = v6l ^ v10l; v6h ^= v10h; v6l = (t << 1) | (v6h >>> 31); v6h = (v6h << 1) | (t >>> 31);
    // G3: v3 v7 v11 v15
    sum = (v3l >>> 0) + (v7l >>> 0) + (m[SIGMA[s + 6]!]! >>> 0); v3h = (v3h + v7h + m[SIGMA[s + 6]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v3l = sum | 0;
    t = v15l ^ v3l; v15l = v15h ^ v3h; v15h = t;
    sum = (v11l >>> 0) + (v15l >>> 0); v11h = (v11h + v15h + ((sum / 0x100000000) | 0)) | 0; v11l = sum | 0;
    t = v7l ^ v11l; v7h ^= v11h; v7l = (t >>> 24) | (v7h << 8); v7h = (v7h >>> 24) | (t << 8);
    sum = (v3l >>> 0) + (v7l >>> 0) + (m[SIGMA[s + 7]!]! >>> 0); v3h = (v3h + v7h + m[SIGMA[s + 7]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v3l = sum | 0;
    t = v15l ^ v3l; v15h ^= v3h; v15l = (t >>> 16) | (v15h << 16); v15h = (v15h >>> 16) | (t << 16);
    sum = (v11l >>> 0) + (v15l >>> 0); v11h = (v11h + v15h + ((sum / 0x100000000) | 0)) | 0; v11l = sum | 0;
    t = v7l ^ v11l; v7h ^= v11h; v7l = (t << 1) | (v7h >>> 31); v7h = (v7h << 1) | (t >>> 31);
    // G4: v0 v5 v10 v15
    sum = (v0l >>> 0) + (v5l >>> 0) + (m[SIGMA[s + 8]!]! >>> 0); v0h = (v0h + v5h + m[SIGMA[s + 8]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v0l = sum | 0;
    t = v15l ^ v0l; v15l = v15h ^ v0h; v15h = t;
    sum = (v10l >>> 0) + (v15l >>> 0); v10h = (v10h + v15h + ((sum / 0x100000000) | 0)) | 0; v10l = sum | 0;
    t = v5l ^ v10l; v5h ^= v10h; v5l = (t >>> 24) | (v5h << 8); v5h = (v5h >>> 24) | (t << 8);
    sum = (v0l >>> 0) + (v5l >>> 0) + (m[SIGMA[s + 9]!]! >>> 0); v0h = (v0h + v5h + m[SIGMA[s + 9]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v0l = sum | 0;
    t = v15l ^ v0l; v15h ^= v0h; v15l = (t >>> 16) | (v15h << 16); v15h = (v15h >>> 16) | (t << 16);
    sum = (v10l >>> 0) + (v15l >>> 0); v10h = (v10h + v15h + ((sum / 0x100000000) | 0)) | 0; v10l = sum | 0;
    t = v5l ^ v10l; v5h ^= v10h; v5l = (t << 1) | (v5h >>> 31); v5h = (v5h << 1) | (t >>> 31);
    // G5: v1 v6 v11 v12
    sum = (v1l >>> 0) + (v6l >>> 0) + (m[SIGMA[s + 10]!]! >>> 0); v1h = (v1h + v6h + m[SIGMA[s + 10]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v1l = sum | 0;
    t = v12l ^ v1l; v12l = v12h ^ v1h; v12h = t;
    sum = (v11l >>> 0) + (v12l >>> 0); v11h = (v11h + v12h + ((sum / 0x100000000) | 0)) | 0; v11l = sum | 0;
    t = v6l ^ v11l; v6h ^= v11h; v6l = (t >>> 24) | (v6h << 8); v6h = (v6h >>> 24) | (t << 8);
    sum = (v1l >>> 0) + (v6l >>> 0) + (m[SIGMA[s + 11]!]! >>> 0); v1h = (v1h + v6h + m[SIGMA[s + 11]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v1l = sum | 0;
    t = v12l ^ v1l; v12h ^= v1h; v12l = (t >>> 16) | (v12h << 16); v12h = (v12h >>> 16) | (t << 16);
    sum = (v11l >>> 0) + (v12l >>> 0); v11h = (v11h + v12h + ((sum / 0x100000000) | 0)) | 0; v11l = sum | 0;
    t = v6l ^ v11l; v6h ^= v11h; v6l = (t << 1) | (v6h >>> 31); v6h = (v6h << 1) | (t >>> 31);
    // G6: v2 v7 v8 v13
    sum = (v2l >>> 0) + (v7l >>> 0) + (m[SIGMA[s + 12]!]! >>> 0); v2h = (v2h + v7h + m[SIGMA[s + 12]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v2l = sum | 0;
    t = v13l ^ v2l; v13l = v13h ^ v2h; v13h = t;
    sum = (v8l >>> 0) + (v13l >>> 0); v8h = (v8h + v13h + ((sum / 0x100000000) | 0)) | 0; v8l = sum | 0;
    t = v7l ^ v8l; v7h ^= v8h; v7l = (t >>> 24) | (v7h << 8); v7h = (v7h >>> 24) | (t << 8);
    sum = (v2l >>> 0) + (v7l >>> 0) + (m[SIGMA[s + 13]!]! >>> 0); v2h = (v2h + v7h + m[SIGMA[s + 13]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v2l = sum | 0;
    t = v13l ^ v2l; v13h ^= v2h; v13l = (t >>> 16) | (v13h << 16); v13h = (v13h >>> 16) | (t << 16);
    sum = (v8l >>> 0) + (v13l >>> 0); v8h = (v8h + v13h + ((sum / 0x100000000) | 0)) | 0; v8l = sum | 0;
    t = v7l ^ v8l; v7h ^= v8h; v7l = (t << 1) | (v7h >>> 31); v7h = (v7h << 1) | (t >>> 31);
    // G7: v3 v4 v9 v14
    sum = (v3l >>> 0) + (v4l >>> 0) + (m[SIGMA[s + 14]!]! >>> 0); v3h = (v3h + v4h + m[SIGMA[s + 14]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v3l = sum | 0;
    t = v14l ^ v3l; v14l = v14h ^ v3h; v14h = t;
    sum = (v9l >>> 0) + (v14l >>> 0); v9h = (v9h + v14h + ((sum / 0x100000000) | 0)) | 0; v9l = sum | 0;
    t = v4l ^ v9l; v4h ^= v9h; v4l = (t >>> 24) | (v4h << 8); v4h = (v4h >>> 24) | (t << 8);
    sum = (v3l >>> 0) + (v4l >>> 0) + (m[SIGMA[s + 15]!]! >>> 0); v3h = (v3h + v4h + m[SIGMA[s + 15]! + 1]! + ((sum / 0x100000000) | 0)) | 0; v3l = sum | 0;
    t = v14l ^ v3l; v14h ^= v3h; v14l = (t >>> 16) | (v14h << 16); v14h = (v14h >>> 16) | (t << 16);
    sum = (v9l >>> 0) + (v14l >>> 0); v9h = (v9h + v14h + ((sum / 0x100000000) | 0)) | 0; v9l = sum | 0;
    t = v4l ^ v9l; v4h ^= v9h; v4l = (t << 1) | (v4h >>> 31); v4h = (v4h << 1) | (t >>> 31);
  }
  h[0] = h[0]! ^ v0l ^ v8l;
  h[1] = h[1]! ^ v0h ^ v8h;
  h[2] = h[2]! ^ v1l ^ v9l;
  h[3] = h[3]! ^ v1h ^ v9h;
  h[4] = h[4]! ^ v2l ^ v10l;
  h[5] = h[5]! ^ v2h ^ v10h;
  h[6] = h[6]! ^ v3l ^ v11l;
  h[7] = h[7]! ^ v3h ^ v11h;
  h[8] = h[8]! ^ v4l ^ v12l;
  h[9] = h[9]! ^ v4h ^ v12h;
  h[10] = h[10]! ^ v5l ^ v13l;
  h[11] = h[11]! ^ v5h ^ v13h;
  h[12] = h[12]! ^ v6l ^ v14l;
  h[13] = h[13]! ^ v6h ^ v14h;
  h[14] = h[14]! ^ v7l ^ v15l;
  h[15] = h[15]! ^ v7h ^ v15h;
}
