import { PassThrough, type Duplex } from "node:stream";
import type Docker from "dockerode";

/**
 * The real side of the emulator: every sandbox is a container on the project's Docker engine, built
 * from a template image that has E2B's default user (`user`, home /home/user). Pause is `docker pause`
 * (memory and processes kept, as E2B's default pause), a snapshot is `docker commit`.
 */
export const SANDBOX_LABEL = "agentws-e2b-emulator.sandbox";
export const USER_HOME = "/home/user";

/** Output of one exec, bounded per stream. */
export interface RunResult {
  code: number;
  stdout: Buffer;
  stderr: Buffer;
}

/** The image for template `base`: the base image with E2B's `user`, made once per engine. */
export async function templateImage(docker: Docker, baseImage: string): Promise<string> {
  const tag = `agentws-e2b-template:${baseImage.replace(/[^A-Za-z0-9_.-]/g, "-")}`;
  if (
    await docker
      .getImage(tag)
      .inspect()
      .then(
        () => true,
        () => false,
      )
  )
    return tag;
  const c = await docker.createContainer({ Image: baseImage, Cmd: ["sleep", "infinity"], HostConfig: { NetworkMode: "none", Init: true } });
  try {
    await c.start();
    const r = await run(docker, c, ["sh", "-c", "id user >/dev/null 2>&1 || useradd -m -s /bin/bash user; mkdir -p /home/user && chown user:user /home/user"], {
      user: "root",
      cwd: "/",
    });
    if (r.code !== 0) throw new Error(`template setup failed (${r.code}): ${r.stderr.toString()}${r.stdout.toString()}`);
    await c.commit({ repo: tag.split(":")[0], tag: tag.split(":")[1], changes: ["WORKDIR /home/user"] } as never);
  } finally {
    await c.remove({ force: true }).catch(() => undefined);
  }
  return tag;
}

export async function createSandboxContainer(docker: Docker, image: string, sandboxId: string, env: Record<string, string>): Promise<Docker.Container> {
  const c = await docker.createContainer({
    name: `e2b-emu-${sandboxId}`,
    Image: image,
    Cmd: ["sleep", "infinity"],
    Labels: { [SANDBOX_LABEL]: sandboxId },
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    WorkingDir: USER_HOME,
    // CAP_SYS_PTRACE for root only (envd, root with every capability in a real sandbox, opens a non-dumpable
    // runner's /proc/<pid>/fd/<n>); commands run as \`user\`, whose processes have no effective capability.
    HostConfig: { NetworkMode: "none", Init: true, PidsLimit: 512, Memory: 1024 ** 3, MemorySwap: 1024 ** 3, CapAdd: ["SYS_PTRACE"] },
  });
  await c.start();
  return c;
}

export interface ExecStart {
  exec: Docker.Exec;
  stream: Duplex;
  stdout: PassThrough;
  stderr: PassThrough;
}

/** Starts a process in the container with its streams (stdin attached when asked). */
export async function start(
  docker: Docker,
  c: Docker.Container,
  argv: string[],
  o: { user?: string; env?: string[]; cwd?: string; stdin?: boolean } = {},
): Promise<ExecStart> {
  const exec = await c.exec({
    Cmd: argv,
    AttachStdin: o.stdin ?? false,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    User: o.user ?? "user",
    Env: o.env ?? [],
    WorkingDir: o.cwd ?? USER_HOME,
  });
  const stream = (await exec.start(o.stdin ? { hijack: true, stdin: true } : {})) as unknown as Duplex;
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  docker.modem.demuxStream(stream, stdout, stderr);
  stream.on("error", () => undefined);
  stream.once("end", () => {
    stdout.end();
    stderr.end();
  });
  stream.once("close", () => {
    stdout.end();
    stderr.end();
  });
  return { exec, stream, stdout, stderr };
}

/** The exit code once the exec stopped (the stream can end a moment before the engine records it). */
export async function exitCode(exec: Docker.Exec): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const info = await exec.inspect().catch(() => null);
    if (!info) return -1;
    if (!info.Running) return info.ExitCode ?? -1;
    await new Promise((r) => setTimeout(r, i < 10 ? 2 : 20));
  }
  return -1;
}

/** One command to completion, output bounded at `max` bytes per stream. */
export async function run(
  docker: Docker,
  c: Docker.Container,
  argv: string[],
  o: { user?: string; env?: string[]; cwd?: string; stdin?: Buffer; max?: number } = {},
): Promise<RunResult> {
  const max = o.max ?? 64 * 1024 * 1024;
  const s = await start(docker, c, argv, { ...o, stdin: o.stdin !== undefined });
  if (o.stdin !== undefined) s.stream.end(o.stdin);
  const collect = (r: PassThrough) =>
    new Promise<Buffer>((resolve) => {
      const chunks: Buffer[] = [];
      let n = 0;
      r.on("data", (b: Buffer) => {
        if (n + b.length <= max) chunks.push(b);
        n += b.length;
      });
      r.on("end", () => resolve(Buffer.concat(chunks)));
    });
  const [stdout, stderr] = await Promise.all([collect(s.stdout), collect(s.stderr)]);
  return { code: await exitCode(s.exec), stdout, stderr };
}
