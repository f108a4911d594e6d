// Size: E2B's control plane (sandboxes, snapshots) and the envd routing by `E2b-Sandbox-Id` in one
// server, with the fault switches the tests turn; envd itself lives in envd.ts.
import { randomBytes } from "node:crypto";
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type Docker from "dockerode";
import { readBody } from "./connect.js";
import { createSandboxContainer, templateImage } from "./containers.js";
import { Envd } from "./envd.js";

/** What the tests can break, each a switch on the running emulator. */
export interface Faults {
  /** The next `count` control-plane requests answer 429 with `Retry-After: retryAfterSeconds`. */
  rateLimit?: { count: number; retryAfterSeconds: number } | undefined;
  /** The next `count` connect (resume) calls on a paused sandbox answer this 5xx status. */
  resumeFailure?: { count: number; status: number } | undefined;
  /** Every create waits this long before it answers (the sandbox exists from the start, listed as running). */
  createDelayMs?: number | undefined;
}

interface Record_ {
  sandboxID: string;
  team: string;
  templateID: string;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  startedAt: string;
  endAt: string;
  timeoutSec: number;
  autoPause: boolean;
  state: "running" | "paused";
  container: Docker.Container;
  envd: Envd;
  timer?: NodeJS.Timeout | undefined;
}

interface Snapshot {
  snapshotID: string;
  team: string;
  names: string[];
  image: string;
  sourceSandboxID: string;
}

export interface E2BEmulator {
  /** Base URL for both `apiUrl` and `sandboxUrl`. */
  readonly url: string;
  readonly faults: Faults;
  /** Control-plane requests seen, by route (for tests asserting what the SDK called). */
  readonly calls: string[];
  /** envd file transfers (`/files` uploads and downloads) and the sandbox path each named, oldest first (the last 200). */
  readonly transfers: { route: "upload" | "download"; path: string }[];
  /** Sandboxes alive now (running or paused), per team api key. */
  sandboxes(team?: string): { sandboxID: string; state: string; metadata: Record<string, string>; containerId: string }[];
  /** The "sandbox disappears" fault: its container is removed behind the control plane's back, and it is forgotten. */
  vanish(sandboxId: string): Promise<void>;
  close(): Promise<void>;
}

const ENVD_VERSION = "0.6.2";
const MAX_TIMEOUT_SEC = 24 * 3600;

/**
 * Starts the emulator on 127.0.0.1 (a free port). Every API key is a team of its own; sandboxes are
 * containers from `baseImage` (plus E2B's `user`), snapshots are committed images.
 */
