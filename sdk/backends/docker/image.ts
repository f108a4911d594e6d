import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import type Docker from "dockerode";
import tar from "tar-stream";
import { UnavailableError, InvalidArgumentError, ProvisionFailedError } from "../../errors.js";
import type { Logger, ProgressListener } from "../../logger.js";

/** Everything that decides the workspace image; the tag is the hash of what they render to. */
export interface ImageInputs {
  baseImage: string;
  /** Node major version the image must have (checked at build time; no registry is assumed). */
  nodeVersion?: string | undefined;
  pythonPackages?: string[] | undefined;
  npmPackages?: string[] | undefined;
  /** PEM bundle appended to the image's trust store. */
  caCertificates?: string | undefined;
}

export interface BuildContext {
  dockerfile: string;
  /** Extra files in the build context, by name. */
  files: Record<string, Buffer>;
  tag: string;
}

export const IMAGE_REPO = "agentws-workspace";
export const IMAGE_LABEL = "agent-workspaces.image-inputs";

/** Renders the Dockerfile and its context, and names the image after their hash. */
export async function renderBuildContext(inputs: ImageInputs): Promise<BuildContext> {
  const files: Record<string, Buffer> = {};
  const lines = ["# agent-workspaces workspace image (generated). Its tag is the hash of this file and the build context.", `FROM ${inputs.baseImage}`];
  if (inputs.caCertificates) {
    files["extra-ca.crt"] = await fs.readFile(inputs.caCertificates).catch((e: unknown) => {
      throw new InvalidArgumentError(`cannot read '${inputs.caCertificates}'`, { field: "caCertificates", cause: e });
    });
    lines.push(
      "COPY extra-ca.crt /usr/local/share/agentws/extra-ca.crt",
      "RUN mkdir -p /etc/ssl/certs && cat /usr/local/share/agentws/extra-ca.crt >> /etc/ssl/certs/ca-certificates.crt",
      "ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
    );
  }
  // Tools the sandbox's file operations rely on; fail the build early with a clear message.
  lines.push(
    `RUN for t in sh cat realpath find mkdir mv rm grep; do command -v "$t" >/dev/null || { echo "base image ${inputs.baseImage} lacks '$t' (coreutils/findutils/grep)" >&2; exit 1; }; done`,
  );
  if (inputs.nodeVersion)
    lines.push(
      `RUN command -v node >/dev/null || { echo "base image ${inputs.baseImage} has no node; nodeVersion ${inputs.nodeVersion} needs it" >&2; exit 1; }; ` +
        `v=$(node -p 'process.versions.node.split(".")[0]'); [ "$v" = "${inputs.nodeVersion}" ] || { echo "base image ${inputs.baseImage} has Node $v, nodeVersion asks for ${inputs.nodeVersion}" >&2; exit 1; }`,
    );
  const needApt = (inputs.pythonPackages?.length ?? 0) > 0 || (inputs.npmPackages?.length ?? 0) > 0;
  if (needApt) {
    const want = [(inputs.pythonPackages?.length ?? 0) > 0 ? "python3-pip" : "", (inputs.npmPackages?.length ?? 0) > 0 ? "npm" : ""].filter(Boolean);
    lines.push(
      `RUN missing=""; for p in ${want.join(" ")}; do case $p in python3-pip) python3 -m pip --version >/dev/null 2>&1 || missing="$missing $p";; npm) command -v npm >/dev/null || missing="$missing $p";; esac; done; ` +
        `if [ -n "$missing" ]; then apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing && rm -rf /var/lib/apt/lists/*; fi`,
    );
  }
  if (inputs.pythonPackages?.length) {
    files["requirements.txt"] = Buffer.from(`${inputs.pythonPackages.join("\n")}\n`);
    lines.push(
      "COPY requirements.txt /usr/local/share/agentws/requirements.txt",
      "RUN python3 -m pip install --no-cache-dir --disable-pip-version-check --break-system-packages -r /usr/local/share/agentws/requirements.txt",
    );
  }
  if (inputs.npmPackages?.length) lines.push(`RUN npm install -g --no-audit --no-fund ${inputs.npmPackages.map(shellQuote).join(" ")}`);
  // World-writable inside the image so a non-root `user` can use an ephemeral /workspace; a bind mount brings its own mode.
  lines.push("RUN mkdir -p /workspace && chmod 0777 /workspace", "WORKDIR /workspace", 'CMD ["sleep", "infinity"]');
  const dockerfile = `${lines.join("\n")}\n`;
  const h = createHash("sha256").update("DOCKERFILE\0").update(dockerfile);
  for (const name of Object.keys(files).sort()) h.update("\0FILE\0").update(name).update("\0").update(files[name]!);
  return { dockerfile, files, tag: `${IMAGE_REPO}:${h.digest("hex").slice(0, 12)}` };
}

