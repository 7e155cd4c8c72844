/**
 * A Chat Completions stream → an Anthropic Messages stream, event by event.
 *
 * The first chunk → message_start (input usage 0: Chat reports usage only at
 * the end); content deltas → a text block; each tool call → a tool_use block
 * with input_json_delta pieces; finish_reason closes the open block; the
 * usage chunk is remembered; `[DONE]` → message_delta (stop reason and the
 * whole usage) and message_stop. Anthropic blocks cannot interleave, so a
 * block closes when another starts; argument pieces for a tool call whose
 * block already closed (interleaved parallel calls) cannot be placed and are
 * dropped. Per stream it keeps the open block and the Chat indexes of the
 * tool calls seen.
 */
import { makeUsageAcc, mergeUsage, openaiReport } from "../../meter/usage.js"
import { anthropicErrorType, boundedMessage } from "../errors.js"
import { makeId } from "../ids.js"
import { anthropicMessage } from "../response/shapes.js"
import { anthropicStopReason } from "../stopReasons.js"
import { anthropicUsage, countsOf, NO_TOKENS } from "../usage.js"
import { isObject, isString, type Json } from "../wire.js"
import { eventJson, namedEvent, SseTranslator } from "./base.js"

type Open =
  | { readonly kind: "text"; readonly index: number }
  | { readonly kind: "tool"; readonly index: number; readonly tool: number }

/**
 * Translates one Chat Completions stream into an Anthropic Messages stream
 * (see the module doc). `model`: what the client sees.
 */
export class ChatToMessagesStream extends SseTranslator {
  private readonly id = makeId("msg_")
  private readonly usage = makeUsageAcc()
  /** Chat indexes of the tool calls that got a block. */
  private readonly tools = new Set<number>()
  private open: Open | undefined = undefined
  private blocks = 0
  private started = false
  private finishReason: unknown = undefined

  constructor(private readonly model: string) {
    super()
  }

  protected onEvent(event: string, data: string): void {
    if (data === "[DONE]") return this.finish()
    const chunk = eventJson(data)
    if (chunk === undefined) return
    // OpenAI puts the error on a data-only chunk; some compatible servers name the event instead.
    const error = event === "error" && absentError(chunk["error"]) ? chunk : chunk["error"]
    if (!absentError(error)) {
      const detail = isObject(error) ? error : { message: error }
      const type = anthropicErrorType(detail["type"], "api_error")
      this.write(
        namedEvent("error", {
          type: "error",
          error: { type, message: boundedMessage(detail["message"], type) },
        }),
      )
      return this.close()
    }
    this.start()
    const report = openaiReport(chunk["usage"])
    if (report !== undefined) mergeUsage(this.usage, report)
    const choices = chunk["choices"]
    const choice: unknown = Array.isArray(choices) ? choices[0] : undefined
    if (!isObject(choice)) return
    const delta = choice["delta"]
    if (isObject(delta)) {
      this.text(delta["content"])
      this.text(delta["refusal"])
      const calls = delta["tool_calls"]
      if (Array.isArray(calls)) for (const call of calls) if (isObject(call)) this.toolCall(call)
    }
    if (choice["finish_reason"] !== undefined && choice["finish_reason"] !== null) {
      this.closeOpen()
      this.finishReason = choice["finish_reason"]
    }
  }

  /** Upstream ended without `[DONE]` but after its finish_reason: end the message as it would have. */
  protected override onEnd(): void {
    if (this.finishReason !== undefined) this.finish()
  }

  private event(name: string, data: Json): void {
    this.write(namedEvent(name, { type: name, ...data }))
  }

  private start(): void {
    if (this.started) return
    this.started = true
    this.event("message_start", { message: anthropicMessage(this.id, this.model, [], null, NO_TOKENS) })
  }

  private closeOpen(): void {
    if (this.open === undefined) return
    this.event("content_block_stop", { index: this.open.index })
    this.open = undefined
  }

  private text(text: unknown): void {
    if (!isString(text) || text === "") return
    if (this.open?.kind !== "text") {
      this.closeOpen()
      this.open = { kind: "text", index: this.blocks++ }
      this.event("content_block_start", {
        index: this.open.index,
        content_block: { type: "text", text: "", citations: null },
      })
    }
    this.event("content_block_delta", { index: this.open.index, delta: { type: "text_delta", text } })
  }

  private toolCall(call: Json): void {
    const tool = typeof call["index"] === "number" ? call["index"] : 0
    const fn = isObject(call["function"]) ? call["function"] : {}
    if (this.open?.kind !== "tool" || this.open.tool !== tool) {
      if (this.tools.has(tool)) return
      this.tools.add(tool)
      this.closeOpen()
      this.open = { kind: "tool", index: this.blocks++, tool }
      const id = isString(call["id"]) && call["id"] !== "" ? call["id"] : makeId("call_")
      const name = isString(fn["name"]) ? fn["name"] : ""
      this.event("content_block_start", {
        index: this.open.index,
        content_block: { type: "tool_use", id, name, input: {} },
      })
    }
    const piece = fn["arguments"]
    if (isString(piece) && piece !== "")
      this.event("content_block_delta", {
        index: this.open.index,
        delta: { type: "input_json_delta", partial_json: piece },
      })
  }

  /** message_delta (stop reason, the whole usage) and message_stop. */
  private finish(): void {
    this.start()
    this.closeOpen()
    let stopReason: string = anthropicStopReason(this.finishReason)
    if (stopReason === "end_turn" && this.tools.size > 0) stopReason = "tool_use"
    this.event("message_delta", {
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: anthropicUsage(countsOf(this.usage)),
    })
    this.event("message_stop", {})
    this.close()
  }
}

/** Chat streams put `"error"` on a chunk only when it failed (null or absent otherwise). */
const absentError = (error: unknown): boolean => error === undefined || error === null
