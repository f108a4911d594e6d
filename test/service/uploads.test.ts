/**
 * Issue 26 item 5: skill uploads are streamed to disk, counted as they arrive, and bounded in
 * number; their temp files go in every outcome.
 *
 * The memory bound: the service runs in a child process (service.child.ts) whose peak resident
 * memory (VmHWM, reset after a warm-up upload) is read from /proc while four 450 MiB tar uploads
 * run at once. Streaming holds well under 1 MiB per upload in flight (64 KiB stream buffers); the
 * rest of the bound is the collector's slack over the child's idle ~100 MiB. Buffering even one
 * upload whole (what main did: about 1.5 GB per 450 MiB upload) breaks it several times over.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { promises as fs, readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type Running } from "./service-fixture.js";
import { filler, multipart, skillMd, skillTar, webStream, type Part } from "./upload-streams.js";

const MiB = 1 << 20;
const CHILD = fileURLToPath(new URL("./service.child.ts", import.meta.url));
/** Peak RSS growth allowed over the warmed-up child while four 450 MiB uploads run. */
const MAX_RSS_GROWTH = 100 * MiB;
const UPLOAD_BYTES = 450 * MiB;

function procStatus(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : 0;
}

/** Our temp files: upload spools and archive work folders. */
async function leftovers(tmp: string): Promise<string[]> {
  return (await fs.readdir(tmp)).filter((n) => n.startsWith("agentws-upload-") || n.startsWith("agentws-skill-"));
}

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`gave up waiting for ${what}`);
}

async function upload(url: string, token: string, sessionId: string, parts: Part[]): Promise<Response> {
  const { contentType, body } = multipart(parts);
  return fetch(`${url}/sessions/${sessionId}/workspace/skills`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": contentType },
    body: webStream(body),
    duplex: "half",
  } as RequestInit);
}

/** A raw upload over node:http, so a test can stop mid-body or read an early answer while still sending. */
function rawUpload(url: string, token: string, sessionId: string, contentType: string, headers: Record<string, string> = {}) {
  const req = http.request(`${url}/sessions/${sessionId}/workspace/skills`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": contentType, ...headers },
  });
  const answer = new Promise<{ status: number; body: string }>((ok, fail) => {
    req.on("response", (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => ok({ status: res.statusCode ?? 0, body }));
      res.on("error", fail);
    });
    req.on("error", fail);
  });
  return { req, answer };
}

describe("skill uploads in a service process: four parallel 450 MiB uploads", () => {
  let dir: string;
  let child: ChildProcess;
  let svc: { url: string; token: string; basedir: string };
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "agentws-uploads-"));
    await fs.mkdir(path.join(dir, "tmp"));
    child = spawn(process.execPath, ["--import", "tsx", CHILD, dir], {
      stdio: ["ignore", "pipe", "inherit"],
      env: { ...process.env, TMPDIR: path.join(dir, "tmp") },
    });
    const [line] = (await once(child.stdout!, "data")) as [Buffer];
    svc = JSON.parse(line.toString()) as typeof svc;
  });
  afterAll(async () => {
    if (child.exitCode === null) {
      child.kill("SIGTERM");
      await once(child, "exit");
    }
    await fs.rm(dir, { recursive: true, force: true });
  });

  it(`installs all four with peak RSS growth under ${MAX_RSS_GROWTH / MiB} MiB, and leaves no temp file`, { timeout: 300_000 }, async () => {
    const created = await fetch(`${svc.url}/sessions`, {
      method: "POST",
      headers: { authorization: `Bearer ${svc.token}`, "content-type": "application/json" },
      body: JSON.stringify({ agentId: "up" }),
    });
    expect(created.status).toBe(201);
    const { sessionId, workspaceId } = (await created.json()) as { sessionId: string; workspaceId: string };
    // Warm-up: every module of the upload path loaded, then the peak reset.
    expect((await upload(svc.url, svc.token, sessionId, [{ name: "archive", filename: "warm.tar", body: skillTar("warm", 3 * MiB) }])).status).toBe(201);
    const pid = child.pid!;
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
    const before = procStatus(pid, "VmRSS");
    expect(procStatus(pid, "VmHWM")).toBeLessThan(before + 8 * MiB);

    const started = performance.now();
    const folders = ["one", "two", "three", "four"];
    const answers = await Promise.all(
      folders.map((f) => upload(svc.url, svc.token, sessionId, [{ name: "archive", filename: `${f}.tar`, body: skillTar(f, UPLOAD_BYTES) }])),
    );
    const seconds = (performance.now() - started) / 1000;
    const peak = procStatus(pid, "VmHWM");
    console.log(
      `[uploads] 4 x ${UPLOAD_BYTES / MiB} MiB in ${seconds.toFixed(1)} s; service RSS ${(before / MiB).toFixed(0)} MiB before, peak ${(peak / MiB).toFixed(0)} MiB (growth bound ${MAX_RSS_GROWTH / MiB} MiB)`,
    );

    for (const [i, r] of answers.entries())
      expect({ status: r.status, body: (await r.json()) as unknown }).toMatchObject({ status: 201, body: { name: folders[i] } });
    for (const f of folders) expect((await fs.stat(path.join(svc.basedir, workspaceId, "skills", "up", f, "big.bin"))).size).toBe(UPLOAD_BYTES);
    expect(peak - before).toBeLessThan(MAX_RSS_GROWTH);
    expect(await leftovers(path.join(dir, "tmp"))).toEqual([]);
  });
});

