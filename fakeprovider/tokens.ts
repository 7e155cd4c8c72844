/**
 * The fake provider's deterministic token accounting.
 *
 * Input tokens are a count of words and punctuation marks in the text the client sent, deliberately not the
 * gateway's bytes/4 estimate, so that settling visibly replaces the estimate. Output token `i` is the text
 * `tok{i} `.
 */
import type { Scenario } from "./scenario.js"

/** Default number of output tokens when the request's limit is higher or absent. */
export const defaultOutputTokens = 16

const wordOrMark = /[\p{L}\p{N}_]+|[^\p{L}\p{N}_\s]/gu

/** Number of words (letters, digits, `_`) and single punctuation marks in `text`. */
export const countTokens = (text: string): number => {
  let count = 0
  wordOrMark.lastIndex = 0
  while (wordOrMark.exec(text) !== null) count++
  return count
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Text of a `content` field: a string, or the `text` of its `{type:"text"}` blocks / parts. */
const contentText = (content: unknown): ReadonlyArray<string> => {
  if (typeof content === "string") return [content]
  if (!Array.isArray(content)) return []
  const texts: Array<string> = []
  for (const block of content) {
    if (isRecord(block) && block["type"] === "text" && typeof block["text"] === "string")
      texts.push(block["text"])
  }
  return texts
}

const messagesText = (messages: unknown): ReadonlyArray<string> =>
  Array.isArray(messages)
    ? messages.flatMap((message) => (isRecord(message) ? contentText(message["content"]) : []))
    : []

/** Input tokens of an Anthropic Messages body: `system` plus every message's text content. */
export const anthropicInputTokens = (body: Record<string, unknown>): number =>
  [...contentText(body["system"]), ...messagesText(body["messages"])].reduce(
    (n, text) => n + countTokens(text),
    0,
  )

/** Input tokens of an OpenAI Chat Completions body: every message's text content. */
export const openaiInputTokens = (body: Record<string, unknown>): number =>
  messagesText(body["messages"]).reduce((n, text) => n + countTokens(text), 0)

/**
 * Text of one Responses input item: message content (a string, or input_text / output_text parts), or a
 * function_call_output's `output` string.
 */
const responsesItemText = (item: unknown): ReadonlyArray<string> => {
  if (typeof item === "string") return [item]
  if (!isRecord(item)) return []
  if (item["type"] === "function_call_output")
    return typeof item["output"] === "string" ? [item["output"]] : []
  const content = item["content"]
  if (typeof content === "string") return [content]
  if (!Array.isArray(content)) return []
  return content.flatMap((part) =>
    isRecord(part) &&
    (part["type"] === "input_text" || part["type"] === "output_text") &&
    typeof part["text"] === "string"
      ? [part["text"]]
      : [],
  )
}

/** Input tokens of an OpenAI Responses body: `instructions` plus the text of `input` (a string or items). */
export const responsesInputTokens = (body: Record<string, unknown>): number => {
  const instructions = body["instructions"]
  const input = body["input"]
  const texts = [
    ...(typeof instructions === "string" ? [instructions] : []),
    ...(Array.isArray(input) ? input.flatMap(responsesItemText) : responsesItemText(input)),
  ]
  return texts.reduce((n, text) => n + countTokens(text), 0)
}

/** The `text` of a Gemini `Content`'s parts (`{parts:[{text}, …]}`). */
const geminiContentText = (content: unknown): ReadonlyArray<string> => {
  const parts = isRecord(content) ? content["parts"] : undefined
  if (!Array.isArray(parts)) return []
  return parts.flatMap((part) => (isRecord(part) && typeof part["text"] === "string" ? [part["text"]] : []))
}

/** Input tokens of a Gemini `generateContent` body: `systemInstruction` plus the text parts of `contents`. */
export const geminiInputTokens = (body: Record<string, unknown>): number => {
  const contents = body["contents"]
  return [
    ...geminiContentText(body["systemInstruction"]),
    ...(Array.isArray(contents) ? contents.flatMap(geminiContentText) : []),
  ].reduce((n, text) => n + countTokens(text), 0)
}

/** The text of output token `index` (0-based). */
export const tokenText = (index: number): string => `tok${index} `

/** The full output text of `count` tokens. Only for small counts (tests, non-streaming helpers). */
export const outputText = (count: number): string =>
  Array.from({ length: count }, (_, i) => tokenText(i)).join("")

/** The output text of `count` tokens in chunks of at most 4096 tokens, for events that repeat a long text. */
export function* outputTextChunks(count: number): Generator<string> {
  for (let start = 0; start < count; start += 4096) {
    let chunk = ""
    for (let index = start; index < Math.min(count, start + 4096); index++) chunk += tokenText(index)
    yield chunk
  }
}

/** How many tokens a response generates and why it stops. */
export interface OutputPlan {
  readonly tokens: number
  /** True when the output reached the request's max tokens (`max_tokens` / `length`). */
  readonly hitLimit: boolean
}

/**
 * Output size: `tokens:N` gives N, `max-tokens` gives the limit, otherwise `min(limit, 16)`.
 *
 * @param maxTokens the request's output limit (`max_tokens`, or OpenAI `max_completion_tokens ?? max_tokens`).
 */
export const planOutput = (scenario: Scenario, maxTokens: number | undefined): OutputPlan => {
  const limit = maxTokens !== undefined && maxTokens >= 0 ? Math.floor(maxTokens) : undefined
  const tokens =
    scenario.tokens ??
    (scenario.maxTokens && limit !== undefined
      ? limit
      : Math.min(limit ?? defaultOutputTokens, defaultOutputTokens))
  return { tokens, hitLimit: limit !== undefined && tokens >= limit }
}

/** A number field of a JSON body, or undefined. */
export const numberField = (body: Record<string, unknown>, name: string): number | undefined => {
  const value = body[name]
  return typeof value === "number" && Number.isFinite(value) ? value : undefined
}
