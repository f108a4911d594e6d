// The part of busboy 1.x the service (and the Daytona emulator in test/) uses: the package ships no types.
declare module "busboy" {
  import type { Readable, Writable } from "node:stream";

  interface BusboyConfig {
    headers: Record<string, string | string[] | undefined>;
    highWaterMark?: number;
    fileHwm?: number;
    defParamCharset?: string;
    limits?: { fieldNameSize?: number; fieldSize?: number; fields?: number; fileSize?: number; files?: number; parts?: number; headerPairs?: number };
  }
  interface FileInfo {
    filename?: string;
    encoding: string;
    mimeType: string;
  }
  interface FieldInfo {
    nameTruncated: boolean;
    valueTruncated: boolean;
    encoding: string;
    mimeType: string;
  }
  interface Busboy extends Writable {
    on(event: "file", listener: (name: string, stream: Readable, info: FileInfo) => void): this;
    on(event: "field", listener: (name: string, value: string, info: FieldInfo) => void): this;
    on(event: "partsLimit" | "filesLimit" | "fieldsLimit" | "close" | "finish" | "drain", listener: () => void): this;
    on(event: "error", listener: (e: Error) => void): this;
  }
  function busboy(config: BusboyConfig): Busboy;
  export default busboy;
}
