/**
 * An Anthropic Messages stream → a Chat Completions stream, event by event.
 *
 * message_start → the role chunk; text deltas → content chunks; a tool_use
 * block → a tool call chunk (id, name) and its input_json_delta pieces →
 * argument chunks; message_delta → the finish_reason chunk; message_stop →
 * the usage-only chunk (when the client asked for usage) and `[DONE]`.
 * Thinking and server-tool blocks have no Chat form and are skipped.
 * Per block it keeps only its kind and tool index.
 */
import { makeUsageAcc } from "../../meter/usage.js"
import { openaiStreamError } from "../errors.js"
import { makeId, nowSeconds } from "../ids.js"
import { chatFinishReason } from "../stopReasons.js"
import { chatUsage, countsOf } from "../usage.js"
import { isObject, isString, type Json } from "../wire.js"
import {
  addAnthropicUsage,
  dataEvent,
  deltaStopReason,
  DONE,
  eventJson,
  KEEPALIVE,
  SseTranslator,
} from "./base.js"

/**
 * An open content block: text, or the tool call of that Chat `index` (with the input given at its start, if
 * any).
 */
type Block =
  { readonly kind: "text" } | { readonly kind: "tool"; readonly tool: number; input: string | undefined }

/**
 * Translates one Anthropic Messages stream into a Chat Completions stream (see the module doc).
 * `model`: what the client sees; `includeUsage`: write the usage-only chunk before `[DONE]`.
 */
export class MessagesToChatStream extends SseTranslator {
  private readonly id = makeId("chatcmpl-")
  private readonly created = nowSeconds()
  private readonly usage = makeUsageAcc()
  private readonly blocks = new Map<number, Block>()
  private started = false
  private finished = false
  private tools = 0

  constructor(
    private readonly model: string,
    private readonly includeUsage: boolean,
  ) {
    super()
  }

  protected onEvent(_event: string, data: string): void {
    const event = eventJson(data)
    if (event === undefined) return
    switch (event["type"]) {
      case "message_start": {
        addAnthropicUsage(this.usage, event)
        return this.start()
      }
      case "content_block_start":
        return this.blockStart(event)
      case "content_block_delta":
        return this.blockDelta(event)
      case "content_block_stop": {
        const index = event["index"]
        if (typeof index !== "number") return
        const block = this.blocks.get(index)
        if (block?.kind === "tool" && block.input !== undefined)
          this.toolDelta(block.tool, { arguments: block.input })
        this.blocks.delete(index)
        return
      }
      case "message_delta": {
        addAnthropicUsage(this.usage, event)
        return this.finish(deltaStopReason(event))
      }
      case "ping":
        return this.write(KEEPALIVE)
      case "message_stop":
        this.finish(undefined)
        if (this.includeUsage)
          this.write(dataEvent({ ...this.head(), choices: [], usage: chatUsage(countsOf(this.usage)) }))
        this.write(DONE)
        return this.close()
      case "error": {
        const { type, message } = openaiStreamError(event)
        this.write(dataEvent({ error: { type, message, code: null } }))
        return this.close()
      }
    }
  }

  private head(): Json {
    return { id: this.id, object: "chat.completion.chunk", created: this.created, model: this.model }
  }

  private chunk(delta: Json, finishReason: string | null = null): void {
    this.write(
      dataEvent({
        ...this.head(),
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
      }),
    )
  }

  /** The role chunk, once, before anything else. */
  private start(): void {
    if (this.started) return
    this.started = true
    this.chunk({ role: "assistant", content: "" })
  }

  private text(text: unknown): void {
    if (!isString(text) || text === "") return
    this.start()
    this.chunk({ content: text })
  }

  private toolDelta(tool: number, fn: Json, id?: string): void {
    this.start()
    const call: Json =
      id === undefined ? { index: tool, function: fn } : { index: tool, id, type: "function", function: fn }
    this.chunk({ tool_calls: [call] })
  }

  private blockStart(event: Json): void {
    const index = event["index"]
    const block = event["content_block"]
    if (typeof index !== "number" || !isObject(block)) return
    if (block["type"] === "text") {
      this.blocks.set(index, { kind: "text" })
      this.text(block["text"])
    } else if (block["type"] === "tool_use" && isString(block["id"]) && isString(block["name"])) {
      const input = block["input"]
      const given = isObject(input) && Object.keys(input).length > 0 ? JSON.stringify(input) : undefined
      const tool = this.tools++
      this.blocks.set(index, { kind: "tool", tool, input: given })
      this.toolDelta(tool, { name: block["name"], arguments: "" }, block["id"])
    }
  }

  private blockDelta(event: Json): void {
    const index = event["index"]
    const delta = event["delta"]
    if (typeof index !== "number" || !isObject(delta)) return
    const block = this.blocks.get(index)
    if (block?.kind === "text" && delta["type"] === "text_delta") this.text(delta["text"])
    else if (block?.kind === "tool" && delta["type"] === "input_json_delta") {
      const piece = delta["partial_json"]
      // Pieces replace an input given at the block's start: Anthropic sends one or the other.
      block.input = undefined
      if (isString(piece) && piece !== "") this.toolDelta(block.tool, { arguments: piece })
    }
  }

  /** The finish_reason chunk, once (`stopReason` undefined: the stream ended without one). */
  private finish(stopReason: unknown): void {
    if (this.finished) return
    this.finished = true
    this.start()
    this.chunk({}, chatFinishReason(stopReason ?? (this.tools > 0 ? "tool_use" : undefined)))
  }
}
