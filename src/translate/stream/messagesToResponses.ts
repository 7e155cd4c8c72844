/**
 * An Anthropic Messages stream → a Responses stream, event by event.
 *
 * message_start → response.created + response.in_progress; a text block →
 * a message item (output_item.added, content_part.added, output_text.delta
 * per text delta, output_text.done, content_part.done, output_item.done); a
 * tool_use block → a function_call item (function_call_arguments.delta per
 * input_json_delta, .done); message_stop → response.completed or
 * response.incomplete with the whole response. Every event has its
 * sequence_number.
 *
 * Memory: the Responses format repeats each item's whole text in its `.done`
 * events and the whole output in response.completed, so this translator, and
 * only this one, keeps the output so far (bounded by the request's output
 * limit). An item's output_item.done waits for the next block or the stop
 * reason, which tells whether it is `completed` or `incomplete`.
 */
import { makeUsageAcc } from "../../meter/usage.js"
import { openaiStreamError } from "../errors.js"
import { makeId, nowSeconds } from "../ids.js"
import {
  functionCallItem,
  messageItem,
  outputText,
  responseObject,
  type ResponseHead,
} from "../response/shapes.js"
import { responsesEnd, type ResponsesEnd } from "../stopReasons.js"
import { countsOf } from "../usage.js"
import { isObject, isString, type Json } from "../wire.js"
import {
  addAnthropicUsage,
  deltaStopReason,
  eventJson,
  KEEPALIVE,
  namedEvent,
  SseTranslator,
} from "./base.js"

/** The item of the open Anthropic block: its id, its output index, and what it has said so far. */
type Item =
  | { readonly kind: "text"; readonly id: string; readonly output: number; readonly text: Array<string> }
  | {
      readonly kind: "tool"
      readonly id: string
      readonly output: number
      readonly callId: string
      readonly name: string
      readonly args: Array<string>
      /** The input given at the block's start, for a block with no input_json_delta. */
      readonly input: string
    }

/**
 * Translates one Anthropic Messages stream into a Responses stream (see the
 * module doc). `model`: what the client sees.
 */
export class MessagesToResponsesStream extends SseTranslator {
  private readonly id = makeId("resp_")
  private readonly createdAt = nowSeconds()
  private readonly usage = makeUsageAcc()
  /** Finished items, in output order. */
  private readonly output: Array<Json> = []
  private open: Item | undefined = undefined
  /** The last finished item, whose output_item.done waits for the stop reason. */
  private pending: Json | undefined = undefined
  private sequence = 0
  private started = false
  private stop: ResponsesEnd | undefined = undefined

  constructor(private readonly model: string) {
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
        return this.blockStart(event["content_block"])
      case "content_block_delta":
        return this.blockDelta(event["delta"])
      case "content_block_stop":
        return this.blockStop()
      case "message_delta": {
        addAnthropicUsage(this.usage, event)
        this.stop = responsesEnd(deltaStopReason(event))
        return
      }
      case "ping":
        return this.write(KEEPALIVE)
      case "message_stop":
        return this.finish()
      case "error": {
        const { type: code, message } = openaiStreamError(event)
        this.event("error", { code, message, param: null })
        return this.close()
      }
    }
  }

  private event(type: string, fields: Json): void {
    this.write(namedEvent(type, { type, ...fields, sequence_number: this.sequence++ }))
  }

  private head(end: ResponseHead["end"]): ResponseHead {
    return {
      id: this.id,
      model: this.model,
      createdAt: this.createdAt,
      end,
      usage: end === "in_progress" ? null : countsOf(this.usage),
    }
  }

  private start(): void {
    if (this.started) return
    this.started = true
    const response = responseObject(this.head("in_progress"), [])
    this.event("response.created", { response })
    this.event("response.in_progress", { response })
  }

  /** output_item.done of the pending item, with its final status. */
  private flushPending(status: string): void {
    const item = this.pending
    if (item === undefined) return
    this.pending = undefined
    item["status"] = status
    this.event("response.output_item.done", { output_index: this.output.length - 1, item })
  }

  private blockStart(block: unknown): void {
    if (!isObject(block) || this.open !== undefined) return
    const kind = block["type"] === "text" ? "text" : block["type"] === "tool_use" ? "tool" : undefined
    if (kind === undefined || (kind === "tool" && (!isString(block["id"]) || !isString(block["name"]))))
      return
    this.start()
    this.flushPending("completed")
    const output = this.output.length
    if (kind === "text") {
      const item: Item = { kind, id: makeId("msg_"), output, text: [] }
      this.open = item
      this.event("response.output_item.added", {
        output_index: output,
        item: messageItem(item.id, undefined, "in_progress"),
      })
      this.event("response.content_part.added", {
        item_id: item.id,
        output_index: output,
        content_index: 0,
        part: outputText(""),
      })
      this.blockDelta({ type: "text_delta", text: block["text"] })
    } else {
      const input = block["input"]
      const item: Item = {
        kind,
        id: makeId("fc_"),
        output,
        callId: block["id"] as string,
        name: block["name"] as string,
        args: [],
        input: isObject(input) && Object.keys(input).length > 0 ? JSON.stringify(input) : "{}",
      }
      this.open = item
      this.event("response.output_item.added", {
        output_index: output,
        item: functionCallItem(item.id, item.callId, item.name, "", "in_progress"),
      })
    }
  }

  private blockDelta(delta: unknown): void {
    const item = this.open
    if (item === undefined || !isObject(delta)) return
    if (
      item.kind === "text" &&
      delta["type"] === "text_delta" &&
      isString(delta["text"]) &&
      delta["text"] !== ""
    ) {
      item.text.push(delta["text"])
      this.event("response.output_text.delta", {
        item_id: item.id,
        output_index: item.output,
        content_index: 0,
        delta: delta["text"],
        logprobs: [],
      })
    } else if (
      item.kind === "tool" &&
      delta["type"] === "input_json_delta" &&
      isString(delta["partial_json"])
    ) {
      if (delta["partial_json"] === "") return
      item.args.push(delta["partial_json"])
      this.event("response.function_call_arguments.delta", {
        item_id: item.id,
        output_index: item.output,
        delta: delta["partial_json"],
      })
    }
  }

  private blockStop(): void {
    const item = this.open
    if (item === undefined) return
    this.open = undefined
    if (item.kind === "text") {
      const text = item.text.join("")
      const at = { item_id: item.id, output_index: item.output, content_index: 0 }
      this.event("response.output_text.done", { ...at, text, logprobs: [] })
      this.event("response.content_part.done", { ...at, part: outputText(text) })
      this.pending = messageItem(item.id, text, "completed")
    } else {
      const args = item.args.length === 0 ? item.input : item.args.join("")
      this.event("response.function_call_arguments.done", {
        item_id: item.id,
        output_index: item.output,
        arguments: args,
      })
      this.pending = functionCallItem(item.id, item.callId, item.name, args, "completed")
    }
    this.output.push(this.pending)
  }

  private finish(): void {
    this.start()
    this.blockStop()
    const end = this.stop ?? responsesEnd(undefined)
    this.flushPending(end.status === "incomplete" ? "incomplete" : "completed")
    const type = end.status === "incomplete" ? "response.incomplete" : "response.completed"
    this.event(type, { response: responseObject(this.head(end), this.output) })
    this.close()
  }
}