export async function startE2BEmulator(docker: Docker, options: { baseImage: string; port?: number }): Promise<E2BEmulator> {
  const sandboxes = new Map<string, Record_>();
  const snapshots = new Map<string, Snapshot>();
  const faults: Faults = {};
  const transfers: { route: "upload" | "download"; path: string }[] = [];
  const calls: string[] = [];
  let baseTemplate: Promise<string> | undefined;
  const template = () => (baseTemplate ??= templateImage(docker, options.baseImage));

  const arm = (s: Record_) => {
    clearTimeout(s.timer);
    s.endAt = new Date(Date.now() + s.timeoutSec * 1000).toISOString();
    s.timer = setTimeout(() => void (s.autoPause ? pause(s) : kill(s)), s.timeoutSec * 1000);
    s.timer.unref();
  };
  const kill = async (s: Record_) => {
    clearTimeout(s.timer);
    sandboxes.delete(s.sandboxID);
    s.envd.dropAll();
    if (s.state === "paused") await s.container.unpause().catch(() => undefined);
    await s.container.remove({ force: true }).catch(() => undefined);
  };
  const pause = async (s: Record_) => {
    clearTimeout(s.timer);
    await freeze(s.container);
    s.state = "paused";
    // External connections drop on a pause; the processes are frozen with the sandbox and live on after a resume.
    s.envd.dropStreams();
  };
  const listed = (s: Record_) => ({
    sandboxID: s.sandboxID,
    templateID: s.templateID,
    alias: s.templateID,
    clientID: "emulator",
    cpuCount: 2,
    memoryMB: 1024,
    diskSizeMB: 4096,
    envdVersion: ENVD_VERSION,
    startedAt: s.startedAt,
    endAt: s.endAt,
    state: s.state,
    metadata: s.metadata,
  });
  const created = (s: Record_) => ({ sandboxID: s.sandboxID, templateID: s.templateID, alias: s.templateID, clientID: "emulator", envdVersion: ENVD_VERSION });

  async function control(req: IncomingMessage, res: ServerResponse, url: URL, team: string): Promise<void> {
    const parts = url.pathname.split("/").filter(Boolean);
    const route = `${req.method} ${url.pathname.replace(/\/sandboxes\/[^/]+/, "/sandboxes/:id").replace(/\/templates\/[^/]+/, "/templates/:id")}`;
    calls.push(route);
    if (faults.rateLimit && faults.rateLimit.count > 0) {
      faults.rateLimit.count--;
      res.setHeader("retry-after", String(faults.rateLimit.retryAfterSeconds));
      return send(res, 429, { code: 429, message: "Rate limit exceeded, please try again later" });
    }
    const body = req.method === "POST" ? parseJson(await readBody(req, 1024 * 1024)) : {};
    const own = (id: string | undefined) => {
      const s = id ? sandboxes.get(id) : undefined;
      return s && s.team === team ? s : undefined;
    };
    const notFound = (id: string | undefined) => send(res, 404, { code: 404, message: `sandbox "${id}" not found` });

    if (route === "POST /v2/sandboxes") {
      const templateID = typeof body.templateID === "string" ? body.templateID : "base";
      let image: string;
      if (templateID === "base") image = await template();
      else {
        const snap = [...snapshots.values()].find((x) => x.team === team && (x.snapshotID === templateID || x.names.includes(templateID)));
        if (!snap) return send(res, 404, { code: 404, message: `template '${templateID}' not found` });
        image = snap.image;
      }
      const sandboxID = `i${randomBytes(9).toString("hex")}`;
      const envVars = isStringMap(body.envVars) ? body.envVars : {};
      const container = await createSandboxContainer(docker, image, sandboxID, envVars);
      const s: Record_ = {
        sandboxID,
        team,
        templateID,
        metadata: isStringMap(body.metadata) ? body.metadata : {},
        envVars,
        startedAt: new Date().toISOString(),
        endAt: "",
        timeoutSec: clampTimeout(body.timeout),
        autoPause: body.autoPause === true,
        state: "running",
        container,
        envd: new Envd(
          docker,
          container,
          () => envVars,
          (t) => {
            transfers.push(t);
            if (transfers.length > 200) transfers.shift();
          },
        ),
      };
      sandboxes.set(sandboxID, s);
      arm(s);
      if (faults.createDelayMs) await new Promise((r) => setTimeout(r, faults.createDelayMs));
      return send(res, 201, created(s));
    }
    if (route === "GET /v2/sandboxes") {
      const wanted = metadataQuery(url);
      const states = (url.searchParams.get("state") ?? "running,paused").split(",");
      const rows = [...sandboxes.values()]
        .filter((s) => s.team === team && states.includes(s.state) && Object.entries(wanted).every(([k, v]) => s.metadata[k] === v))
        .sort((a, b) => a.startedAt.localeCompare(b.startedAt) || a.sandboxID.localeCompare(b.sandboxID));
      const limit = Math.max(1, Math.min(Number(url.searchParams.get("limit") ?? 100) || 100, 100));
      const from = Number(url.searchParams.get("nextToken") ? Buffer.from(url.searchParams.get("nextToken")!, "base64url").toString() : 0) || 0;
      const page = rows.slice(from, from + limit);
      if (from + limit < rows.length) res.setHeader("x-next-token", Buffer.from(String(from + limit)).toString("base64url"));
      return send(res, 200, page.map(listed));
    }
    if (parts[0] === "sandboxes" && parts.length === 2 && req.method === "GET") {
      const s = own(parts[1]);
      return s ? send(res, 200, { ...listed(s), domain: null }) : notFound(parts[1]);
    }
    if (parts[0] === "sandboxes" && parts.length === 2 && req.method === "DELETE") {
      const s = own(parts[1]);
      if (!s) return notFound(parts[1]);
      await kill(s);
      return send(res, 204);
    }
    if (route === "POST /sandboxes/:id/pause") {
      const s = own(parts[1]);
      if (!s) return notFound(parts[1]);
      if (s.state === "paused") return send(res, 409, { code: 409, message: `sandbox "${s.sandboxID}" is already paused` });
      await pause(s);
      return send(res, 204);
    }
    if (route === "POST /v2/sandboxes/:id/connect") {
      const s = own(parts[2]);
      if (!s) return notFound(parts[2]);
      if (body.timeout !== undefined)
        s.timeoutSec = Math.max(s.state === "paused" ? 0 : Math.ceil((Date.parse(s.endAt) - Date.now()) / 1000), clampTimeout(body.timeout));
      if (s.state === "running") {
        arm(s);
        return send(res, 200, created(s));
      }
      if (faults.resumeFailure && faults.resumeFailure.count > 0) {
        faults.resumeFailure.count--;
        return send(res, faults.resumeFailure.status, { code: faults.resumeFailure.status, message: "failed to resume sandbox: orchestrator unavailable" });
      }
      await s.container.unpause();
      s.state = "running";
      arm(s);
      return send(res, 201, created(s));
    }
    if (route === "POST /sandboxes/:id/timeout") {
      const s = own(parts[1]);
      if (!s) return notFound(parts[1]);
      s.timeoutSec = clampTimeout(body.timeout);
      if (s.state === "running") arm(s);
      return send(res, 204);
    }
    if (route === "POST /sandboxes/:id/snapshots") {
      const s = own(parts[1]);
      if (!s) return notFound(parts[1]);
      const name = typeof body.name === "string" && body.name ? body.name : undefined;
      const existing = name ? [...snapshots.values()].find((x) => x.team === team && x.names.includes(`${name}:default`)) : undefined;
      const snapshotID = existing?.snapshotID ?? `${name ?? `snap-${randomBytes(6).toString("hex")}`}:default`;
      const repo = `agentws-e2b-snapshot-${createdHash(team)}`;
      const tag = randomBytes(6).toString("hex");
      // Paused for the commit, as E2B pauses a sandbox while it snapshots it.
      const wasRunning = s.state === "running";
      if (wasRunning) await freeze(s.container);
      try {
        await s.container.commit({ repo, tag, pause: false } as never);
      } finally {
        if (wasRunning) await s.container.unpause();
      }
      if (existing)
        await docker
          .getImage(existing.image)
          .remove()
          .catch(() => undefined);
      snapshots.set(snapshotID, { snapshotID, team, names: [snapshotID], image: `${repo}:${tag}`, sourceSandboxID: s.sandboxID });
      return send(res, 201, { snapshotID, names: [snapshotID] });
    }
    if (route === "GET /snapshots") {
      const name = url.searchParams.get("name");
      const sid = url.searchParams.get("sandboxID");
      const rows = [...snapshots.values()].filter(
        (x) =>
          x.team === team &&
          (!sid || x.sourceSandboxID === sid) &&
          (!name || x.snapshotID === name || x.names.some((n) => n === name || n.split(":")[0] === name)),
      );
      return send(
        res,
        200,
        rows.map((x) => ({ snapshotID: x.snapshotID, names: x.names })),
      );
    }
    if (route === "DELETE /templates/:id") {
      const id = decodeURIComponent(parts[1] ?? "");
      const snap = snapshots.get(id);
      if (!snap || snap.team !== team) return send(res, 404, { code: 404, message: `template '${id}' not found` });
      snapshots.delete(id);
      await docker
        .getImage(snap.image)
        .remove({ force: true })
        .catch(() => undefined);
      return send(res, 204);
    }
    return send(res, 404, { code: 404, message: `no route ${route}` });
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://emulator");
    const sandboxId = req.headers["e2b-sandbox-id"];
    const work = async () => {
      if (typeof sandboxId === "string") {
        const s = sandboxes.get(sandboxId);
        // What E2B's edge answers for a sandbox it cannot reach: 502.
        if (!s || s.state !== "running") return send(res, 502, { code: 502, message: `sandbox ${sandboxId} is not running` });
        return s.envd.handle(req, res, url);
      }
      const key = req.headers["x-api-key"];
      if (typeof key !== "string" || !key) return send(res, 401, { code: 401, message: "missing X-API-KEY" });
      return control(req, res, url, key);
    };
    work().catch((e: unknown) => {
      if (!res.headersSent) send(res, 500, { code: 500, message: String((e as Error)?.message ?? e).slice(0, 500) });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    faults,
    transfers,
    calls,
    sandboxes: (team) =>
      [...sandboxes.values()]
        .filter((s) => !team || s.team === team)
        .map((s) => ({ sandboxID: s.sandboxID, state: s.state, metadata: s.metadata, containerId: s.container.id })),
    async vanish(sandboxId) {
      const s = sandboxes.get(sandboxId);
      if (s) await kill(s);
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.all([...sandboxes.values()].map(kill));
      await Promise.all(
        [...snapshots.values()].map((x) =>
          docker
            .getImage(x.image)
            .remove({ force: true })
            .catch(() => undefined),
        ),
      );
    },
  };
}

function send(res: ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    res.writeHead(status).end();
    return;
  }
  const json = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(json) }).end(json);
}

