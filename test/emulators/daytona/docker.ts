import { PassThrough, type Duplex } from "node:stream";
import type Docker from "dockerode";

/** What one finished `docker exec` gave. */
export interface Captured {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
}

/** Output of one emulated command is capped, as a real daemon bounds its buffers. */
const MAX_CAPTURE = 64 * 1024 * 1024;

/** Runs argv in the container to completion, stdout and stderr apart (stdin optional). */
export async function execCapture(
  docker: Docker,
  containerId: string,
  argv: string[],
  options: { env?: Record<string, string> | undefined; cwd?: string | undefined; stdin?: Buffer | undefined } = {},
): Promise<Captured> {
  const c = docker.getContainer(containerId);
  const exec = await c.exec({
    Cmd: argv,
    AttachStdout: true,
    AttachStderr: true,
    AttachStdin: options.stdin !== undefined,
    Tty: false,
    Env: Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`),
    ...(options.cwd ? { WorkingDir: options.cwd } : {}),
  });
  const stream = (await exec.start({ hijack: true, stdin: options.stdin !== undefined })) as unknown as Duplex;
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let size = 0;
  const sink = (into: Buffer[]) => {
    const p = new PassThrough();
    p.on("data", (b: Buffer) => {
      size += b.length;
      if (size <= MAX_CAPTURE) into.push(b);
    });
    return p;
  };
  docker.modem.demuxStream(stream, sink(out), sink(err));
  if (options.stdin !== undefined) stream.end(options.stdin);
  await new Promise<void>((resolve) => {
    stream.once("end", resolve);
    stream.once("close", resolve);
    stream.once("error", () => resolve());
  });
  const code = await exitCodeOf(exec);
  return { exitCode: code ?? -1, stdout: Buffer.concat(out), stderr: Buffer.concat(err) };
}

/** A long-lived process with its stdin open: a session command. */
export interface Attached {
  stdin: Duplex;
  stdout: PassThrough;
  stderr: PassThrough;
  exited: Promise<number | null>;
}

export async function execAttached(docker: Docker, containerId: string, argv: string[], env: Record<string, string>, cwd?: string): Promise<Attached> {
  const exec = await docker.getContainer(containerId).exec({
    Cmd: argv,
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    ...(cwd ? { WorkingDir: cwd } : {}),
  });
  const stream = (await exec.start({ hijack: true, stdin: true })) as unknown as Duplex;
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  docker.modem.demuxStream(stream, stdout, stderr);
  stream.on("error", () => undefined);
  const exited = new Promise<void>((resolve) => {
    stream.once("end", resolve);
    stream.once("close", resolve);
    stream.once("error", () => resolve());
  }).then(async () => {
    stdout.end();
    stderr.end();
    return exitCodeOf(exec);
  });
  return { stdin: stream, stdout, stderr, exited };
}

async function exitCodeOf(exec: Docker.Exec): Promise<number | null> {
  for (let i = 0; i < 50; i++) {
    const info = await exec.inspect().catch(() => null);
    if (!info) return null;
    if (!info.Running) return info.ExitCode ?? null;
    await new Promise((r) => setTimeout(r, 10));
  }
  return null;
}
