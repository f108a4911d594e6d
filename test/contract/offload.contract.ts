import { describe, expect, it } from "vitest";
import type { DataBlock, Message } from "../../sdk/workspace/offload.js";
import { useWorkspaces, type WorkspaceFixture } from "./fixture.js";
import { exists, expectCode, names, readText } from "./helpers.js";

/** Reference test vector: sha256("AAECAwQF"). */
const PNG_HASH = "131afd4cbe2f7ea4295563cbbde7bdb6120d5fd74dcec8827de0fbe23c9eb04d";
const PNG_URL = `workspace:///data/${PNG_HASH}.png`;

const pngBlock = (): DataBlock => ({
  type: "data",
  id: "d1",
  source: { type: "base64", data: "AAECAwQF", media_type: "image/png" },
  name: "pic.png",
  created_at: "2025-01-01T00:00:00.000Z",
  finished_at: null,
});

export function offloadContract(fixture: WorkspaceFixture): void {
  describe(`${fixture.name}: offload`, () => {
    const { open } = useWorkspaces(fixture);

    describe("offloadContext", () => {
      it("appends one compact JSON line per message in the reference's key order, moving base64 data to data/", async () => {
        const ws = await open();
        // Keys deliberately scrambled: the line must come out in the reference's order.
        const message = {
          error: null,
          role: "user",
          content: [{ finished_at: null, created_at: "2025-01-01T00:00:00.000Z", id: "t1", text: 'héllo "quoted"\n', type: "text" }, pngBlock()],
          name: "user",
          structured_output: null,
          id: "m1",
          metadata: { k: "v" },
          created_at: "2025-01-01T00:00:00.000Z",
          finished_reason: null,
          usage: null,
          finished_at: null,
        } as unknown as Message;
        const input = structuredClone(message);
        const p = await ws.offloadContext("s1", [message, { name: "bot", content: "plain", role: "assistant" }]);
        expect(p).toBe(`${ws.workdir}/sessions/s1/context.jsonl`);
        expect(message).toEqual(input);

        const text = await readText(ws, "sessions/s1/context.jsonl");
        const lines = text.split("\n");
        expect(lines).toHaveLength(3);
        expect(lines[2]).toBe("");
        const createdAt = (JSON.parse(lines[0]!) as { content: Array<{ created_at: string }> }).content[1]!.created_at;
        expect(lines[0]).toBe(
          `{"name":"user","content":[{"type":"text","text":"héllo \\"quoted\\"\\n","id":"t1","created_at":"2025-01-01T00:00:00.000Z","finished_at":null},` +
            `{"type":"data","id":"d1","source":{"type":"url","url":"${PNG_URL}","media_type":"image/png"},"name":"pic.png","created_at":"${createdAt}","finished_at":null}],` +
            `"role":"user","id":"m1","metadata":{"k":"v"},"created_at":"2025-01-01T00:00:00.000Z","usage":null,"finished_at":null,"finished_reason":null,"structured_output":null,"error":null}`,
        );
        // Fields the caller left out get the reference's defaults (Msg.model_dump_json writes every field).
        const second = JSON.parse(lines[1]!) as { id: string; created_at: string };
        expect(second.id).toMatch(/^[0-9a-f]{32}$/);
        expect(second.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$/);
        expect(lines[1]).toBe(
          `{"name":"bot","content":"plain","role":"assistant","id":"${second.id}","metadata":{},"created_at":"${second.created_at}",` +
            `"usage":null,"finished_at":null,"finished_reason":null,"structured_output":null,"error":null}`,
        );
        expect([...(await ws.getBackend().readFile(`data/${PNG_HASH}.png`))]).toEqual([0, 1, 2, 3, 4, 5]);

        expect(await ws.offloadContext("s1", [{ name: "bot", content: "again", role: "assistant" }])).toBe(p);
        expect((await readText(ws, "sessions/s1/context.jsonl")).split("\n")).toHaveLength(4);
        expect(await ws.offloadContext("s1", [])).toBe(p);
        expect((await readText(ws, "sessions/s1/context.jsonl")).split("\n")).toHaveLength(4);
      });

      it("also offloads base64 data nested in blocks such as tool results", async () => {
        const ws = await open();
        await ws.offloadContext("s2", [{ role: "user", name: "u", content: [{ type: "tool_result", id: "c1", output: [pngBlock()] }] }]);
        const line = await readText(ws, "sessions/s2/context.jsonl");
        expect(line).not.toContain("AAECAwQF");
        expect(line).toContain(PNG_URL);
      });

      it("loses no line under concurrent offloads to one session", async () => {
        const ws = await open();
        const calls = Array.from({ length: 25 }, (_, i) =>
          ws.offloadContext(
            "busy",
            [0, 1, 2].map((j) => ({ name: "n", role: "user", content: `call ${i} line ${j} ${"x".repeat(2000)}` })),
          ),
        );
        await Promise.all(calls);
        const lines = (await readText(ws, "sessions/busy/context.jsonl")).trimEnd().split("\n");
        expect(lines).toHaveLength(75);
        const seen = lines.map((l) => (JSON.parse(l) as { content: string }).content.split(" ").slice(0, 4).join(" "));
        expect(new Set(seen).size).toBe(75);
        // Each call's lines stay together, in order.
        for (let k = 0; k < 75; k += 3) {
          const call = seen[k]!.split(" ")[1];
          expect(seen.slice(k, k + 3)).toEqual([0, 1, 2].map((j) => `call ${call} line ${j}`));
        }
      });

      it("refuses bad arguments", async () => {
        const ws = await open();
        await expectCode(ws.offloadContext("", []), "invalid_argument", /sessionId/);
        await expectCode(ws.offloadContext("s", "nope" as unknown as Message[]), "invalid_argument", /messages/);
        await expectCode(ws.offloadContext("s", [null as unknown as Message]), "invalid_argument", /messages\[0\]/);
      });
    });

    describe("offloadToolResult", () => {
      it("writes flat text named after the tool call id, with (1), (2)… on collisions", async () => {
        const ws = await open();
        const first = await ws.offloadToolResult("s1", { id: "call_1", output: "line one\nline two" });
        expect(first).toBe(`${ws.workdir}/sessions/s1/tool_result-call_1.txt`);
        expect(await readText(ws, "sessions/s1/tool_result-call_1.txt")).toBe("line one\nline two");
        expect(await ws.offloadToolResult("s1", { id: "call_1", output: "second" })).toBe(`${ws.workdir}/sessions/s1/tool_result-call_1(1).txt`);
        expect(await ws.offloadToolResult("s1", { id: "call_1", output: "third" })).toBe(`${ws.workdir}/sessions/s1/tool_result-call_1(2).txt`);
        expect(await readText(ws, "sessions/s1/tool_result-call_1(2).txt")).toBe("third");
      });

      it("renders blocks: text verbatim, data as placeholders (base64 moved to data/), other blocks dropped", async () => {
        const ws = await open();
        await ws.offloadToolResult("s1", {
          id: "c2",
          output: [
            { type: "text", text: "abc" },
            pngBlock(),
            { type: "data", source: { type: "url", url: "https://example.com/y.jpg", media_type: "image/jpeg" } },
            { type: "thinking", thinking: "dropped" },
            { type: "text", text: "def" },
          ],
        });
        expect(await readText(ws, "sessions/s1/tool_result-c2.txt")).toBe(
          `abc<data url='${PNG_URL}' name='pic.png' media_type='image/png'/><data url='https://example.com/y.jpg' name='None' media_type='image/jpeg'/>def`,
        );
        expect(await exists(ws, `data/${PNG_HASH}.png`)).toBe(true);
      });

      it("gives concurrent results for one id distinct files with intact contents", async () => {
        const ws = await open();
        const bodies = Array.from({ length: 15 }, (_, i) => `result ${i} `.repeat(500));
        const paths = await Promise.all(bodies.map((output) => ws.offloadToolResult("race", { id: "same", output })));
        expect(new Set(paths).size).toBe(15);
        expect((await names(ws, "sessions/race")).sort()).toEqual(
          ["tool_result-same.txt", ...Array.from({ length: 14 }, (_, i) => `tool_result-same(${i + 1}).txt`)].sort(),
        );
        const contents = await Promise.all(paths.map((p) => readText(ws, p.slice(ws.workdir.length + 1))));
        expect(contents.sort()).toEqual([...bodies].sort());
      });

      it("sanitises session and tool-result ids so they stay one path segment", async () => {
        const ws = await open();
        const p = await ws.offloadToolResult("../../etc", { id: "a/../../b", output: "x" });
        expect(p.startsWith(`${ws.workdir}/sessions/`)).toBe(true);
        const [, , session, file] = p.slice(ws.workdir.length).split("/");
        expect(p.slice(ws.workdir.length).split("/")).toHaveLength(4);
        expect(session).toMatch(/^_\._\.\._etc-[0-9a-f]{12}$/);
        expect(file).toMatch(/^tool_result-a_\.\._\.\._b-[0-9a-f]{12}\.txt$/);
        expect(await names(ws, "sessions")).toEqual([session]);
        expect(await exists(ws, "etc")).toBe(false);
        // Safe ids are kept; different unsafe ids never share a folder.
        expect(await ws.offloadToolResult("Sess-1.a_b", { id: "ok", output: "x" })).toBe(`${ws.workdir}/sessions/Sess-1.a_b/tool_result-ok.txt`);
        const a = await ws.offloadContext("a/b", [{ role: "user", content: "1" }]);
        const b = await ws.offloadContext("a?b", [{ role: "user", content: "2" }]);
        expect(a).not.toBe(b);
        await expectCode(ws.offloadToolResult("s", { id: "", output: "x" }), "invalid_argument", /result\.id/);
      });

      it("refuses to write through a session folder that is a symlink leading out", async () => {
        const ws = await open();
        await ws.getBackend().mkdir("sessions");
        expect((await ws.getBackend().exec(["ln", "-s", "/", "sessions/evil"])).exitCode).toBe(0);
        await expectCode(ws.offloadToolResult("evil", { id: "x", output: "pwned" }), "path_escape");
        await expectCode(ws.offloadContext("evil", [{ role: "user", content: "pwned" }]), "path_escape");
        await ws.getBackend().remove("data");
        expect((await ws.getBackend().exec(["ln", "-s", "/tmp", "data"])).exitCode).toBe(0);
        await expectCode(ws.offloadData(pngBlock()), "path_escape");
      });
    });

    describe("offloadData", () => {
      it("stores base64 payloads once under data/<sha256 of the base64 text><ext> and returns a workspace:/// URL block", async () => {
        const ws = await open();
        const block = pngBlock();
        const out = await ws.offloadData(block);
        expect(out).toMatchObject({ type: "data", id: "d1", name: "pic.png", source: { type: "url", url: PNG_URL, media_type: "image/png" } });
        expect(out.created_at).not.toBe(block.created_at);
        expect(block.source.type).toBe("base64");
        const info = await ws.getBackend().stat(`data/${PNG_HASH}.png`);
        await new Promise((r) => setTimeout(r, 30));
        await ws.offloadData(pngBlock());
        expect((await ws.getBackend().stat(`data/${PNG_HASH}.png`))!.mtimeMs).toBe(info!.mtimeMs);
        const urlBlock: DataBlock = { type: "data", id: "u", source: { type: "url", url: "https://example.com/a.png", media_type: "image/png" } };
        expect(await ws.offloadData(urlBlock)).toBe(urlBlock);
      });

      it("maps media types with Python's mimetypes table and .bin for unknown ones", async () => {
        const ws = await open();
        const cases: Array<[string, string]> = [
          ["text/plain", ".txt"],
          ["image/png", ".png"],
          ["image/jpeg", ".jpg"],
          ["image/webp", ".webp"],
          ["image/gif", ".gif"],
          ["application/pdf", ".pdf"],
          ["audio/mpeg", ".mp3"],
          ["application/json", ".json"],
          ["video/mp4", ".mp4"],
          ["text/markdown", ".md"],
          ["audio/wav", ".bin"],
          ["application/x-unknown", ".bin"],
          ["text/plain; charset=utf-8", ".txt"],
        ];
        for (const [media_type, ext] of cases) {
          const data = Buffer.from(media_type).toString("base64");
          const out = await ws.offloadData({ type: "data", source: { type: "base64", data, media_type } });
          expect(out.source.type === "url" && out.source.url, media_type).toMatch(new RegExp(`^workspace:///data/[0-9a-f]{64}\\${ext}$`));
          expect(out.name).toBeNull();
          expect(out.id).toMatch(/^[0-9a-f]{32}$/);
        }
        expect((await names(ws, "data")).length).toBe(cases.length);
      });

      it("refuses malformed blocks and invalid base64", async () => {
        const ws = await open();
        await expectCode(
          ws.offloadData({ type: "data", source: { type: "base64", data: "not base64!", media_type: "image/png" } }),
          "invalid_argument",
          /base64/,
        );
        await expectCode(ws.offloadData({ type: "text" } as unknown as DataBlock), "invalid_argument", /block/);
        await expectCode(ws.offloadData({ type: "data", source: { type: "base64", data: "AAAA", media_type: "" } }), "invalid_argument", /media_type/);
      });
    });

    describe("purgeSession", () => {
      it("deletes only that session's folder", async () => {
        const ws = await open();
        await ws.offloadToolResult("keep", { id: "a", output: "x" });
        await ws.offloadToolResult("drop", { id: "a", output: "x" });
        await ws.offloadContext("we/ird", [{ role: "user", content: "x" }]);
        await ws.purgeSession({ sessionId: "drop" });
        await ws.purgeSession({ sessionId: "we/ird" });
        expect(await names(ws, "sessions")).toEqual(["keep"]);
        await ws.purgeSession({ sessionId: "never-existed" });
      });
    });
  });
}
