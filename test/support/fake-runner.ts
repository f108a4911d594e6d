/**
 * A runner played by the test: a RunnerTransport over in-memory streams whose replies a script writes,
 * byte for byte (the hostile-runner tests). Requests from the client are parsed as the real runner
 * parses them; `honest` answers the few ops a follow-up call needs, the way source.ts does.
 */
import { PassThrough } from "node:stream";
import type { RunnerTransport } from "../../sdk/kit/runner/index.js";

export interface FakeRequest {
  op: string;
  id: number;
  fields: string[];
  payload: Buffer;
}

export interface FakeRunner extends RunnerTransport {
  /** Writes raw bytes on the runner's stdout (false once it is closed). */
  send(bytes: Buffer): boolean;
  /** Ends stdout and the process, as an abrupt exit. */
  close(why?: string): void;
  readonly killed: boolean;
  readonly requests: FakeRequest[];
}

/** One reply frame: u32 id, u32 header length, u32 payload length, header, payload. */
export function reply(id: number, fields: (string | number)[], payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.from(fields.map(String).join("\0"));
  const p = Buffer.alloc(12);
  p.writeUInt32BE(id, 0);
  p.writeUInt32BE(h.length, 4);
  p.writeUInt32BE(payload.length, 8);
  return Buffer.concat([p, h, payload]);
}

/** A bare prefix claiming `headerLength` and `payloadLength` bytes (the bytes themselves sent separately, or never). */
export function prefix(id: number, headerLength: number, payloadLength: number): Buffer {
  const p = Buffer.alloc(12);
  p.writeUInt32BE(id, 0);
  p.writeUInt32BE(headerLength, 4);
  p.writeUInt32BE(payloadLength, 8);
  return p;
}

/** The honest runner's answer to the ops the follow-up calls use (stat, exec, read of a 2-byte file). */
export function honest(r: FakeRunner, q: FakeRequest): void {
  if (q.op === "s") r.send(reply(q.id, ["o", "f", 2, 1000, "x"]));
  else if (q.op === "x") r.send(reply(q.id, ["x", 0, 0, 2], Buffer.from("ok")));
  else if (q.op === "r" || q.op === "R") {
    r.send(reply(q.id, ["s", 2]));
    r.send(reply(q.id, ["d"], Buffer.from("hi")));
    r.send(reply(q.id, ["o", 2]));
  } else if (q.op === "w") r.send(reply(q.id, ["o"]));
}

/** A fake runner: says hello, then hands every request to `script` (which may answer anything, or nothing). */
export function fakeRunner(script: (r: FakeRunner, q: FakeRequest) => void, opts: { hello?: boolean } = {}): FakeRunner {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  let done!: (v: { why: string }) => void;
  const exited = new Promise<{ why: string }>((r) => (done = r));
  let over = false;
  let inbuf = Buffer.alloc(0);
  const r: FakeRunner = {
    stdin,
    stdout,
    exited,
    pid: undefined,
    requests: [],
    get killed() {
      return over;
    },
    send: (bytes) => {
      if (over) return false;
      stdout.write(bytes);
      return true;
    },
    close: (why = "") => {
      if (over) return;
      over = true;
      stdout.end();
      done({ why });
    },
    kill: () => r.close("killed"),
  };
  stdin.on("data", (c: Buffer) => {
    inbuf = Buffer.concat([inbuf, c]);
    while (inbuf.length >= 8) {
      const hl = inbuf.readUInt32BE(0);
      const pl = inbuf.readUInt32BE(4);
      if (inbuf.length < 8 + hl + pl) break;
      const fields = inbuf
        .subarray(8, 8 + hl)
        .toString()
        .split("\0");
      const payload = inbuf.subarray(8 + hl, 8 + hl + pl);
      inbuf = inbuf.subarray(8 + hl + pl);
      const q = { op: fields[0]!, id: Number(fields[1]), fields, payload };
      r.requests.push(q);
      if (!over) script(r, q);
    }
  });
  stdin.on("error", () => undefined);
  if (opts.hello !== false) r.send(reply(0, ["hello", "1", 42]));
  return r;
}
