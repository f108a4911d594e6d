import { InvalidArgumentError } from "../../errors.js";
import type { Workspace } from "../../workspace/workspace.js";
import type { Message } from "../../workspace/offload.js";

/** Tool results over this many tokens are cut (reference `ContextConfig.tool_result_limit`). */
export const DEFAULT_TOOL_RESULT_LIMIT = 50_000;

/** The reference's default token estimate: serialized UTF-8 bytes / 4. */
export function estimateTokens(text: string): number {
  return Buffer.byteLength(text, "utf8") / 4;
}

export function truncationReminder(path: string | undefined): string {
  const refer = path === undefined ? "" : ` You can refer to the file in '${path}' for the truncated content if needed.`;
  return `\n<<<TRUNCATED>>>\n<system-reminder>The remaining content has been omitted for limited context.${refer}</system-reminder>`;
}

export function compressionReminder(path: string): string {
  return `<system-reminder>The compressed context is offloaded to '${path}', you can refer to it when needed.</system-reminder>`;
}

/**
 * A tool result over the limit keeps its head (characters ≈ limit / tokens × length, as the
 * reference cuts a boundary text block) and the rest goes to `offloadToolResult`. The head and the
 * rest are slices of the one result string (V8 shares the characters), so a 100 MiB result is
 * never held twice by the adapter.
 */
export async function offloadIfLarge(
  workspace: Workspace,
  sessionId: string,
  call: { id: string; name: string },
  text: string,
  limit: number,
): Promise<string> {
  const tokens = estimateTokens(text);
  if (!(tokens > limit)) return text;
  let keep = Math.floor((limit / tokens) * text.length);
  // Never split a surrogate pair: the file and the head must both be valid UTF-16.
  if (keep > 0 && isHighSurrogate(text.charCodeAt(keep - 1))) keep--;
  const head = text.slice(0, keep);
  try {
    const path = await workspace.offloadToolResult(sessionId, { id: call.id, name: call.name, output: text.slice(keep) });
    return head + truncationReminder(path);
  } catch {
    // The model still gets a bounded result; it is told the rest is gone rather than where it is.
    return head + truncationReminder(undefined);
  }
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

export interface CompressionOptions {
  /** The model's context size in tokens. */
  contextTokens: number;
  /** Compress when the context is over this share of `contextTokens` (default 0.8, allowed (0, 0.9]). */
  triggerRatio?: number;
  /** Recent messages up to this share of `contextTokens` stay verbatim (default 0.1). */
  reserveRatio?: number;
  /** Writes the summary of the compressed messages (e.g. with a model). Default: a one-line note. */
  summarize?: (messages: Message[], previousSummary: string | undefined) => Promise<string> | string;
}

/** How a framework's message list is read and rebuilt; `M` is its message type. */
export interface MessageCodec<M> {
  toReference(message: M): Message;
  /** The summary as a message of the framework. */
  summary(text: string): M;
  /** Messages that must stay before the summary (system prompts). */
  isPinned(message: M): boolean;
  /** A message that cannot start the kept tail (a tool result without its call). */
  needsPrevious(message: M): boolean;
}

/**
 * Context compression across steps. Frameworks hand the full history to every step, so the state
 * (how many leading messages are compressed, the summary) is kept here and each message is
 * offloaded to `context.jsonl` exactly once.
 */
export class ContextCompressor<M> {
  readonly #workspace: Workspace;
  readonly #sessionId: string;
  readonly #codec: MessageCodec<M>;
  readonly #trigger: number;
  readonly #reserve: number;
  readonly #summarize: NonNullable<CompressionOptions["summarize"]>;
  #cut = 0;
  #summary: M | undefined;
  #summaryText: string | undefined;

  constructor(workspace: Workspace, sessionId: string, codec: MessageCodec<M>, options: CompressionOptions) {
    const trigger = options.triggerRatio ?? 0.8;
    if (!(trigger > 0 && trigger <= 0.9)) throw new InvalidArgumentError("must be in (0, 0.9]", { field: "compression.triggerRatio" });
    if (!(options.contextTokens > 0)) throw new InvalidArgumentError("must be a positive number", { field: "compression.contextTokens" });
    this.#workspace = workspace;
    this.#sessionId = sessionId;
    this.#codec = codec;
    this.#trigger = trigger * options.contextTokens;
    this.#reserve = (options.reserveRatio ?? 0.1) * options.contextTokens;
    this.#summarize = options.summarize ?? ((msgs) => `The earlier conversation (${msgs.length} messages) was compressed.`);
  }

  /** The messages to send this step: compressed when over the trigger. */
  async apply(messages: M[]): Promise<M[]> {
    const pinned = countPinned(messages, this.#codec);
    if (this.#cut > messages.length) this.#reset();
    const start = Math.max(pinned, this.#cut);
    const view = () => [...messages.slice(0, pinned), ...(this.#summary ? [this.#summary] : []), ...messages.slice(Math.max(pinned, this.#cut))];
    const current = view();
    if (tokensOf(current, this.#codec) <= this.#trigger) return current;
    let cut = messages.length - 1;
    let tail = tokensOf([messages[cut]!], this.#codec);
    while (cut - 1 > start && tail + tokensOf([messages[cut - 1]!], this.#codec) <= this.#reserve) tail += tokensOf([messages[--cut]!], this.#codec);
    while (cut > start && this.#codec.needsPrevious(messages[cut]!)) cut--;
    if (cut <= start) return current;
    const compressed = messages.slice(start, cut).map((m) => this.#codec.toReference(m));
    const path = await this.#workspace.offloadContext(this.#sessionId, compressed);
    const text = await this.#summarize(compressed, this.#summaryText);
    this.#summaryText = text;
    this.#summary = this.#codec.summary(`${text}\n${compressionReminder(path)}`);
    this.#cut = cut;
    return view();
  }

  #reset(): void {
    this.#cut = 0;
    this.#summary = undefined;
    this.#summaryText = undefined;
  }
}

function countPinned<M>(messages: M[], codec: MessageCodec<M>): number {
  let n = 0;
  while (n < messages.length && codec.isPinned(messages[n]!)) n++;
  return n;
}

function tokensOf<M>(messages: M[], codec: MessageCodec<M>): number {
  let total = 0;
  for (const m of messages) total += estimateTokens(JSON.stringify(codec.toReference(m)));
  return total;
}