const building = new Map<string, Promise<string>>();

/**
 * Returns the image tag for these inputs, building it only when no image has that tag yet.
 * Concurrent callers in one process share one build; across processes the engine builds the same
 * content to the same tag. Progress lines go to `onProgress` as they stream.
 */
export async function ensureImage(
  docker: Docker,
  inputs: ImageInputs,
  ctx: { logger?: Logger | undefined; onProgress?: ProgressListener | undefined; signal?: AbortSignal | undefined } = {},
): Promise<string> {
  const context = await renderBuildContext(inputs);
  if (await imageExists(docker, context.tag)) return context.tag;
  let flight = building.get(context.tag);
  if (!flight) {
    flight = build(docker, inputs, context, ctx).finally(() => building.delete(context.tag));
    building.set(context.tag, flight);
  }
  return flight;
}

async function build(
  docker: Docker,
  inputs: ImageInputs,
  context: BuildContext,
  ctx: { logger?: Logger | undefined; onProgress?: ProgressListener | undefined; signal?: AbortSignal | undefined },
): Promise<string> {
  if (!(await imageExists(docker, inputs.baseImage)))
    throw new UnavailableError(
      `base image '${inputs.baseImage}' is not on the Docker engine; build it offline with scripts/base-image.sh (or pull it), then retry`,
    );
  ctx.onProgress?.({ phase: "image", message: `building ${context.tag} from ${inputs.baseImage}`, fraction: 0 });
  ctx.logger?.info("building workspace image", { tag: context.tag, baseImage: inputs.baseImage });
  const pack = tar.pack();
  pack.entry({ name: "Dockerfile", mode: 0o644 }, context.dockerfile);
  for (const [name, data] of Object.entries(context.files)) pack.entry({ name, mode: 0o644 }, data);
  pack.finalize();
  const stream = await docker.buildImage(pack as unknown as NodeJS.ReadableStream, {
    t: context.tag,
    rm: true,
    forcerm: true,
    labels: { [IMAGE_LABEL]: JSON.stringify({ ...inputs, caCertificates: inputs.caCertificates ? "(file)" : undefined }) },
  });
  const tail: string[] = [];
  // Images the (legacy) builder committed step by step: on a failure they are ours to remove.
  const steps: string[] = [];
  let error: string | undefined;
  const onAbort = () => (stream as unknown as { destroy?: () => void }).destroy?.();
  ctx.signal?.addEventListener("abort", onAbort, { once: true });
  try {
    await new Promise<void>((resolve, reject) => {
      docker.modem.followProgress(
        stream,
        (err: Error | null) => (err ? reject(err) : resolve()),
        (event: { stream?: string; error?: string; errorDetail?: { message?: string } }) => {
          if (event.error) error = event.errorDetail?.message ?? event.error;
          const text = event.stream?.trimEnd();
          if (!text) return;
          tail.push(text);
          if (tail.length > 200) tail.shift();
          const committed = /^ ---> ([0-9a-f]{12,64})$/.exec(text);
          if (committed) steps.push(committed[1]!);
          const step = /^Step (\d+)\/(\d+)/.exec(text);
          ctx.onProgress?.({ phase: "image", message: text, ...(step ? { fraction: (Number(step[1]) - 1) / Number(step[2]) } : {}) });
        },
      );
    });
  } catch (e) {
    await removeBuildLeftovers(docker, inputs.baseImage, steps);
    throw new ProvisionFailedError(`docker build of ${context.tag} failed: ${String(e)}`, { cause: e });
  } finally {
    ctx.signal?.removeEventListener("abort", onAbort);
  }
  if (error || !(await imageExists(docker, context.tag))) {
    await removeBuildLeftovers(docker, inputs.baseImage, steps);
    throw new ProvisionFailedError(
      `docker build of ${context.tag} failed: ${error ?? "no image was produced"}\n--- last ${Math.min(tail.length, 30)} build log lines ---\n${tail.slice(-30).join("\n")}`,
    );
  }
  ctx.onProgress?.({ phase: "image", message: `built ${context.tag}`, fraction: 1 });
  return context.tag;
}

