/**
 * A Gemini `streamGenerateContent?alt=sse` stream → a Chat Completions
 * stream. Each upstream event is one GenerateContentResponse: the first gives
 * the role chunk; text parts → content chunks; `functionCall` parts (whole
 * calls, Gemini does not split them) → one tool call chunk each; thoughts are
 * skipped; a `finishReason` (or a blocked prompt) → the finish_reason chunk.
 * `usageMetadata` comes again in every event, so only the last one counts:
 * it becomes the usage-only chunk when the upstream ends, followed by
 * `[DONE]` only when a finish reason came (a stream cut off must not look
 * complete). An in-band `{"error":…}` becomes an OpenAI error event and ends
 * the stream. Data that is not JSON is passed on as it came (one event):
 * this translator runs at the transport, below the gateway's meter, which
 * must see a malformed upstream stream as malformed.
 */
import { nowSeconds } from "../ids.js"
import { dataEvent, DONE, eventJson, SseTranslator } from "../stream/base.js"
import { isString, type Json } from "../wire.js"
import { geminiErrorObject, openaiErrorOf } from "./errors.js"
import {
  candidateParts,
  chatFinish,
  completionId,
  firstCandidate,
  geminiChatUsage,
  partText,
  promptBlocked,
  toolCall,
} from "./response.js"

/** Translates one Gemini stream into a Chat Completions stream for `model` (see the module doc). */
export class GeminiToChatStream extends SseTranslator {
  private id: string | undefined = undefined
  private readonly created = nowSeconds()
  private usage: unknown = undefined
  private finished = false
  private tools = 0

  constructor(private readonly model: string) {
    super()
  }

  protected onEvent(_event: string, data: string): void {
    const response = eventJson(data)
    if (response === undefined) return this.write(`${data.replace(/^/gm, "data: ")}\n\n`)
    const error = geminiErrorObject(response)
    if (error !== undefined) return this.fail(error)
    this.start(response)
    if (response["usageMetadata"] !== undefined) this.usage = response["usageMetadata"]
    if (this.finished) return
    const candidate = firstCandidate(response)
    for (const part of candidateParts(candidate)) this.part(part)
    const finishReason = candidate?.["finishReason"]
    if (isString(finishReason) && finishReason !== "") this.finish(chatFinish(finishReason, this.tools > 0))
    else if (candidate === undefined && promptBlocked(response)) this.finish("content_filter")
  }

  protected override onEnd(): void {
    const usage = geminiChatUsage(this.usage)
    if (usage !== undefined) this.write(dataEvent({ ...this.head(), choices: [], usage }))
    if (this.finished) this.write(DONE)
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

  /** The role chunk, once, at the first response (whose `responseId` names the completion). */
  private start(response: Json): void {
    if (this.id !== undefined) return
    this.id = completionId(response)
    this.chunk({ role: "assistant", content: "" })
  }

  private part(part: Json): void {
    const text = partText(part)
    if (text !== undefined && text !== "") return this.chunk({ content: text })
    const call = toolCall(part)
    if (call !== undefined) this.chunk({ tool_calls: [{ index: this.tools++, ...call }] })
  }

  private finish(reason: string): void {
    this.finished = true
    this.chunk({}, reason)
  }

  /** An in-band error: the OpenAI error event, and nothing after it. */
  private fail(error: Json): void {
    const code = error["code"]
    const { message, type, code: status } = openaiErrorOf(error, typeof code === "number" ? code : 500)
    this.write(dataEvent({ error: { message, type, code: status } }))
    this.close()
  }
}