describe("skill uploads: limits while streaming, the number read at once, temp files in every outcome", () => {
  let svc: Running;
  let tmp: string;
  let sessionId: string;
  const savedTmp = process.env.TMPDIR;
  beforeAll(async () => {
    svc = await startTestService({ limits: { maxUploadBytes: 4 * MiB, maxUploadFileBytes: 2 * MiB, maxConcurrentUploads: 1 } });
    // The service runs in this process: its temp files go where os.tmpdir() points from now on.
    tmp = await fs.mkdtemp(path.join(svc.root, "tmp-"));
    process.env.TMPDIR = tmp;
    sessionId = ((await (await svc.call("alice", "POST", "/sessions", { agentId: "up" })).json()) as { sessionId: string }).sessionId;
  });
  afterAll(async () => {
    if (savedTmp === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = savedTmp;
    await svc.close();
  });

  it("answers 413 once a chunked body passes the limit, without waiting for the rest", { timeout: 60_000 }, async () => {
    const { contentType, body } = multipart([{ name: "archive", filename: "big.tar", body: skillTar("big", 200 * MiB) }]);
    const { req, answer } = rawUpload(svc.url, svc.tokens.alice!, sessionId, contentType);
    let sent = 0;
    let answered = false;
    void answer.then(
      () => (answered = true),
      () => (answered = true),
    );
    // Send until the answer comes (or the server stops reading): a 200 MiB body is never sent whole.
    for await (const chunk of body) {
      if (answered || req.destroyed) break;
      sent += chunk.length;
      if (!req.write(chunk)) await Promise.race([once(req, "drain"), answer.catch(() => undefined)]);
    }
    const r = await answer;
    req.destroy();
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body)).toMatchObject({ title: "too_large" });
    expect(sent).toBeLessThan(150 * MiB);
    await until("temp files removed", async () => (await leftovers(tmp)).length === 0);
  });

  it("answers 413 for an announced Content-Length over the limit before reading the body", async () => {
    const { req, answer } = rawUpload(svc.url, svc.tokens.alice!, sessionId, "multipart/form-data; boundary=x", { "content-length": String(900 * MiB) });
    req.write("--x\r\n");
    const r = await answer;
    req.destroy();
    expect(r.status).toBe(413);
    expect(await leftovers(tmp)).toEqual([]);
  });

  it("refuses a files part over the per-file limit and an unexpected file part, and removes what it had stored", async () => {
    const manifest = JSON.stringify({
      entries: [
        { path: "s/SKILL.md", size: 10 },
        { path: "s/big.bin", size: 3 * MiB },
      ],
    });
    const over = await upload(svc.url, svc.tokens.alice!, sessionId, [
      { name: "manifest", body: manifest },
      { name: "files", filename: "SKILL.md", body: "0123456789" },
      { name: "files", filename: "big.bin", body: filler(3 * MiB) },
    ]);
    expect(over.status).toBe(413);
    expect(await over.json()).toMatchObject({ title: "too_large", detail: expect.stringMatching(/'files' part is over the limit of 2097152/) });
    const odd = await upload(svc.url, svc.tokens.alice!, sessionId, [{ name: "payload", filename: "x.bin", body: filler(MiB) }]);
    expect(odd.status).toBe(400);
    expect(await odd.json()).toMatchObject({ field: "body", detail: expect.stringMatching(/unexpected file part/) });
    await until("temp files removed", async () => (await leftovers(tmp)).length === 0);
  });

  it("installs a folder upload streamed from disk, keeps the folder name, and removes its temp files", async () => {
    const md = skillMd("notes");
    const manifest = JSON.stringify({
      entries: [
        { path: "my-notes/SKILL.md", size: md.length },
        { path: "my-notes/data.bin", size: MiB + 7 },
      ],
    });
    const r = await upload(svc.url, svc.tokens.alice!, sessionId, [
      { name: "manifest", body: manifest },
      { name: "files", filename: "SKILL.md", body: md },
      { name: "files", filename: "data.bin", body: filler(MiB + 7) },
    ]);
    expect(r.status).toBe(201);
    expect(await r.json()).toMatchObject({ name: "notes", dir: "skills/up/my-notes" });
    expect(await leftovers(tmp)).toEqual([]);
  });

  it("reads one body at a time (maxConcurrentUploads 1), and removes the temp files of a client that went away", { timeout: 60_000 }, async () => {
    const first = multipart([{ name: "archive", filename: "a.tar", body: skillTar("first", 3 * MiB) }]);
    const a = rawUpload(svc.url, svc.tokens.alice!, sessionId, first.contentType);
    void a.answer.catch(() => undefined);
    // Half of the first upload: its body is being spooled.
    let sent = 0;
    for await (const chunk of first.body) {
      a.req.write(chunk);
      if ((sent += chunk.length) >= MiB) break;
    }
    await until("the first upload's spool folder", async () => (await leftovers(tmp)).length === 1);
    // A second upload waits unread while the first holds the only slot: still one spool folder.
    const second = upload(svc.url, svc.tokens.alice!, sessionId, [{ name: "archive", filename: "b.tar", body: skillTar("second", MiB) }]);
    await new Promise((r) => setTimeout(r, 300));
    expect(await leftovers(tmp)).toHaveLength(1);
    // The first client goes away mid-body: its spool is removed and the second upload proceeds.
    a.req.destroy();
    const r = await second;
    expect(r.status).toBe(201);
    expect(await r.json()).toMatchObject({ name: "second" });
    await until("temp files removed", async () => (await leftovers(tmp)).length === 0);
    const names = ((await (await svc.call("alice", "GET", `/sessions/${sessionId}/workspace/skills`)).json()) as Array<{ name: string }>).map((s) => s.name);
    expect(names).not.toContain("first");
  });

  it("frees the slot of an upload whose client went away while it waited for its turn", { timeout: 60_000 }, async () => {
    const partial = (folder: string) => {
      const { contentType, body } = multipart([{ name: "archive", filename: `${folder}.tar`, body: skillTar(folder, 3 * MiB) }]);
      const up = rawUpload(svc.url, svc.tokens.alice!, sessionId, contentType);
      void up.answer.catch(() => undefined);
      return { up, body };
    };
    const holder = partial("holder");
    await holder.body.next().then((c) => holder.up.req.write(c.value));
    await until("the holder's spool folder", async () => (await leftovers(tmp)).length === 1);
    const waiter = partial("waiter");
    await waiter.body.next().then((c) => waiter.up.req.write(c.value));
    await new Promise((r) => setTimeout(r, 200));
    waiter.up.req.destroy();
    await new Promise((r) => setTimeout(r, 200));
    holder.up.req.destroy();
    // Both gone: the slot is free again and a new upload is read and installed.
    const r = await upload(svc.url, svc.tokens.alice!, sessionId, [{ name: "archive", filename: "after.tar", body: skillTar("after", MiB) }]);
    expect(r.status).toBe(201);
    await until("temp files removed", async () => (await leftovers(tmp)).length === 0);
  });
});