function parseJson(b: Buffer): Record<string, unknown> {
  if (b.length === 0) return {};
  const v: unknown = JSON.parse(b.toString("utf8"));
  return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

function isStringMap(v: unknown): v is Record<string, string> {
  return !!v && typeof v === "object" && !Array.isArray(v) && Object.values(v).every((x) => typeof x === "string");
}

function clampTimeout(v: unknown): number {
  const n = Number(v);
  return Number.isFinite(n) && n > 0 ? Math.min(Math.ceil(n), MAX_TIMEOUT_SEC) : 300;
}

/** The list filter is double-encoded: `metadata=<urlencoded "k=v&k2=v2">`, each key and value encoded again. */
function metadataQuery(url: URL): Record<string, string> {
  const raw = url.searchParams.get("metadata");
  if (!raw) return {};
  const out: Record<string, string> = {};
  for (const [k, v] of new URLSearchParams(raw)) out[decodeURIComponent(k)] = decodeURIComponent(v);
  return out;
}

function createdHash(team: string): string {
  let h = 0;
  for (const ch of team) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return h.toString(16);
}

/**
 * `docker pause`, tried again when the engine's cgroup freezer gives up ("unable to freeze", seen on
 * cgroup v1 at high load): a hiccup of this machine's engine, not a behaviour of the service emulated.
 */
async function freeze(container: { pause(): Promise<unknown> }): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await container.pause();
      return;
    } catch (e) {
      if (attempt >= 5 || !/unable to freeze/i.test(String((e as Error)?.message ?? e))) throw e;
      await new Promise((r) => setTimeout(r, 200 * attempt));
    }
  }
}