/**
 * After a failed build, the step images it committed (untagged, last first) are removed: never forced,
 * never the base image, never one with a tag or a child (another build's cache), so only what this build
 * alone made goes. Best effort: a failure here must not hide the build's own error.
 */
async function removeBuildLeftovers(docker: Docker, baseImage: string, steps: string[]): Promise<void> {
  const base = await docker
    .getImage(baseImage)
    .inspect()
    .then(
      (i) => i.Id,
      () => undefined,
    );
  for (const id of [...new Set(steps)].reverse()) {
    try {
      const info = await docker.getImage(id).inspect();
      if (info.Id === base || (info.RepoTags ?? []).some((t) => t !== "<none>:<none>")) continue;
      await docker.getImage(info.Id).remove();
    } catch {
      // In use, a parent of another image, or already gone: it stays, as it should.
    }
  }
}

export async function imageExists(docker: Docker, name: string): Promise<boolean> {
  try {
    await docker.getImage(name).inspect();
    return true;
  } catch (e) {
    if ((e as { statusCode?: number }).statusCode === 404) return false;
    throw dockerUnavailable(e);
  }
}

export function dockerUnavailable(e: unknown): unknown {
  const code = (e as NodeJS.ErrnoException)?.code;
  if (code === "ENOENT" || code === "ECONNREFUSED" || code === "EACCES")
    return new UnavailableError(`cannot reach the Docker engine (${code}); start it (scripts/dockerd.sh start) and set DOCKER_HOST or socketPath`, {
      cause: e,
    });
  return e;
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

export interface PruneImagesOptions {
  /** Only images built from this base image (e.g. an old base after moving to a new one). */
  baseImage?: string | undefined;
  /** List what would be removed without removing anything. */
  dryRun?: boolean | undefined;
}

export interface PruneImagesResult {
  removed: Array<{ tag: string; id: string; bytes: number }>;
  /**
   * Images still used by a container (stopped and paused ones count), with how many use them; 1
   * stands for "at least one" when the engine refused a removal because a container gained the
   * image after the listing.
   */
  kept: Array<{ tag: string; id: string; containers: number }>;
}

/**
 * Removes workspace images (those carrying IMAGE_LABEL) that no container uses. Every change of
 * image inputs builds a new tag and leaves the old one behind; this is how they go. Never forced:
 * an image a container gained meanwhile stays (the engine refuses, and it is reported as kept).
 */
export async function pruneImages(docker: Docker, options: PruneImagesOptions = {}): Promise<PruneImagesResult> {
  let images: Docker.ImageInfo[];
  let containers: Docker.ContainerInfo[];
  try {
    [images, containers] = await Promise.all([docker.listImages({ filters: { label: [IMAGE_LABEL] } }), docker.listContainers({ all: true })]);
  } catch (e) {
    throw dockerUnavailable(e);
  }
  const users = new Map<string, number>();
  for (const c of containers) users.set(c.ImageID, (users.get(c.ImageID) ?? 0) + 1);
  const result: PruneImagesResult = { removed: [], kept: [] };
  for (const image of images) {
    if (options.baseImage !== undefined && inputsOf(image)?.baseImage !== options.baseImage) continue;
    const tag = image.RepoTags?.find((t) => t !== "<none>:<none>") ?? image.Id;
    const using = users.get(image.Id) ?? 0;
    if (using > 0) {
      result.kept.push({ tag, id: image.Id, containers: using });
      continue;
    }
    if (!options.dryRun) {
      try {
        await docker.getImage(image.Id).remove();
      } catch (e) {
        const code = (e as { statusCode?: number }).statusCode;
        if (code === 404) continue;
        if (code === 409) {
          result.kept.push({ tag, id: image.Id, containers: 1 });
          continue;
        }
        throw dockerUnavailable(e);
      }
    }
    result.removed.push({ tag, id: image.Id, bytes: image.Size });
  }
  return result;
}

function inputsOf(image: Docker.ImageInfo): Partial<ImageInputs> | undefined {
  try {
    return JSON.parse(image.Labels?.[IMAGE_LABEL] ?? "") as Partial<ImageInputs>;
  } catch {
    return undefined;
  }
}
