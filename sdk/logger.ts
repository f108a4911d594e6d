/** Library code never prints: it takes a logger. The default drops everything. */
export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

const noop = (): void => {};
export const silentLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop };

/** A logger writing one JSON line per record to stderr, for CLIs and services. */
export function consoleLogger(level: "debug" | "info" | "warn" | "error" = "info"): Logger {
  const order = ["debug", "info", "warn", "error"] as const;
  const min = order.indexOf(level);
  const make = (l: (typeof order)[number]) => (msg: string, fields?: Record<string, unknown>) => {
    if (order.indexOf(l) < min) return;
    process.stderr.write(`${JSON.stringify({ level: l, msg, ...fields })}\n`);
  };
  return { debug: make("debug"), info: make("info"), warn: make("warn"), error: make("error") };
}

/** Progress for long work (image builds, bootstraps, `pulumi up`). */
export interface ProgressEvent {
  phase: string;
  message: string;
  /** 0..1 when known. */
  fraction?: number;
}
export type ProgressListener = (event: ProgressEvent) => void;
