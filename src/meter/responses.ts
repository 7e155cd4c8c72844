/**
 * The meter of an OpenAI Responses stream: typed events (`event: <type>`,
 * `data: {"type":<type>,…}`), no `[DONE]`. The usage comes with the final
 * `response.completed` (or `response.incomplete`, or `response.failed`)
 * event's `response.usage`; the output starts with the first delta of text,
 * refusal, reasoning or function-call arguments, or a function-call item.
 * An in-band error is `response.failed` (its `response.error`) or an `error`
 * event (`code`, `message`).
 */
import { byteLengthOf, FastEventMeter, isObject, toInbandError, type Json } from "./eventMeter.js"
import { OUTPUT_DELTA_TYPES, ResponsesFast } from "./openaiFast.js"
import { mergeUsage, noteModel, responsesReport } from "./usage.js"

/** Events whose `delta` is generated output. */
const OUTPUT_DELTAS = new Set(OUTPUT_DELTA_TYPES)

/** Longest response id remembered (a real one is ~50 characters). */
const MAX_ID_LENGTH = 256

export class ResponsesMeter extends FastEventMeter {
  /** `fast`: most events are read from their bytes where they can be (`openaiFast.ts`); false: always parsed. */
  constructor(fast = true) {
    super(fast ? new ResponsesFast() : undefined)
  }

  protected fold(event: string, data: unknown): void {
    if (!isObject(data)) return
    const type = typeof data["type"] === "string" ? data["type"] : event
    if (OUTPUT_DELTAS.has(type)) {
      this.contentStarted = true
      this.outputChars += byteLengthOf(data["delta"])
      return
    }
    switch (type) {
      case "response.created":
        return this.foldResponse(data["response"])
      case "response.output_item.added": {
        const item = data["item"]
        // A tool call is output even before its arguments stream.
        if (isObject(item) && item["type"] !== "message" && item["type"] !== "reasoning")
          this.contentStarted = true
        return
      }
      case "response.completed":
      case "response.incomplete":
        this.finished = true
        return this.foldResponse(data["response"])
      case "response.failed": {
        const response = data["response"]
        this.foldResponse(response)
        if (this.inbandError === undefined) {
          this.inbandError = toInbandError(isObject(response) ? response["error"] : undefined)
        }
        return
      }
      case "error":
        if (this.inbandError === undefined) this.inbandError = errorEvent(data)
        return
    }
  }

  /** The id (first seen) and usage of a `response` object. */
  private foldResponse(response: unknown): void {
    if (!isObject(response)) return
    noteModel(this.usage, response["model"])
    const id = response["id"]
    if (
      this.responseId === undefined &&
      typeof id === "string" &&
      id.length > 0 &&
      id.length <= MAX_ID_LENGTH
    )
      this.responseId = id
    const report = responsesReport(response["usage"])
    if (report !== undefined) mergeUsage(this.usage, report)
  }
}

/** A Responses `error` event: `{"type":"error","code":…,"message":…}` (the code is the error's type). */
const errorEvent = (data: Json) => {
  const code = data["code"]
  return {
    type: typeof code === "string" && code.length > 0 ? code : "api_error",
    message: typeof data["message"] === "string" ? data["message"] : "",
  }
}
