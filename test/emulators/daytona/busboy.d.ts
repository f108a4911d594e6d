// The part of busboy's API the emulator uses (busboy ships no types; @daytonaio/sdk depends on it).
declare module "busboy" {
  import type { IncomingHttpHeaders } from "node:http";
  import type { Readable, Writable } from "node:stream";
  interface Busboy extends Writable {
    on(event: "field", listener: (name: string, value: string) => void): this;
    on(event: "file", listener: (name: string, stream: Readable, info: { filename?: string }) => void): this;
    on(event: "close" | "finish", listener: () => void): this;
    on(event: "error", listener: (e: Error) => void): this;
  }
  function busboy(config: { headers: IncomingHttpHeaders; limits?: { fileSize?: number } }): Busboy;
  export default busboy;
}
