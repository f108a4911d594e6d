import { spawnSync } from "node:child_process";
import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type Running } from "./service-fixture.js";

// The OpenAPI document as clients nobody here wrote see it: linted by Redocly's recommended rules,
// and turned into a typed client (openapi-typescript + openapi-fetch) that makes the README's calls.

const ROOT = path.resolve(import.meta.dirname, "../..");
const require = createRequire(import.meta.url);

let svc: Running;
let doc: {
  paths: Record<string, Record<string, { operationId?: string; summary?: string; responses: Record<string, { content?: Record<string, unknown> }> }>>;
};
let dir: string;

beforeAll(async () => {
  svc = await startTestService({ users: ["alice"] });
  const res = await fetch(`${svc.url}/openapi.json`);
  expect(res.status).toBe(200);
  doc = (await res.json()) as typeof doc;
  dir = await mkdtemp(path.join(tmpdir(), "openapi-client-"));
  // The generated client resolves openapi-fetch (and @types/node) from the repository's packages.
  await symlink(path.join(ROOT, "node_modules"), path.join(dir, "node_modules"), "dir");
  await writeFile(path.join(dir, "package.json"), JSON.stringify({ type: "module" }));
});

afterAll(async () => {
  await svc?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("the OpenAPI document", () => {
  it("passes `redocly lint` with the recommended rules (redocly.yaml): no error, no warning", async () => {
    const file = path.join(dir, "openapi.json");
    await writeFile(file, JSON.stringify(doc));
    // The devDependency's own entry point: nothing is downloaded, no telemetry or update check is sent.
    const cli = path.join(path.dirname(require.resolve("@redocly/cli/package.json")), "bin/cli.js");
    const env = { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", REDOCLY_SUPPRESS_NOTIFICATIONS: "true" };
    const run = spawnSync(process.execPath, [cli, "lint", file, "--config", path.join(ROOT, "redocly.yaml"), "--format", "json"], {
      cwd: ROOT,
      env,
      encoding: "utf8",
      timeout: 120_000,
    });
    const report = JSON.parse(run.stdout) as {
      totals: { errors: number; warnings: number };
      problems: Array<{ ruleId: string; message: string; location: Array<{ pointer: string }> }>;
    };
    const problems = report.problems.map((p) => `${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`);
    expect(problems).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
    expect(run.status).toBe(0);
  });

  it("names and summarises every operation, and every /sessions operation describes its 400 and 401 as problem+json", () => {
    const ids = new Set<string>();
    for (const [p, item] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(item)) {
        expect(op.operationId, `${method} ${p}`).toMatch(/^[a-z][A-Za-z]+$/);
        expect(ids.has(op.operationId!), op.operationId).toBe(false);
        ids.add(op.operationId!);
        expect(op.summary, `${method} ${p}`).toBeTruthy();
        if (p.startsWith("/sessions"))
          for (const status of ["400", "401"])
            expect(Object.keys(op.responses[status]?.content ?? {}), `${method} ${p} ${status}`).toContain("application/problem+json");
      }
    expect([...ids]).toEqual(
      expect.arrayContaining(["createSession", "listSessions", "getSession", "updateSession", "deleteSession", "uploadSkill", "readFile", "sendMcpMessage"]),
    );
    const upload = doc.paths["/sessions/{sessionId}/workspace/skills"]!.post as unknown as {
      requestBody: { content: Record<string, unknown> };
      responses: Record<string, unknown>;
    };
    expect(Object.keys(upload.requestBody.content)).toEqual(["multipart/form-data"]);
    expect(Object.keys(upload.responses)).toEqual(expect.arrayContaining(["413", "502", "503"]));
    expect(Object.keys(doc.paths["/sessions"]!.post!.responses)).toEqual(expect.arrayContaining(["409", "413", "415", "502"]));
  });
});

describe("a client generated from it (openapi-typescript + openapi-fetch)", () => {
  let generated: string;

  beforeAll(async () => {
    // Binary parts and bodies are Blobs in the client (openapi-typescript's documented transform).
    const blob = ts.factory.createTypeReferenceNode("Blob");
    const ast = await openapiTS(doc as never, { transform: (schema) => (schema.format === "binary" ? blob : undefined) });
    generated = path.join(dir, "api.d.ts");
    await writeFile(generated, astToString(ast));
  });

  it("type-checks the README's calls, and refuses a wrong field name in a body and in a response", async () => {
    const wrong = README_CALLS.replace('agentId: "readme-agent"', 'agentID: "readme-agent"').replace("created.data.sessionId", "created.data.sessionID");
    const errors = await typeErrors({ "readme-calls.ts": README_CALLS, "wrong-calls.ts": wrong });
    expect(errors["readme-calls.ts"]).toEqual([]);
    expect(errors["wrong-calls.ts"]!.some((e) => e.includes("'agentID'"))).toBe(true);
    expect(errors["wrong-calls.ts"]!.some((e) => e.includes("'sessionID'"))).toBe(true);
  }, 180_000); // a cold tsc program over openapi-fetch and @types/node on a shared 2-core machine

  it("makes every call the README shows against the running service", async () => {
    const js = ts.transpileModule(README_CALLS, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
    const file = path.join(dir, "readme-calls.mjs");
    await writeFile(file, js);
    const { readmeCalls } = (await import(pathToFileURL(file).href)) as {
      readmeCalls: (url: string, token: string, echo: string) => Promise<Record<string, unknown>>;
    };
    const seen = await readmeCalls(svc.url, svc.tokens.alice!, path.join(ROOT, "test/fixtures/mcp/echo-server.mjs"));
    expect(seen).toMatchObject({
      created: { agentId: "readme-agent", name: "tour" },
      listed: 1,
      got: "tour",
      patched: "renamed",
      mcpAdded: 201,
      mcpTools: expect.arrayContaining(["mcp__echo__echo"]),
      mcpRemoved: 204,
      skillUploaded: { name: "notes", dir: expect.stringContaining("notes") },
      skills: ["notes"],
      skillRemoved: 204,
      offloaded: expect.stringMatching(/tool_result-call-1\.txt$/),
      contextOffloaded: expect.stringMatching(/context\.jsonl$/),
      listing: expect.arrayContaining(["tool_result-call-1.txt"]),
      read: "a large tool result",
      readWithToken: "a large tool result",
      status: { backend: "local", state: "running" },
      endpointTools: expect.arrayContaining(["Bash", "Read", "Skill", "mcp__echo__echo"]),
      endpointSkill: expect.stringContaining("# Notes"),
      health: true,
      metrics: true,
      document: "3.1.0",
      missing: { status: 404, title: "not_found" },
      deleted: 204,
      gone: 404,
    });
  });

  /** tsc on programs beside the generated types (strict, as the repository's own code): the errors of each file. */
  async function typeErrors(sources: Record<string, string>): Promise<Record<string, string[]>> {
    const out: Record<string, string[]> = {};
    for (const [name, source] of Object.entries(sources)) {
      await writeFile(path.join(dir, name), source);
      out[name] = [];
    }
    const program = ts.createProgram(
      Object.keys(sources).map((name) => path.join(dir, name)),
      {
        strict: true,
        noEmit: true,
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        lib: ["lib.es2023.d.ts"],
        types: ["node"],
        skipLibCheck: true,
      },
    );
    for (const d of ts.getPreEmitDiagnostics(program)) {
      const name = d.file ? path.basename(d.file.fileName) : "";
      (out[name] ??= []).push(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
    }
    return out;
  }
});

/** The client program: the README's service calls, through openapi-fetch typed by the generated `paths`. */
const README_CALLS = `
import createClient from "openapi-fetch";
import type { paths } from "./api.js";

const SKILL = "---\\nname: notes\\ndescription: Takes notes.\\n---\\n\\n# Notes\\nWrite them down.\\n";

function ok<T>(r: { data?: T; error?: unknown; response: Response }, what: string): T {
  if (r.data === undefined) throw new Error(\`\${what}: \${r.response.status} \${JSON.stringify(r.error)}\`);
  return r.data;
}

export async function readmeCalls(baseUrl: string, token: string, echoServer: string): Promise<Record<string, unknown>> {
  const client = createClient<paths>({ baseUrl, headers: { authorization: \`Bearer \${token}\` } });
  const seen: Record<string, unknown> = {};

  const created = await client.POST("/sessions", { body: { agentId: "readme-agent", name: "tour" } });
  if (!created.data) throw new Error(\`createSession: \${JSON.stringify(created.error)}\`);
  const sessionId: string = created.data.sessionId;
  seen.created = created.data;
  const path = { sessionId };

  seen.listed = ok(await client.GET("/sessions", { params: { query: { agentId: "readme-agent", limit: 10, offset: 0 } } }), "listSessions").total;
  seen.got = ok(await client.GET("/sessions/{sessionId}", { params: { path } }), "getSession").name;
  seen.patched = ok(await client.PATCH("/sessions/{sessionId}", { params: { path }, body: { name: "renamed" } }), "updateSession").name;

  const added = await client.POST("/sessions/{sessionId}/workspace/mcp", {
    params: { path },
    body: { name: "echo", transport: { type: "stdio", command: process.execPath, args: [echoServer] } },
  });
  seen.mcpAdded = added.response.status;
  const servers = ok(await client.GET("/sessions/{sessionId}/workspace/mcp", { params: { path } }), "listMcpServers");
  seen.mcpTools = servers.flatMap((s) => s.tools.map((t) => t.name));

  const manifest = JSON.stringify({ entries: [{ path: "notes/SKILL.md", size: SKILL.length }] });
  const uploaded = await client.POST("/sessions/{sessionId}/workspace/skills", {
    params: { path },
    body: { manifest, files: [new Blob([SKILL])] },
    bodySerializer(body) {
      const form = new FormData();
      if ("manifest" in body) {
        form.append("manifest", body.manifest);
        body.files.forEach((f, i) => form.append("files", f, \`part-\${i}\`));
      } else form.append("archive", body.archive, "skill.zip");
      return form;
    },
  });
  seen.skillUploaded = ok(uploaded, "uploadSkill");
  seen.skills = ok(await client.GET("/sessions/{sessionId}/workspace/skills", { params: { path } }), "listSkills").map((s) => s.name);

  const offloaded = ok(await client.POST("/sessions/{sessionId}/workspace/offload/tool-result", { params: { path }, body: { id: "call-1", output: "a large tool result" } }), "offloadToolResult");
  seen.offloaded = offloaded.path;
  seen.contextOffloaded = ok(
    await client.POST("/sessions/{sessionId}/workspace/offload/context", { params: { path }, body: { messages: [{ role: "user", content: "earlier turns" }] } }),
    "offloadContext",
  ).path;
  // The file as a workspace-relative path (the offload answer may be absolute under the workspace root).
  const file = offloaded.path.slice(offloaded.path.lastIndexOf(\`sessions/\${sessionId}/\`));
  const folder = file.slice(0, file.lastIndexOf("/"));
  const listing = ok(await client.GET("/sessions/{sessionId}/workspace/directories", { params: { path, query: { path: folder, limit: 100 } } }), "listDirectory");
  seen.listing = listing.entries.map((e) => e.name);
  seen.read = ok(await client.GET("/sessions/{sessionId}/workspace/files", { params: { path, query: { path: file } }, parseAs: "text" }), "readFile");

  const link = ok(await client.POST("/sessions/{sessionId}/workspace/files/download-token", { params: { path }, body: { path: file } }), "createDownloadToken");
  const anonymous = createClient<paths>({ baseUrl });
  seen.readWithToken = ok(
    await anonymous.GET("/sessions/{sessionId}/workspace/files", { params: { path, query: { path: file, download: "true", token: link.token } }, parseAs: "text" }),
    "readFile (download token)",
  );

  const status = ok(await client.GET("/sessions/{sessionId}/workspace/status", { params: { path } }), "getWorkspaceStatus");
  seen.status = { backend: status.backend, state: status.state };

  const accept = { accept: "application/json, text/event-stream" };
  const tools = ok(await client.POST("/sessions/{sessionId}/mcp", { params: { path }, headers: accept, body: { jsonrpc: "2.0", id: 1, method: "tools/list" } }), "sendMcpMessage");
  seen.endpointTools = ((tools.result?.tools ?? []) as Array<{ name: string }>).map((t) => t.name);
  const skill = ok(
    await client.POST("/sessions/{sessionId}/mcp", { params: { path }, headers: accept, body: { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "Skill", arguments: { name: "notes" } } } }),
    "sendMcpMessage",
  );
  seen.endpointSkill = ((skill.result?.content ?? []) as Array<{ text?: string }>).map((c) => c.text ?? "").join("");

  seen.mcpRemoved = (await client.DELETE("/sessions/{sessionId}/workspace/mcp/{name}", { params: { path: { sessionId, name: "echo" } } })).response.status;
  seen.skillRemoved = (await client.DELETE("/sessions/{sessionId}/workspace/skills/{name}", { params: { path: { sessionId, name: "notes" } } })).response.status;

  seen.health = ok(await anonymous.GET("/healthz"), "getHealth").ok;
  seen.metrics = ok(await anonymous.GET("/metrics", { parseAs: "text" }), "getMetrics").includes("agentws_");
  seen.document = ok(await anonymous.GET("/openapi.json"), "getOpenApiDocument").openapi;

  const missing = await client.GET("/sessions/{sessionId}", { params: { path: { sessionId: "no-such-session" } } });
  seen.missing = { status: missing.error?.status, title: missing.error?.title };

  seen.deleted = (await client.DELETE("/sessions/{sessionId}", { params: { path } })).response.status;
  seen.gone = (await client.GET("/sessions/{sessionId}", { params: { path } })).response.status;
  return seen;
}
`;
