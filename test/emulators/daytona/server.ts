// Size: the emulated control plane in one place (HTTP plumbing, auth, faults, the sandbox state machine over real containers, listing).
import { createHash, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type Docker from "dockerode";
import { WebSocketServer } from "ws";
import { execCapture } from "./docker.js";
import { HttpError, readJson, send, sendError, type Reply } from "./http.js";
import { Toolbox, type ToolboxBox } from "./toolbox.js";

/** Daytona's sandbox states the emulator goes through. */
type State = "creating" | "starting" | "started" | "stopping" | "stopped" | "archived" | "destroying" | "error";

interface Box extends ToolboxBox {
  name: string;
  org: string;
  labels: Record<string, string>;
  env: Record<string, string>;
  snapshot: string;
  image: string;
  target: string;
  user: string;
  public: boolean;
  autoStopInterval: number;
  autoArchiveInterval: number;
  autoDeleteInterval: number;
  state: State;
  errorReason?: string | undefined;
  createdAt: string;
  updatedAt: string;
  lastActivity: number;
  /** The state change in flight (start, stop), so racing calls join it. */
  transition?: Promise<void> | undefined;
}

export interface DaytonaEmulatorOptions {
  docker: Docker;
  /** Image behind the default snapshot (and any snapshot name not in `snapshots`). */
  image: string;
  snapshots?: Record<string, string>;
  /** Milliseconds one of Daytona's minutes lasts here (auto-stop); default a real minute. */
  minuteMs?: number;
  /** Network mode of the sandbox containers; default none (tests run offline). */
  network?: string;
}

/**
 * Switches a test flips to make the emulator misbehave the way the real service does:
 * `rateLimited` answers 429 with Retry-After to that many control-plane calls; `failStarts` makes
 * that many start calls fail with 503 (nothing started); `createDelayMs` keeps a new sandbox in
 * `creating` that long; `quotaExceeded` refuses creates with Daytona's 403 quota answer.
 * On the toolbox's file routes: `procFdRefused` refuses every `/proc/...` path (as a daemon that
 * cannot open another process's descriptor links would), `transferDelayMs` holds each transfer that
 * long before it touches the sandbox.
 */
export interface Faults {
  rateLimited: number;
  retryAfterSeconds: number;
  failStarts: number;
  createDelayMs: number;
  quotaExceeded: boolean;
  procFdRefused: boolean;
  transferDelayMs: number;
}

const EMULATOR_LABEL = "agentws-emulator";
const LANGUAGE_LABEL = "code-toolbox-language";

/**
 * A local stand-in for Daytona's API (control plane and toolbox) whose sandboxes are real
 * containers on a Docker engine. The unchanged `@daytonaio/sdk` drives it with
 * `apiUrl: emulator.apiUrl` and `useDeprecatedPolling: true`. Each API key is one organization.
 */
export class DaytonaEmulator {
  readonly faults: Faults = {
    rateLimited: 0,
    retryAfterSeconds: 1,
    failStarts: 0,
    createDelayMs: 0,
    quotaExceeded: false,
    procFdRefused: false,
    transferDelayMs: 0,
  };
  /** The sandbox paths the toolbox's file routes were asked for, oldest first (the last 200). */
  get transfers(): ReadonlyArray<{ route: "upload" | "download"; path: string }> {
    return this.#toolbox.transfers;
  }
  /** Calls per "METHOD /route-shape", for tests that count what the SDK did. */
  readonly calls = new Map<string, number>();
  readonly #boxes = new Map<string, Box>();
  readonly #docker: Docker;
  readonly #toolbox: Toolbox;
  readonly #opts: DaytonaEmulatorOptions;
  readonly #instance = randomUUID();
  #server: Server | undefined;
  #wss = new WebSocketServer({ noServer: true });
  #sweeper: NodeJS.Timeout | undefined;
  #lastCreated = 0;
  #port = 0;

  constructor(options: DaytonaEmulatorOptions) {
    this.#opts = options;
    this.#docker = options.docker;
    this.#toolbox = new Toolbox(options.docker, this.faults);
  }

  get apiUrl(): string {
    return `http://127.0.0.1:${this.#port}/api`;
  }

  get toolboxUrl(): string {
    return `http://127.0.0.1:${this.#port}/toolbox`;
  }

  async start(port = 0): Promise<this> {
    const server = createServer((req, res) => void this.#serve(req, res));
    server.on("upgrade", (req, socket, head) => this.#upgrade(req, socket as import("node:net").Socket, head));
    await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
    this.#server = server;
    this.#port = (server.address() as AddressInfo).port;
    const minute = this.#opts.minuteMs ?? 60_000;
    this.#sweeper = setInterval(() => void this.#autoStop(minute), Math.max(100, Math.min(minute / 4, 10_000)));
    this.#sweeper.unref();
    return this;
  }

  /** Stops serving and removes every container this emulator made. */
  async close(): Promise<void> {
    clearInterval(this.#sweeper);
    for (const ws of this.#wss.clients) ws.terminate();
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()));
    this.#server?.closeAllConnections();
    const rows = await this.#docker.listContainers({ all: true, filters: { label: [`${EMULATOR_LABEL}=${this.#instance}`] } });
    await Promise.all(
      rows.map((r) =>
        this.#docker
          .getContainer(r.Id)
          .remove({ force: true })
          .catch(() => undefined),
      ),
    );
    this.#boxes.clear();
  }

  /** The sandboxes (ids) whose labels include all of `labels`, in any organization. */
  sandboxes(labels: Record<string, string> = {}): string[] {
    return [...this.#boxes.values()].filter((b) => matches(b.labels, labels)).map((b) => b.id);
  }

  /** The state and container of a sandbox, as the emulator sees it. */
  inspect(
    id: string,
  ): { state: State; containerId: string; autoStopInterval: number; labels: Record<string, string>; env: Record<string, string> } | undefined {
    const b = this.#boxes.get(id);
    return b && { state: b.state, containerId: b.containerId, autoStopInterval: b.autoStopInterval, labels: { ...b.labels }, env: { ...b.env } };
  }

  /** A sandbox that disappears: its container removed behind everyone's back, the API forgets it. */
  async vanish(id: string): Promise<void> {
    const b = this.#boxes.get(id);
    if (!b) return;
    this.#boxes.delete(id);
    this.#toolbox.dropSessions(b);
    await this.#docker
      .getContainer(b.containerId)
      .remove({ force: true })
      .catch(() => undefined);
  }

  async #serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const url = new URL(req.url ?? "/", "http://emulator");
      const org = this.#auth(req);
      if (url.pathname.startsWith("/toolbox/")) {
        const [, , id, ...rest] = url.pathname.split("/");
        const route = `/${rest.join("/")}`;
        this.#count(req.method!, `/toolbox${route.replace(/\/[0-9a-f-]{36}/g, "/:id")}`);
        const box = this.#running(org, decodeURIComponent(id ?? ""));
        box.lastActivity = Date.now();
        return send(res, await this.#toolbox.handle(box, req.method!, route, url, req, () => readJson(req)));
      }
      if (!url.pathname.startsWith("/api/")) throw new HttpError(404, `no route ${url.pathname}`);
      const route = url.pathname.slice("/api".length);
      this.#count(req.method!, route.replace(/^\/sandbox\/[^/]+/, "/sandbox/:id"));
      if (this.faults.rateLimited > 0) {
        this.faults.rateLimited--;
        throw new HttpError(429, "Too many requests, please slow down", { "retry-after": String(this.faults.retryAfterSeconds) });
      }
      send(res, await this.#control(org, req.method!, route, url, () => readJson(req)));
    } catch (e) {
      sendError(res, e);
    }
  }

  #upgrade(req: IncomingMessage, socket: import("node:net").Socket, head: Buffer): void {
    try {
      const url = new URL(req.url ?? "/", "http://emulator");
      const org = this.#auth(req);
      const [, toolbox, id, ...rest] = url.pathname.split("/");
      if (toolbox !== "toolbox") throw new HttpError(404, "no websocket here");
      const box = this.#running(org, decodeURIComponent(id ?? ""));
      this.#wss.handleUpgrade(req, socket, head, (ws) => this.#toolbox.follow(box, `/${rest.join("/")}`, ws));
    } catch (e) {
      const status = e instanceof HttpError ? e.status : 500;
      socket.end(`HTTP/1.1 ${status} Error\r\nConnection: close\r\n\r\n`);
    }
  }

  #count(method: string, route: string): void {
    const key = `${method} ${route}`;
    this.calls.set(key, (this.calls.get(key) ?? 0) + 1);
  }

  /** The organization an API key stands for; 401 without one. */
  #auth(req: IncomingMessage): string {
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? "");
    if (!m) throw new HttpError(401, "Unauthorized: missing API key");
    return `org-${createHash("sha256").update(m[1]!).digest("hex").slice(0, 12)}`;
  }

  #get(org: string, idOrName: string): Box {
    const b = this.#boxes.get(idOrName) ?? [...this.#boxes.values()].find((x) => x.org === org && x.name === idOrName);
    if (!b || b.org !== org) throw new HttpError(404, `Sandbox with ID or name ${idOrName} not found`);
    return b;
  }

  #running(org: string, id: string): Box {
    const b = this.#get(org, id);
    if (b.state !== "started") throw new HttpError(409, `Sandbox ${id} is not started (state: ${b.state})`);
    return b;
  }

  async #control(org: string, method: string, route: string, url: URL, body: () => Promise<unknown>): Promise<Reply> {
    if (route === "/sandbox" && method === "POST") return { json: this.#dto(await this.#create(org, (await body()) as CreateBody)) };
    if (route === "/sandbox" && method === "GET") return { json: this.#list(org, url) };
    const m = /^\/sandbox\/([^/]+)(\/.*)?$/.exec(route);
    if (!m) throw new HttpError(404, `no route ${method} ${route}`);
    const box = this.#get(org, decodeURIComponent(m[1]!));
    const sub = m[2] ?? "";
    if (sub === "" && method === "GET") return { json: this.#dto(box) };
    if (sub === "" && method === "DELETE") return { json: this.#dto(await this.#delete(box)) };
    if (sub === "/start" && method === "POST") return { json: this.#dto(this.#start(box)) };
    if (sub === "/stop" && method === "POST") return { json: this.#dto(this.#stop(box)) };
    if (sub === "/archive" && method === "POST") {
      if (box.state !== "stopped") throw new HttpError(400, "Sandbox must be stopped before it can be archived");
      box.state = "archived";
      return { json: this.#dto(touch(box)) };
    }
    if (sub === "/labels" && method === "PUT") {
      const { labels } = (await body()) as { labels?: Record<string, string> };
      if (!labels || typeof labels !== "object") throw new HttpError(400, "labels is required");
      box.labels = { ...labels };
      return { json: { labels: box.labels } };
    }
    if (sub === "/toolbox-proxy-url" && method === "GET") return { json: { url: this.toolboxUrl } };
    const auto = /^\/(autostop|autoarchive|autodelete)\/(-?\d+)$/.exec(sub);
    if (auto && method === "POST") {
      const n = Number(auto[2]);
      if (auto[1] === "autostop") box.autoStopInterval = n;
      else if (auto[1] === "autoarchive") box.autoArchiveInterval = n;
      else box.autoDeleteInterval = n;
      touch(box);
      return { status: 200 };
    }
    throw new HttpError(404, `no route ${method} /sandbox/{id}${sub}`);
  }

  async #create(org: string, b: CreateBody): Promise<Box> {
    if (this.faults.quotaExceeded)
      throw new HttpError(
        403,
        "Total CPU limit exceeded. Maximum allowed: 10. To increase concurrency limits, upgrade your organization's Tier or delete unused sandboxes.",
      );
    const id = randomUUID();
    const name = b.name || id;
    if ([...this.#boxes.values()].some((x) => x.org === org && x.name === name)) throw new HttpError(409, `Sandbox with name ${name} already exists`);
    const image = this.#imageFor(b);
    // Creation order must be total: convergence compares createdAt, so no two sandboxes share one.
    const now = Math.max(Date.now(), this.#lastCreated + 1);
    this.#lastCreated = now;
    const box: Box = {
      id,
      name,
      org,
      labels: { ...(b.labels ?? {}) },
      env: { ...(b.env ?? {}) },
      snapshot: b.snapshot ?? "daytona-default",
      image,
      target: b.target || "us",
      user: b.user || "daytona",
      public: b.public ?? false,
      autoStopInterval: b.autoStopInterval ?? 15,
      autoArchiveInterval: b.autoArchiveInterval ?? 10_080,
      autoDeleteInterval: b.autoDeleteInterval ?? -1,
      state: "creating",
      createdAt: new Date(now).toISOString(),
      updatedAt: new Date(now).toISOString(),
      lastActivity: now,
      containerId: "",
      workDir: "/home/daytona",
      sessions: new Map(),
    };
    const container = await this.#docker.createContainer({
      name: `daytona-emu-${id}`,
      Image: image,
      Cmd: ["sh", "-c", `mkdir -p ${box.workDir} && exec sleep infinity`],
      WorkingDir: "/",
      Env: Object.entries(box.env).map(([k, v]) => `${k}=${v}`),
      Labels: { [EMULATOR_LABEL]: this.#instance, "agentws-emulator.sandbox": id },
      // CAP_SYS_PTRACE: the daemon (root, every capability in a real sandbox) opens a non-dumpable runner's
      // /proc/<pid>/fd/<n> for big-file transfers. The emulated daemon and the sandbox's commands both run
      // as root here, so they share it: this emulator does not hold the runner boundary (see the README).
      HostConfig: { NetworkMode: this.#opts.network ?? "none", Init: true, PidsLimit: 1024, CapAdd: ["SYS_PTRACE"] },
    });
    box.containerId = container.id;
    this.#boxes.set(id, box);
    box.transition = (async () => {
      if (this.faults.createDelayMs) await sleep(this.faults.createDelayMs);
      if (!this.#boxes.has(id)) return;
      box.state = "starting";
      await this.#startContainer(box);
    })().finally(() => (box.transition = undefined));
    return box;
  }

  #imageFor(b: CreateBody): string {
    if (b.buildInfo?.dockerfileContent) {
      // Image.base('x') renders "FROM x"; anything more is not built here (see the README).
      const from = /^FROM\s+(\S+)/m.exec(b.buildInfo.dockerfileContent);
      if (!from) throw new HttpError(400, "buildInfo.dockerfileContent has no FROM line");
      return from[1]!;
    }
    return (b.snapshot && this.#opts.snapshots?.[b.snapshot]) || this.#opts.image;
  }

  async #startContainer(box: Box): Promise<void> {
    try {
      await this.#docker.getContainer(box.containerId).start();
      await waitWorkDir(this.#docker, box);
      box.state = "started";
      box.lastActivity = Date.now();
    } catch (e) {
      const status = (e as { statusCode?: number }).statusCode;
      if (status === 304) box.state = "started";
      else {
        box.state = "error";
        box.errorReason = String((e as Error).message).slice(0, 300);
      }
    }
    touch(box);
  }

  #start(box: Box): Box {
    if (box.state === "started" || box.state === "starting" || box.state === "creating") return box;
    if (box.state === "stopping") throw new HttpError(409, "Sandbox is stopping; wait until it is stopped");
    if (this.faults.failStarts > 0) {
      this.faults.failStarts--;
      throw new HttpError(503, "Runner unavailable, please retry");
    }
    box.state = "starting";
    touch(box);
    box.transition = this.#startContainer(box).finally(() => (box.transition = undefined));
    return box;
  }

  #stop(box: Box): Box {
    if (box.state === "stopped" || box.state === "archived" || box.state === "stopping") return box;
    if (box.state !== "started") throw new HttpError(409, `Sandbox cannot be stopped in state ${box.state}`);
    box.state = "stopping";
    touch(box);
    this.#toolbox.dropSessions(box);
    box.transition = this.#docker
      .getContainer(box.containerId)
      .stop({ t: 1 })
      .catch(() => undefined)
      .then(() => {
        box.state = "stopped";
        touch(box);
      })
      .finally(() => (box.transition = undefined));
    return box;
  }

  async #delete(box: Box): Promise<Box> {
    box.state = "destroying";
    this.#toolbox.dropSessions(box);
    await box.transition?.catch(() => undefined);
    await this.#docker
      .getContainer(box.containerId)
      .remove({ force: true })
      .catch(() => undefined);
    this.#boxes.delete(box.id);
    return box;
  }

  #list(org: string, url: URL) {
    const q = url.searchParams;
    let labels: Record<string, string> = {};
    if (q.get("labels")) {
      try {
        labels = JSON.parse(q.get("labels")!) as Record<string, string>;
      } catch {
        throw new HttpError(400, "labels must be a JSON object");
      }
    }
    const states = q.getAll("states");
    const rows = [...this.#boxes.values()]
      .filter((b) => b.org === org && matches(b.labels, labels) && (states.length === 0 || states.includes(b.state)))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
    const limit = Math.min(Math.max(Number(q.get("limit") ?? 100) || 100, 1), 200);
    const from = Number(q.get("cursor") ?? 0) || 0;
    const page = rows.slice(from, from + limit);
    return { items: page.map((b) => ({ ...this.#dto(b), env: undefined })), nextCursor: from + limit < rows.length ? String(from + limit) : null };
  }

  #dto(b: Box) {
    return {
      id: b.id,
      organizationId: b.org,
      name: b.name,
      snapshot: b.snapshot,
      user: b.user,
      env: b.env,
      labels: b.labels,
      public: b.public,
      networkBlockAll: false,
      target: b.target,
      cpu: 1,
      gpu: 0,
      memory: 1,
      disk: 3,
      state: b.state,
      ...(b.errorReason ? { errorReason: b.errorReason } : {}),
      recoverable: false,
      autoStopInterval: b.autoStopInterval,
      autoArchiveInterval: b.autoArchiveInterval,
      autoDeleteInterval: b.autoDeleteInterval,
      createdAt: b.createdAt,
      updatedAt: b.updatedAt,
      lastActivityAt: new Date(b.lastActivity).toISOString(),
      sandboxClass: "container",
      daemonVersion: "emulator",
      toolboxProxyUrl: this.toolboxUrl,
    };
  }

  /** Daytona stops a started sandbox after `autoStopInterval` minutes without toolbox activity (0: never). */
  async #autoStop(minuteMs: number): Promise<void> {
    const now = Date.now();
    for (const b of this.#boxes.values())
      if (b.state === "started" && b.autoStopInterval > 0 && now - b.lastActivity > b.autoStopInterval * minuteMs) this.#stop(b);
  }
}

interface CreateBody {
  name?: string;
  snapshot?: string;
  buildInfo?: { dockerfileContent?: string };
  user?: string;
  env?: Record<string, string>;
  labels?: Record<string, string>;
  public?: boolean;
  target?: string;
  autoStopInterval?: number;
  autoArchiveInterval?: number;
  autoDeleteInterval?: number;
}

/** The toolbox is ready once the work dir exists (the entrypoint makes it too, but maybe not yet). */
async function waitWorkDir(docker: Docker, box: Box): Promise<void> {
  const r = await execCapture(docker, box.containerId, ["mkdir", "-p", box.workDir]);
  if (r.exitCode !== 0) throw new Error(`cannot make the work dir: ${r.stderr.toString().slice(0, 200)}`);
}

function matches(have: Record<string, string>, want: Record<string, string>): boolean {
  return Object.entries(want).every(([k, v]) => have[k] === v);
}

function touch(b: Box): Box {
  b.updatedAt = new Date().toISOString();
  return b;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export { LANGUAGE_LABEL };
